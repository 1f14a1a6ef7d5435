package command

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
)

// seedRow is the body of the seed's curl example, verbatim.
const seedRow = `{
  "type": "directory_row",
  "command": "mytool",
  "description": "A sample CLI tool for processing files.",
  "args": [
    {"name": "input_file", "type": "string", "description": "Path to the input file.", "required": true}
  ],
  "flags": [
    {"name": "output", "type": "string", "description": "Path for the output file.", "required": false,
     "default": "./output.txt", "short_alias": "-o"},
    {"name": "verbose", "type": "boolean", "description": "Enable verbose logging.", "required": false,
     "default": false, "short_alias": "-v"}
  ],
  "output_format": "text",
  "invocation_method": "exec",
  "source_url": "https://github.com/example/mytool/releases/v1.0.0"
}`

// seedInput is the seed's conformance example input.
const seedInput = `{"input_file": "data.txt", "output": "result.txt", "verbose": true}`

func mustRow(t testing.TB, body string) *row.Row {
	t.Helper()
	r, err := row.Decode([]byte(body))
	if err != nil {
		t.Fatalf("row.Decode(%s): %v", body, err)
	}
	return r
}

func mustInput(t testing.TB, body string) map[string]any {
	t.Helper()
	m, err := protocol.DecodeObject([]byte(body), 0)
	if err != nil {
		t.Fatalf("DecodeObject(%s): %v", body, err)
	}
	return m
}

