package row

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

func seedBody(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed_row.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The body of the seed's curl example decodes to exactly the row it shows.
func TestDecodeSeedRow(t *testing.T) {
	r, err := Decode(seedBody(t))
	if err != nil {
		t.Fatalf("Decode(seed) = %v", err)
	}
	want := &Row{
		Command:     "mytool",
		Description: "A sample CLI tool for processing files.",
		Args: []Param{{
			Name: "input_file", Type: TypeString, Description: "Path to the input file.", Required: true,
		}},
		Flags: []Param{
			{Name: "output", Type: TypeString, Description: "Path for the output file.",
				Default: json.RawMessage(`"./output.txt"`), ShortAlias: "-o"},
			{Name: "verbose", Type: TypeBoolean, Description: "Enable verbose logging.",
				Default: json.RawMessage(`false`), ShortAlias: "-v"},
		},
		OutputFormat:     FormatText,
		InvocationMethod: MethodExec,
		SourceURL:        "https://github.com/example/mytool/releases/v1.0.0",
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("Decode(seed) =\n%+v\nwant\n%+v", r, want)
	}
	if got := r.InputKeys(); !reflect.DeepEqual(got, []string{"input_file", "output", "verbose"}) {
		t.Errorf("InputKeys = %q", got)
	}
	p, ok := r.Param("verbose")
	if !ok || p.ShortAlias != "-v" {
		t.Errorf("Param(verbose) = %+v, %v", p, ok)
	}
	if v, ok := DefaultValue(p); !ok || v != false {
		t.Errorf("verbose default = %v, %v; want false, true", v, ok)
	}
	if _, ok := r.Param("nope"); ok {
		t.Error("Param(nope) found a param")
	}
	if !r.IsFlag("output") || r.IsFlag("input_file") {
		t.Error("IsFlag is wrong")
	}
	if r.Method() != MethodExec || r.Format() != FormatText || r.TimeoutDuration() != 0 {
		t.Errorf("Method/Format/TimeoutDuration = %q %q %v", r.Method(), r.Format(), r.TimeoutDuration())
	}
}

// A decoded row marshals back to JSON that decodes to the same row.
func TestDecodeRoundTrip(t *testing.T) {
	r, err := Decode(seedBody(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Marshal(row)) = %v\n%s", err, b)
	}
	if !reflect.DeepEqual(r, r2) {
		t.Fatalf("round trip changed the row:\n%+v\n%+v", r, r2)
	}
}

func TestDecodeFillsDefaultsAndAcceptsNulls(t *testing.T) {
	r, err := Decode([]byte(`{"command":"ls","description":null,"args":null,"flags":[],"schema":null,
		"output_format":null,"invocation_method":null,"source_url":null,"timeout":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Row{Command: "ls", OutputFormat: FormatText, InvocationMethod: MethodExec}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	// "type" may be absent, the dispatch kind, or the directory category.
	for _, typ := range []string{`"directory_row"`, `"cli"`, `null`} {
		if _, err := Decode([]byte(`{"type":` + typ + `,"command":"ls"}`)); err != nil {
			t.Errorf("type %s: %v", typ, err)
		}
	}
}

func TestDecodeKeepsDefaultPresence(t *testing.T) {
	r, err := Decode([]byte(`{"command":"x","flags":[
		{"name":"a","type":"boolean"},
		{"name":"b","type":"boolean","default":false},
		{"name":"n","type":"integer","default":2.0},
		{"name":"l","type":"array","default":["x",1,true]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Flags[0].Default != nil {
		t.Errorf("absent default decoded as %q", r.Flags[0].Default)
	}
	if _, ok := DefaultValue(&r.Flags[0]); ok {
		t.Error("absent default reported as present")
	}
	if v, ok := DefaultValue(&r.Flags[1]); !ok || v != false {
		t.Errorf("false default = %v, %v", v, ok)
	}
	if v, ok := DefaultValue(&r.Flags[2]); !ok || v != 2.0 {
		t.Errorf("integral float default = %#v, %v", v, ok)
	}
	if v, ok := DefaultValue(&r.Flags[3]); !ok || !reflect.DeepEqual(v, []any{"x", int64(1), true}) {
		t.Errorf("array default = %#v, %v", v, ok)
	}
}

func TestTimeout(t *testing.T) {
	r, err := Decode([]byte(`{"command":"x","timeout":1.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.TimeoutDuration() != 1500*time.Millisecond {
		t.Errorf("TimeoutDuration = %v", r.TimeoutDuration())
	}
	r, err = Decode([]byte(`{"command":"x","timeout":86400}`))
	if err != nil || r.TimeoutDuration() != 24*time.Hour {
		t.Errorf("max timeout: %v %v", r, err)
	}
}

// Every validation error is EInvalid, names the field in its hint and in
// Fields["field"].
func TestDecodeErrors(t *testing.T) {
	const f0 = `{"name":"v","type":"boolean","short_alias":"-v"}`
	tests := []struct {
		name, body, field, hint string
	}{
		{"not an object", `[]`, "", "must be a JSON object"},
		{"bad json", `{"command":`, "", "not valid JSON"},
		{"trailing data", `{"command":"x"} {}`, "", "after its JSON value"},
		{"unknown key", `{"command":"x","key":"k"}`, "key", `unknown key "key"`},
		{"first unknown key sorted", `{"command":"x","zz":1,"aa":2}`, "aa", `unknown key "aa"`},
		{"other type", `{"type":"invocation","command":"x"}`, "type", `type "invocation" is not a directory row`},
		{"type not string", `{"type":1,"command":"x"}`, "type", "type must be a string"},
		{"missing command", `{"description":"d"}`, "command", "command is required"},
		{"null command", `{"command":null}`, "command", "command is required"},
		{"empty command", `{"command":""}`, "command", "command is required"},
		{"command not string", `{"command":5}`, "command", "command must be a string, got number"},
		{"command newline", `{"command":"a\nb"}`, "command", "must be UTF-8 without NUL bytes or line breaks"},
		{"command NUL", `{"command":"a\u0000b"}`, "command", "without NUL bytes"},
		{"description type", `{"command":"x","description":[]}`, "description", "description must be a string, got array"},
		{"output_format", `{"command":"x","output_format":"xml"}`, "output_format", `output_format "xml" must be "json" or "text"`},
		{"invocation_method", `{"command":"x","invocation_method":"ssh"}`, "invocation_method", `invocation_method "ssh" must be "exec" or "shell"`},
		{"source_url relative", `{"command":"x","source_url":"/rel/path"}`, "source_url", "must be an absolute URL"},
		{"source_url junk", `{"command":"x","source_url":"not a url"}`, "source_url", "must be an absolute URL"},
		{"source_url javascript", `{"command":"x","source_url":"javascript:alert(1)"}`, "source_url", "http or https"},
		{"source_url data", `{"command":"x","source_url":"data:text/html,<script>alert(1)</script>"}`, "source_url", "http or https"},
		{"timeout negative", `{"command":"x","timeout":-1}`, "timeout", "timeout -1 must be a number of seconds"},
		{"timeout too big", `{"command":"x","timeout":86401}`, "timeout", "to 86400"},
		{"timeout string", `{"command":"x","timeout":"10"}`, "timeout", "timeout must be a number of seconds, got string"},
		{"args not array", `{"command":"x","args":{}}`, "args", "args must be an array of objects, got object"},
		{"arg not object", `{"command":"x","args":["a"]}`, "args[0]", "args[0] must be an object, got string"},
		{"arg null", `{"command":"x","args":[null]}`, "args[0]", "args[0] must be an object, got null"},
		{"arg unknown key", `{"command":"x","args":[{"name":"a","type":"string","flag":1}]}`, "args[0].flag", `unknown key "flag" in args[0]`},
		{"arg short alias", `{"command":"x","args":[{"name":"a","type":"string","short_alias":"-a"}]}`, "args[0].short_alias", "positional args take no short alias"},
		{"flag unknown key", `{"command":"x","flags":[` + f0 + `,{"name":"w","type":"string","alias":"-w"}]}`, "flags[1].alias", `unknown key "alias" in flags[1]`},
		{"name missing", `{"command":"x","args":[{"type":"string"}]}`, "args[0].name", "args[0].name is required"},
		{"name not string", `{"command":"x","args":[{"name":1,"type":"string"}]}`, "args[0].name", "args[0].name must be a string"},
		{"name digit first", `{"command":"x","args":[{"name":"1x","type":"string"}]}`, "args[0].name", `args[0].name "1x" must match ^[A-Za-z_][A-Za-z0-9_-]*$`},
		{"name space", `{"command":"x","flags":[{"name":"a b","type":"string"}]}`, "flags[0].name", `flags[0].name "a b" must match`},
		{"name dash first", `{"command":"x","flags":[{"name":"-a","type":"string"}]}`, "flags[0].name", "must match"},
		{"name equals", `{"command":"x","flags":[{"name":"a=b","type":"string"}]}`, "flags[0].name", "must match"},
		{"type missing", `{"command":"x","args":[{"name":"a"}]}`, "args[0].type", "args[0].type is required"},
		{"type unknown", `{"command":"x","args":[{"name":"a","type":"str"}]}`, "args[0].type", `args[0].type "str" must be one of string, integer, number, boolean, array`},
		{"type object", `{"command":"x","flags":[{"name":"a","type":"object"}]}`, "flags[0].type", `flags[0].type "object" must be one of`},
		{"required not bool", `{"command":"x","args":[{"name":"a","type":"string","required":"yes"}]}`, "args[0].required", "args[0].required must be true or false, got string"},
		{"short alias long", `{"command":"x","flags":[` + f0 + `,{"name":"w","type":"boolean","short_alias":"-vv"}]}`, "flags[1].short_alias", `flags[1].short_alias "-vv" must match ^-[A-Za-z0-9]$`},
		{"short alias no dash", `{"command":"x","flags":[{"name":"w","type":"boolean","short_alias":"w"}]}`, "flags[0].short_alias", "must match ^-[A-Za-z0-9]$"},
		{"short alias symbol", `{"command":"x","flags":[{"name":"w","type":"boolean","short_alias":"-?"}]}`, "flags[0].short_alias", "must match"},
		{"short alias duplicate", `{"command":"x","flags":[` + f0 + `,{"name":"w","type":"boolean","short_alias":"-v"}]}`, "flags[1].short_alias", `flags[1].short_alias "-v" is already used by flags[0]`},
		{"name duplicate across", `{"command":"x","args":[{"name":"v","type":"string"}],"flags":[` + f0 + `]}`, "flags[0].name", `flags[0].name "v" is already used by args[0]`},
		{"name duplicate args", `{"command":"x","args":[{"name":"a","type":"string"},{"name":"a","type":"string"}]}`, "args[1].name", `args[1].name "a" is already used by args[0]`},
		{"required after optional", `{"command":"x","args":[{"name":"a","type":"string"},{"name":"b","type":"string","required":true}]}`, "args[1].required", `args[1] "b" is required but follows the optional args[0] "a"`},
		{"array not last", `{"command":"x","args":[{"name":"a","type":"array"},{"name":"b","type":"string"}]}`, "args[0].type", `args[0] "a" is an array; only the last arg may be an array`},
		{"default string type", `{"command":"x","flags":[{"name":"a","type":"string","default":5}]}`, "flags[0].default", "flags[0].default must be a string, got integer"},
		{"default integer fraction", `{"command":"x","args":[{"name":"a","type":"integer","default":1.5}]}`, "args[0].default", "args[0].default must be an integer, got 1.5"},
		{"default integer string", `{"command":"x","args":[{"name":"a","type":"integer","default":"1"}]}`, "args[0].default", "must be an integer, got string"},
		{"default number", `{"command":"x","flags":[{"name":"a","type":"number","default":true}]}`, "flags[0].default", "must be a number, got boolean"},
		{"default boolean", `{"command":"x","flags":[{"name":"a","type":"boolean","default":"no"}]}`, "flags[0].default", "must be a boolean, got string"},
		{"default null", `{"command":"x","flags":[{"name":"a","type":"boolean","default":null}]}`, "flags[0].default", "must be a boolean, got null"},
		{"default array nested", `{"command":"x","flags":[{"name":"a","type":"array","default":["a",[1]]}]}`, "flags[0].default", "flags[0].default[1] must be a string, number or boolean, got array"},
		{"default array scalar", `{"command":"x","flags":[{"name":"a","type":"array","default":"a"}]}`, "flags[0].default", "must be an array, got string"},
		{"default NUL", `{"command":"x","args":[{"name":"a","type":"string","default":"a\u0000"}]}`, "args[0].default", "must be UTF-8 without NUL bytes"},
		{"schema not object", `{"command":"x","schema":[]}`, "schema", "schema must be a JSON Schema object, got array"},
		{"schema boolean", `{"command":"x","schema":true}`, "schema", "must be a JSON Schema object, got boolean"},
		{"schema bad keyword value", `{"command":"x","schema":{"type":"objectx"}}`, "schema", "schema does not compile"},
		{"schema bad regex", `{"command":"x","schema":{"pattern":"("}}`, "schema", "schema does not compile"},
		{"schema file ref", `{"command":"x","schema":{"$ref":"file:///etc/passwd"}}`, "schema", "only references inside the schema itself are allowed"},
		{"schema http ref", `{"command":"x","schema":{"$ref":"https://example.com/s.json"}}`, "schema", "only references inside the schema itself"},
		{"schema relative ref", `{"command":"x","schema":{"$ref":"other.json"}}`, "schema", "schema does not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Decode([]byte(tt.body))
			if err == nil {
				t.Fatalf("Decode(%s) = %+v, want an error", tt.body, r)
			}
			checkErr(t, err, tt.field, tt.hint)
		})
	}
}

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

// Rows with many params use the map-based uniqueness check; it finds the
// same duplicates.
func TestValidateManyParams(t *testing.T) {
	r := &Row{Command: "x"}
	for i := 0; i < 40; i++ {
		r.Flags = append(r.Flags, Param{Name: fmt.Sprintf("f%d", i), Type: TypeString})
	}
	if err := Validate(r); err != nil {
		t.Fatal(err)
	}
	r.Flags[30].Name = "f3"
	checkErr(t, Validate(r), "flags[30].name", `flags[30].name "f3" is already used by flags[3]`)
	r.Flags[30].Name = "f30"
	r.Flags[10].ShortAlias, r.Flags[35].ShortAlias = "-a", "-a"
	checkErr(t, Validate(r), "flags[35].short_alias", `"-a" is already used by flags[10]`)
}

// Rows built in Go are held to the same rules; Validate does not modify.
func TestValidateGoRow(t *testing.T) {
	r := &Row{Command: "x", Args: []Param{{Name: "a", Type: TypeString, ShortAlias: "-a"}}}
	checkErr(t, Validate(r), "args[0].short_alias", "positional args take no short alias")
	r = &Row{Command: "x", Flags: []Param{{Name: "a", Type: TypeString, Default: json.RawMessage(`{`)}}}
	checkErr(t, Validate(r), "flags[0].default", "flags[0].default is not valid JSON")
	r = &Row{Command: "x\xff"}
	checkErr(t, Validate(r), "command", "must be UTF-8")
	r = &Row{Command: "x", Timeout: -0.5}
	checkErr(t, Validate(r), "timeout", "timeout")
	r = &Row{Command: "x"}
	before := *r
	if err := Validate(r); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*r, before) {
		t.Error("Validate modified the row")
	}
	if r.Method() != MethodExec || r.Format() != FormatText {
		t.Error("empty method/format do not default to exec/text")
	}
}

func TestValidateInput(t *testing.T) {
	r, err := Decode([]byte(`{"command":"x",
		"flags":[{"name":"level","type":"integer"},{"name":"mode","type":"string"}],
		"schema":{"type":"object","properties":{
			"level":{"minimum":1,"maximum":5},
			"mode":{"enum":["fast","slow"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []map[string]any{
		{}, nil, {"level": int64(3)}, {"level": 3}, {"level": uint8(5), "mode": "fast"}, {"level": json.Number("2")},
	} {
		if err := ValidateInput(r, ok); err != nil {
			t.Errorf("ValidateInput(%v) = %v", ok, err)
		}
	}
	err = ValidateInput(r, map[string]any{"level": int64(9)})
	checkErr(t, err, "level", "input does not match the row's schema: at '/level'")
	if !strings.Contains(protocol.ErrorHint(err), "maximum") {
		t.Errorf("hint %q does not name the failing rule", protocol.ErrorHint(err))
	}
	checkErr(t, ValidateInput(r, map[string]any{"mode": "medium"}), "mode", "at '/mode'")
	// Large numbers read as people write them (not 2×10⁰⁶).
	big, err := Decode([]byte(`{"command":"x","flags":[{"name":"a","type":"integer"}],
		"schema":{"type":"object","properties":{"a":{"maximum":1000000}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, ValidateInput(big, map[string]any{"a": int64(2000000)}), "a", "at '/a': maximum: got 2000000, want 1000000")

	// Without a schema every input passes (the per-param checks are the
	// builder's job).
	plain := &Row{Command: "x"}
	if err := ValidateInput(plain, map[string]any{"anything": 1}); err != nil {
		t.Error(err)
	}
}

func TestSchemaFormatsAsserted(t *testing.T) {
	r, err := Decode([]byte(`{"command":"x","flags":[{"name":"to","type":"string"}],
		"schema":{"properties":{"to":{"format":"email"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, ValidateInput(r, map[string]any{"to": "nope"}), "to", "email")
	if err := ValidateInput(r, map[string]any{"to": "a@example.com"}); err != nil {
		t.Error(err)
	}
}

func TestSchemaDraft7AndInternalRefs(t *testing.T) {
	r, err := Decode([]byte(`{"command":"x","flags":[{"name":"n","type":"integer"}],"schema":{
		"$schema":"http://json-schema.org/draft-07/schema#",
		"definitions":{"small":{"maximum":3}},
		"properties":{"n":{"$ref":"#/definitions/small"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	checkErr(t, ValidateInput(r, map[string]any{"n": 4}), "n", "at '/n'")
}

// A schema is compiled once per schema text.
func TestSchemaCompiledOnce(t *testing.T) {
	raw := []byte(`{"type":"object","description":"compiled-once test"}`)
	a, err := compileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compileSchema(append([]byte(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same schema text was compiled twice")
	}
}

func TestCheckValue(t *testing.T) {
	tests := []struct {
		typ  string
		v    any
		want string
	}{
		{TypeString, "a", ""},
		{TypeString, int64(1), "must be a string, got integer"},
		{TypeInteger, int64(1), ""},
		{TypeInteger, 1e30, ""},
		{TypeInteger, 0.5, "must be an integer, got 0.5"},
		{TypeNumber, 0.5, ""},
		{TypeNumber, "0.5", "must be a number, got string"},
		{TypeBoolean, true, ""},
		{TypeArray, []any{}, ""},
		{TypeArray, []any{map[string]any{}}, "[0] must be a string, number or boolean, got object"},
		{TypeArray, []any{nil}, "[0] must be a string, number or boolean, got null"},
		{"object", map[string]any{}, "has an unknown type"},
	}
	for _, tt := range tests {
		if got := CheckValue(tt.typ, tt.v); got != tt.want {
			t.Errorf("CheckValue(%s, %#v) = %q, want %q", tt.typ, tt.v, got, tt.want)
		}
	}
}
