package command_test

import (
	"encoding/json"
	"fmt"

	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
)

// The seed's conformance example: the my-cli-tool-v1 row and its input.
func Example() {
	r, err := row.Decode([]byte(`{
		"type": "directory_row",
		"command": "mytool",
		"description": "A sample CLI tool for processing files.",
		"args": [{"name": "input_file", "type": "string", "description": "Path to the input file.", "required": true}],
		"flags": [
			{"name": "output", "type": "string", "description": "Path for the output file.",
			 "required": false, "default": "./output.txt", "short_alias": "-o"},
			{"name": "verbose", "type": "boolean", "description": "Enable verbose logging.",
			 "required": false, "default": false, "short_alias": "-v"}
		],
		"output_format": "text",
		"invocation_method": "exec",
		"source_url": "https://github.com/example/mytool/releases/v1.0.0"
	}`))
	if err != nil {
		panic(err)
	}
	input, err := protocol.DecodeObject([]byte(`{"input_file": "data.txt", "output": "result.txt", "verbose": true}`), 0)
	if err != nil {
		panic(err)
	}
	c, err := command.Build(r, input)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", c.Argv)
	fmt.Println(c.Line)
	b, _ := json.Marshal(c)
	fmt.Println(string(b))
	// Output:
	// ["mytool" "data.txt" "-o" "result.txt" "-v"]
	// mytool data.txt -o result.txt -v
	// {"argv":["mytool","data.txt","-o","result.txt","-v"],"command":"mytool data.txt -o result.txt -v","invocation_method":"exec"}
}

// A shell row quotes every value, so input cannot inject shell syntax.
func ExampleBuild_shell() {
	r, _ := row.Decode([]byte(`{"command": "grep", "invocation_method": "shell",
		"args": [{"name": "pattern", "type": "string", "required": true}, {"name": "files", "type": "array"}]}`))
	c, err := command.Build(r, map[string]any{"pattern": "it's; rm -rf ~", "files": []any{"*.go", "-weird"}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", c.Argv)
	fmt.Println(c.Shell)
	// Output:
	// ["grep" "--" "it's; rm -rf ~" "*.go" "-weird"]
	// grep -- "it's; rm -rf ~" '*.go' -weird
}

// Input errors name the key.
func ExampleBuild_error() {
	r, _ := row.Decode([]byte(`{"command": "mytool",
		"flags": [{"name": "verbose", "type": "boolean", "short_alias": "-v"}]}`))
	_, err := command.Build(r, map[string]any{"verbose": "yes"})
	fmt.Println(err)
	fmt.Println(protocol.Body(err)["field"])
	// Output:
	// input "verbose" must be a boolean, got string
	// verbose
}

// Compile once, build many times.
func ExampleCompile() {
	r, _ := row.Decode([]byte(`{"command": "echo", "args": [{"name": "words", "type": "array"}]}`))
	b, err := command.Compile(r)
	if err != nil {
		panic(err)
	}
	for _, words := range [][]any{{"hello", 1.5}, {"-n", "x"}} {
		c, _ := b.Build(map[string]any{"words": words})
		fmt.Println(c.Line)
	}
	// Output:
	// echo hello 1.5
	// echo -- -n x
}