// The seed's conformance rule: this row and input give exactly
// `mytool data.txt -o result.txt -v`.
func TestSeedConformance(t *testing.T) {
	c, err := Build(mustRow(t, seedRow), mustInput(t, seedInput))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mytool", "data.txt", "-o", "result.txt", "-v"}; !reflect.DeepEqual(c.Argv, want) {
		t.Errorf("argv = %q, want %q", c.Argv, want)
	}
	if c.Line != "mytool data.txt -o result.txt -v" {
		t.Errorf("command = %q", c.Line)
	}
	if c.Method != row.MethodExec || c.Shell != "" {
		t.Errorf("method = %q, shell = %q", c.Method, c.Shell)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"argv":["mytool","data.txt","-o","result.txt","-v"],"command":"mytool data.txt -o result.txt -v","invocation_method":"exec"}`
	if string(b) != wantJSON {
		t.Errorf("JSON = %s\nwant   %s", b, wantJSON)
	}
}

// rulesRow has every kind of param: required and optional args with and
// without defaults, an array tail, and flags with and without aliases.
const rulesRow = `{"command":"tool",
 "args":[
  {"name":"src","type":"string","required":true},
  {"name":"count","type":"integer","default":3},
  {"name":"ratio","type":"number"},
  {"name":"flag_arg","type":"boolean","default":true},
  {"name":"rest","type":"array"}],
 "flags":[
  {"name":"verbose","type":"boolean","short_alias":"-v"},
  {"name":"level","type":"integer"},
  {"name":"scale","type":"number","short_alias":"-s"},
  {"name":"tag","type":"array","short_alias":"-t"},
  {"name":"name","type":"string"},
  {"name":"dry-run","type":"boolean"}]}`

func TestBuildRules(t *testing.T) {
	r := mustRow(t, rulesRow)
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"required only", `{"src":"a"}`, []string{"tool", "a"}},
		{"trailing missing args left out", `{"src":"a","count":5}`, []string{"tool", "a", "5"}},
		{"gap takes default", `{"src":"a","ratio":0.5}`, []string{"tool", "a", "3", "0.5"}},
		{"boolean default fills a gap", `{"src":"a","count":1,"ratio":2,"rest":["x"]}`, []string{"tool", "a", "1", "2", "true", "x"}},
		{"boolean arg prints", `{"src":"a","count":1,"ratio":2,"flag_arg":false}`, []string{"tool", "a", "1", "2", "false"}},
		{"array arg expands", `{"src":"a","count":1,"ratio":1.25,"flag_arg":true,"rest":["x","y z",7,false]}`,
			[]string{"tool", "a", "1", "1.25", "true", "x", "y z", "7", "false"}},
		{"empty array arg", `{"src":"a","count":1,"ratio":1,"flag_arg":true,"rest":[]}`, []string{"tool", "a", "1", "1", "true"}},
		{"flags in declared order, not input order", `{"name":"n","src":"a","level":2,"verbose":true}`,
			[]string{"tool", "a", "-v", "--level", "2", "--name", "n"}},
		{"boolean true is the flag alone", `{"src":"a","dry-run":true}`, []string{"tool", "a", "--dry-run"}},
		{"boolean false is nothing", `{"src":"a","verbose":false,"dry-run":false}`, []string{"tool", "a"}},
		{"short alias used", `{"src":"a","scale":1.5}`, []string{"tool", "a", "-s", "1.5"}},
		{"array flag repeats", `{"src":"a","tag":["x","y",3]}`, []string{"tool", "a", "-t", "x", "-t", "y", "-t", "3"}},
		{"empty array flag is nothing", `{"src":"a","tag":[]}`, []string{"tool", "a"}},
		{"empty string values kept", `{"src":"","name":""}`, []string{"tool", "", "--name", ""}},
		{"integral float for integer", `{"src":"a","count":2.0,"level":1e3}`, []string{"tool", "a", "2", "--level", "1000"}},
		{"number shortest form", `{"src":"a","scale":0.1}`, []string{"tool", "a", "-s", "0.1"}},
		{"no exponent for big numbers", `{"src":"a","scale":1e21}`, []string{"tool", "a", "-s", "1000000000000000000000"}},
		{"no exponent for small numbers", `{"src":"a","scale":1.5e-7}`, []string{"tool", "a", "-s", "0.00000015"}},
		{"negative numbers", `{"src":"a","scale":-2.5,"level":-7}`, []string{"tool", "a", "--level=-7", "--scale=-2.5"}},
		{"big integers", `{"src":"a","level":9223372036854775807}`, []string{"tool", "a", "--level", "9223372036854775807"}},
		{"integer beyond int64", `{"src":"a","level":100000000000000000000}`, []string{"tool", "a", "--level", "100000000000000000000"}},
		{"dash positional moves flags first", `{"src":"-x","verbose":true,"name":"n"}`,
			[]string{"tool", "-v", "--name", "n", "--", "-x"}},
		{"dash in array arg", `{"src":"a","count":1,"ratio":1,"flag_arg":true,"rest":["ok","--weird"]}`,
			[]string{"tool", "--", "a", "1", "1", "true", "ok", "--weird"}},
		{"lone dash positional", `{"src":"-"}`, []string{"tool", "--", "-"}},
		{"negative positional", `{"src":"a","count":-1}`, []string{"tool", "--", "a", "-1"}},
		{"dash flag value uses long form", `{"src":"a","name":"-n"}`, []string{"tool", "a", "--name=-n"}},
		{"dash flag value with alias uses long form", `{"src":"a","tag":["ok","-bad"]}`,
			[]string{"tool", "a", "-t", "ok", "--tag=-bad"}},
		{"dash everywhere", `{"src":"--","name":"--"}`, []string{"tool", "--name=--", "--", "--"}},
		{"strings pass unchanged", `{"src":"a b;$(rm -rf /)*'\"\n\t é"}`, []string{"tool", "a b;$(rm -rf /)*'\"\n\t é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(r, mustInput(t, tt.input))
			if err != nil {
				t.Fatalf("Build(%s) = %v", tt.input, err)
			}
			if !reflect.DeepEqual(c.Argv, tt.want) {
				t.Fatalf("Build(%s) argv =\n%q\nwant\n%q", tt.input, c.Argv, tt.want)
			}
			if got := parseArgv(t, c.Line); !reflect.DeepEqual(got, c.Argv) {
				t.Fatalf("command %q parses to %q, not the argv", c.Line, got)
			}
		})
	}
}

// A dash default filling a gap also moves positionals behind "--".
func TestBuildDashDefault(t *testing.T) {
	r := mustRow(t, `{"command":"t","args":[{"name":"a","type":"string","default":"-"},{"name":"b","type":"string"}]}`)
	c, err := Build(r, map[string]any{"b": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"t", "--", "-", "x"}; !reflect.DeepEqual(c.Argv, want) {
		t.Errorf("argv = %q, want %q", c.Argv, want)
	}
}

func TestBuildShellRow(t *testing.T) {
	r := mustRow(t, `{"command":"grep","invocation_method":"shell",
		"args":[{"name":"pattern","type":"string","required":true},{"name":"files","type":"array"}],
		"flags":[{"name":"count","type":"boolean","short_alias":"-c"}]}`)
	c, err := Build(r, map[string]any{"pattern": "it's $HOME", "files": []any{"*.go", "a b"}, "count": true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grep", "it's $HOME", "*.go", "a b", "-c"}
	if !reflect.DeepEqual(c.Argv, want) {
		t.Fatalf("argv = %q", c.Argv)
	}
	if c.Method != row.MethodShell || c.Shell == "" || c.Shell != c.Line {
		t.Fatalf("shell row: method %q, shell %q, line %q", c.Method, c.Shell, c.Line)
	}
	if c.Shell != `grep "it's \$HOME" '*.go' 'a b' -c` {
		t.Errorf("shell = %s", c.Shell)
	}
	if got := parseArgv(t, c.Shell); !reflect.DeepEqual(got, want) {
		t.Errorf("shell string parses to %q", got)
	}
}

// Go callers may pass Go numbers, json.Number and []string.
func TestBuildGoValues(t *testing.T) {
	r := mustRow(t, `{"command":"t","flags":[
		{"name":"i","type":"integer"},{"name":"n","type":"number"},{"name":"l","type":"array"}]}`)
	tests := []struct {
		in   map[string]any
		want []string
	}{
		{map[string]any{"i": 7}, []string{"t", "--i", "7"}},
		{map[string]any{"i": int32(-7)}, []string{"t", "--i=-7"}},
		{map[string]any{"i": uint64(math.MaxUint64)}, []string{"t", "--i", "18446744073709551615"}},
		{map[string]any{"i": float32(4)}, []string{"t", "--i", "4"}},
		{map[string]any{"i": math.Copysign(0, -1)}, []string{"t", "--i", "0"}},
		{map[string]any{"n": float32(0.5)}, []string{"t", "--n", "0.5"}},
		{map[string]any{"n": 3}, []string{"t", "--n", "3"}},
		{map[string]any{"i": json.Number("12")}, []string{"t", "--i", "12"}},
		{map[string]any{"i": json.Number("1e2")}, []string{"t", "--i", "100"}},
		{map[string]any{"i": json.Number("123456789012345678901234567890")}, []string{"t", "--i", "123456789012345678901234567890"}},
		{map[string]any{"i": json.Number("-0")}, []string{"t", "--i", "0"}},
		{map[string]any{"n": json.Number("1.50")}, []string{"t", "--n", "1.5"}},
		{map[string]any{"l": []string{"a", "-b"}}, []string{"t", "--l", "a", "--l=-b"}},
		{map[string]any{"l": []any{uint8(1), 2.5, json.Number("3"), true}}, []string{"t", "--l", "1", "--l", "2.5", "--l", "3", "--l", "true"}},
	}
	for _, tt := range tests {
		c, err := Build(r, tt.in)
		if err != nil {
			t.Errorf("Build(%v) = %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(c.Argv, tt.want) {
			t.Errorf("Build(%v) = %q, want %q", tt.in, c.Argv, tt.want)
		}
	}
}

// Every input error is EInvalid and names the key in its hint and in
// Fields["field"].
func TestBuildErrors(t *testing.T) {
	r := mustRow(t, rulesRow)
	tests := []struct {
		name  string
		input map[string]any
		field string
		hint  string
	}{
		{"unknown key", map[string]any{"src": "a", "colour": "red"}, "colour",
			`unknown input key "colour"; this row takes: src, count, ratio, flag_arg, rest, verbose, level, scale, tag, name, dry-run`},
		{"first unknown key sorted", map[string]any{"zz": 1, "aa": 1}, "aa", `unknown input key "aa"`},
		{"unknown before missing", map[string]any{"x": 1}, "x", `unknown input key "x"`},
		{"missing required", map[string]any{}, "src", `missing required input "src" (arg, string)`},
		{"nil input", nil, "src", `missing required input "src"`},
		{"string got number", map[string]any{"src": int64(1)}, "src", `input "src" must be a string, got integer`},
		{"string got null", map[string]any{"src": nil}, "src", `input "src" must be a string, got null`},
		{"integer got fraction", map[string]any{"src": "a", "level": 1.5}, "level", `input "level" must be an integer, got 1.5`},
		{"integer got string", map[string]any{"src": "a", "level": "1"}, "level", `input "level" must be an integer, got string`},
		{"integer got bool", map[string]any{"src": "a", "level": true}, "level", `input "level" must be an integer, got boolean`},
		{"number got string", map[string]any{"src": "a", "scale": "1"}, "scale", `input "scale" must be a number, got string`},
		{"number NaN", map[string]any{"src": "a", "scale": math.NaN()}, "scale", `input "scale" must be a finite number`},
		{"number Inf", map[string]any{"src": "a", "scale": math.Inf(1)}, "scale", `must be a finite number, got +Inf`},
		{"malformed json.Number", map[string]any{"src": "a", "scale": json.Number("1..2")}, "scale", `got the malformed number "1..2"`},
		{"json.Number out of range", map[string]any{"src": "a", "scale": json.Number("1e999")}, "scale", "within float64 range"},
		{"boolean got string", map[string]any{"src": "a", "verbose": "true"}, "verbose", `input "verbose" must be a boolean, got string`},
		{"boolean got null", map[string]any{"src": "a", "verbose": nil}, "verbose", `must be a boolean, got null`},
		{"array got string", map[string]any{"src": "a", "tag": "x"}, "tag", `input "tag" must be an array of strings, numbers or booleans, got string`},
		{"array element object", map[string]any{"src": "a", "tag": []any{"x", map[string]any{}}}, "tag", `input "tag" [1] must be an array of strings, numbers or booleans, got object`},
		{"array element null", map[string]any{"src": "a", "tag": []any{nil}}, "tag", `[0] must be`},
		{"array element nested", map[string]any{"src": "a", "tag": []any{[]any{"x"}}}, "tag", `got array`},
		{"NUL in string", map[string]any{"src": "a\x00b"}, "src", `input "src" must not contain NUL bytes`},
		{"NUL in array", map[string]any{"src": "a", "tag": []any{"ok", "\x00"}}, "tag", `input "tag" [1] must not contain NUL bytes`},
		{"NUL in []string", map[string]any{"src": "a", "tag": []string{"\x00"}}, "tag", `[0] must not contain NUL`},
		{"invalid UTF-8", map[string]any{"src": "a\xffb"}, "src", `input "src" must be valid UTF-8`},
		{"invalid UTF-8 in array", map[string]any{"src": "a", "tag": []any{"\xe2\x82"}}, "tag", `input "tag" [0] must be valid UTF-8`},
		{"object value", map[string]any{"src": map[string]any{}}, "src", `must be a string, got object`},
		{"gap without default", map[string]any{"src": "a", "flag_arg": true}, "ratio",
			`input "ratio" is missing: the later arg "flag_arg" is given, and "ratio" has no default to fill its place; give "ratio" too`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(r, tt.input)
			if err == nil {
				t.Fatalf("Build(%v) = %q, want an error", tt.input, c.Argv)
			}
			checkErr(t, err, tt.field, tt.hint)
		})
	}
}

func TestBuildMissingRequiredFlag(t *testing.T) {
	r := mustRow(t, `{"command":"t","flags":[{"name":"mode","type":"string","required":true},
		{"name":"on","type":"boolean","required":true}]}`)
	checkErr(t, errOf(Build(r, map[string]any{"on": true})), "mode", `missing required input "mode" (flag, string)`)
	// A required boolean flag must be given, but false still emits nothing.
	checkErr(t, errOf(Build(r, map[string]any{"mode": "m"})), "on", `missing required input "on" (flag, boolean)`)
	c, err := Build(r, map[string]any{"mode": "m", "on": false})
	if err != nil || !reflect.DeepEqual(c.Argv, []string{"t", "--mode", "m"}) {
		t.Errorf("Build = %v, %v", c, err)
	}
}

// The row's JSON Schema is checked after the per-param checks.
func TestBuildSchema(t *testing.T) {
	r := mustRow(t, `{"command":"t","flags":[{"name":"level","type":"integer"},{"name":"name","type":"string"}],
		"schema":{"type":"object","properties":{"level":{"maximum":5},"name":{"pattern":"^[a-z]+$"}},
		"dependentRequired":{"name":["level"]}}}`)
	if _, err := Build(r, map[string]any{"level": int64(5), "name": "ok"}); err != nil {
		t.Fatal(err)
	}
	checkErr(t, errOf(Build(r, map[string]any{"level": int64(6)})), "level", "input does not match the row's schema: at '/level'")
	checkErr(t, errOf(Build(r, map[string]any{"level": 1, "name": "NO"})), "name", "at '/name'")
	err := errOf(Build(r, map[string]any{"name": "ok"}))
	checkErr(t, err, "", "input does not match the row's schema")
	// The type checks come first and give the plainer hint.
	checkErr(t, errOf(Build(r, map[string]any{"level": "6"})), "level", `input "level" must be an integer`)
}

// Go []string values are arrays to the schema too.
func TestBuildSchemaStringSlice(t *testing.T) {
	r := mustRow(t, `{"command":"t","flags":[{"name":"tag","type":"array"}],
		"schema":{"properties":{"tag":{"type":"array","maxItems":2,"items":{"type":"string"}}}}}`)
	in := map[string]any{"tag": []string{"a", "b"}}
	c, err := Build(r, in)
	if err != nil || !reflect.DeepEqual(c.Argv, []string{"t", "--tag", "a", "--tag", "b"}) {
		t.Fatalf("Build = %v, %v", c, err)
	}
	if _, ok := in["tag"].([]string); !ok {
		t.Error("Build modified the caller's input")
	}
	checkErr(t, errOf(Build(r, map[string]any{"tag": []string{"a", "b", "c"}})), "tag", "at '/tag'")
}

// One row and one Builder serve many goroutines (run with -race).
func TestBuildConcurrent(t *testing.T) {
	r := mustRow(t, `{"command":"t","invocation_method":"shell","source_url":"https://example.com/t",
		"args":[{"name":"a","type":"string","default":"x"},{"name":"b","type":"integer"}],
		"flags":[{"name":"v","type":"boolean","short_alias":"-v"}],
		"schema":{"properties":{"b":{"minimum":0}}}}`)
	b, err := Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			var err error
			for i := 0; i < 50 && err == nil; i++ {
				in := map[string]any{"b": int64(g + i), "v": i%2 == 0}
				var c1, c2 *Command
				if c1, err = Build(r, in); err == nil {
					if c2, err = b.Build(in); err == nil && c1.Shell != c2.Shell {
						err = errors.New("Build and Builder.Build disagree")
					}
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	if _, err := Compile(nil); protocol.ErrorCode(err) != protocol.EInvalid {
		t.Errorf("Compile(nil) = %v", err)
	}
	checkErr(t, errOf(Build(&row.Row{}, nil)), "command", "command is required")
	bad := &row.Row{Command: "t", Flags: []row.Param{{Name: "v", Type: "bool"}}}
	checkErr(t, errOf(Build(bad, nil)), "flags[0].type", `flags[0].type "bool" must be one of`)
}

// A Builder is reusable and gives the same result as Build.
func TestBuilderReuse(t *testing.T) {
	r := mustRow(t, seedRow)
	b, err := Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := b.Build(mustInput(t, seedInput))
		if err != nil || c.Line != "mytool data.txt -o result.txt -v" {
			t.Fatalf("run %d: %v %v", i, c, err)
		}
	}
	c, err := b.Build(map[string]any{"input_file": "x"})
	if err != nil || c.Line != "mytool x" {
		t.Fatalf("%v %v", c, err)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"mytool", "data.txt", "-o", "result.txt", "-v"}, "mytool data.txt -o result.txt -v"},
		{[]string{"my tool", ""}, "'my tool' ''"},
		{[]string{"if", "then", "!"}, "'if' 'then' '!'"},
		{[]string{"/usr/bin/env", "A=b"}, "/usr/bin/env 'A=b'"},
		{[]string{"t", "it's"}, `t "it's"`},
		{[]string{"t", "a\nb"}, "t 'a\nb'"},
		{[]string{"t", "a\r\nb"}, "t 'a\r''\nb'"},
		{[]string{"t", "it's\n$x"}, "t 'it'\\''s\n$x'"},
		{[]string{"t", "~", "#", "*", "?", "[", "{a,b}"}, "t '~' '#' '*' '?' '[' '{a,b}'"},
		{[]string{"t", "é日本"}, "t é日本"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := Render(tt.argv); got != tt.want {
			t.Errorf("Render(%q) = %q, want %q", tt.argv, got, tt.want)
		}
		if tt.argv != nil {
			if got := parseArgv(t, Render(tt.argv)); !reflect.DeepEqual(got, tt.argv) {
				t.Errorf("Render(%q) parses back to %q", tt.argv, got)
			}
		}
	}
	if Quote("a b") != "'a b'" || Quote("ab") != "ab" {
		t.Error("Quote disagrees with Render")
	}
}

func TestJSONNumber(t *testing.T) {
	for s, want := range map[string][2]bool{
		"0": {true, true}, "-12": {true, true}, "1.5": {false, true}, "1e5": {false, true}, "-1.5E-3": {false, true},
		"": {false, false}, "-": {false, false}, "01": {false, false}, "1.": {false, false}, ".5": {false, false},
		"1e": {false, false}, "+1": {false, false}, "NaN": {false, false}, "0x10": {false, false}, "1_0": {false, false},
	} {
		isInt, ok := jsonNumber(s)
		if [2]bool{isInt, ok} != want {
			t.Errorf("jsonNumber(%q) = %v, %v; want %v", s, isInt, ok, want)
		}
	}
}

func errOf(_ *Command, err error) error { return err }

func checkErr(t *testing.T, err error, field, hint string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not a *protocol.Error", err, err)
	}
	if pe.Code != protocol.EInvalid {
		t.Errorf("code = %q, want %q", pe.Code, protocol.EInvalid)
	}
	if !strings.Contains(pe.Hint, hint) {
		t.Errorf("hint = %q, want it to contain %q", pe.Hint, hint)
	}
	if field != "" {
		if got := pe.Fields["field"]; got != field {
			t.Errorf("Fields[field] = %v, want %q", got, field)
		}
		if !strings.Contains(pe.Hint, strings.SplitN(field, ".", 2)[0]) {
			t.Errorf("hint %q does not name %q", pe.Hint, field)
		}
	}
}
