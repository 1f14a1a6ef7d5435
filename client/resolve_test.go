package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// rcase is what Resolve reads: a CLI object and its frame.
type rcase struct {
	CLI   protocol.CLI
	Frame protocol.Frame
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func opt(action, label, keys string) protocol.CLIOption {
	return protocol.CLIOption{Action: action, Label: label, Keys: keys}
}

func frameWith(ns ...protocol.NextState) protocol.Frame {
	return protocol.Frame{RunID: "r", State: "S", Status: "active", NextStates: ns}
}

var (
	wizardConfigure = rcase{
		CLI:   protocol.CLI{Prompt: "Set value", Options: []protocol.CLIOption{opt("save", "Save", "enter")}},
		Frame: frameWith(protocol.NextState{Action: "save", Expects: map[string]string{"value": "string"}}),
	}
	wizardConfirm = rcase{
		CLI:   protocol.CLI{Options: []protocol.CLIOption{opt("confirm", "Yes, apply", "y"), opt("cancel", "No, cancel", "n")}},
		Frame: frameWith(protocol.NextState{Action: "confirm"}, protocol.NextState{Action: "cancel"}),
	}
	review = rcase{
		CLI: protocol.CLI{Options: []protocol.CLIOption{opt("approve", "Approve", "a"), opt("reject", "Reject", "r")}},
		Frame: frameWith(protocol.NextState{Action: "approve"},
			protocol.NextState{Action: "reject", Expects: map[string]string{"reason": "string"}, IsCritical: true}),
	}
	submit = rcase{
		CLI: protocol.CLI{Options: []protocol.CLIOption{opt("submit", "Submit claim", "enter"), opt("withdraw", "withdraw", "down enter")}},
		Frame: frameWith(protocol.NextState{Action: "submit", Expects: map[string]string{"amount": "number", "description": "string", "urgent": "bool", "tags": "array", "count": "int"}},
			protocol.NextState{Action: "withdraw"}),
	}
	typed = rcase{
		CLI:   protocol.CLI{Options: []protocol.CLIOption{opt("set", "set", "")}},
		Frame: frameWith(protocol.NextState{Action: "set", Expects: map[string]string{"n": "integer"}}),
	}
)

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name   string
		rc     rcase
		text   string
		action string
		input  string // JSON
		errHas []string
	}{
		{"number", wizardConfirm, "2", "cancel", `{}`, nil},
		{"number with spaces", wizardConfirm, "  1 ", "confirm", `{}`, nil},
		{"number out of range", wizardConfirm, "3", "", "", []string{`"3" is not an option`, "1-2", "y for confirm"}},
		{"action", wizardConfirm, "cancel", "cancel", `{}`, nil},
		{"action any case", wizardConfirm, "CONFIRM", "confirm", `{}`, nil},
		{"key", wizardConfirm, "n", "cancel", `{}`, nil},
		{"key upper", wizardConfirm, "Y", "confirm", `{}`, nil},
		{"label", wizardConfirm, "yes,  apply", "confirm", `{}`, nil},
		{"empty without enter option", wizardConfirm, "", "", "", []string{"Nothing was typed", "Type a number 1-2"}},
		{"no input allowed", wizardConfirm, "confirm now", "", "", []string{"takes no input"}},
		{"free text to the input option", wizardConfigure, "dark mode", "save", `{"value":"dark mode"}`, nil},
		{"free text keeps inner spaces", wizardConfigure, "  a  b ", "save", `{"value":"a  b"}`, nil},
		{"selector then value", wizardConfigure, "save 1", "save", `{"value":"1"}`, nil},
		{"number then value", wizardConfigure, "1 hello world", "save", `{"value":"hello world"}`, nil},
		{"quoted value", wizardConfigure, `save "1"`, "save", `{"value":"1"}`, nil},
		{"quoted free text", wizardConfigure, `'save'`, "save", `{"value":"save"}`, nil},
		{"field=value", wizardConfigure, "value=x y", "save", `{"value":"x y"}`, nil},
		{"field=value one word", wizardConfigure, "value=x", "save", `{"value":"x"}`, nil},
		{"json", wizardConfigure, `{"value": "v"}`, "save", `{"value":"v"}`, nil},
		{"json wrong type", wizardConfigure, `{"value": 3}`, "", "", []string{"must be a string"}},
		{"json unknown key", wizardConfigure, `{"other": 3}`, "", "", []string{`does not take "other"`}},
		{"json broken", wizardConfigure, `{"value": `, "", "", []string{"not a JSON object"}},
		{"selector without input", wizardConfigure, "1", "", "", []string{"needs input", "value (string)", `save <value>`}},
		{"action without input", wizardConfigure, "save", "", "", []string{"needs input"}},
		{"enter key without input", wizardConfigure, "", "", "", []string{"needs input"}},
		{"critical needs its name", review, "too expensive", "", "", []string{"critical", "reject <reason>"}},
		{"critical by name", review, "reject too expensive", "reject", `{"reason":"too expensive"}`, nil},
		{"critical by key", review, "r over budget", "reject", `{"reason":"over budget"}`, nil},
		{"near miss", review, "aprove", "", "", []string{`"aprove" is not an option. Did you mean "approve"?`}},
		{"several fields", submit, `submit amount=12.5 description="Team lunch" urgent=yes tags=a,b,3 count=2`, "submit",
			`{"amount":12.5,"count":2,"description":"Team lunch","tags":["a","b",3],"urgent":true}`, nil},
		{"several fields as free text", submit, `amount=7 description='x' urgent=0 tags=[] count=1`, "submit",
			`{"amount":7,"count":1,"description":"x","tags":[],"urgent":false}`, nil},
		{"missing field", submit, `submit amount=1`, "", "", []string{"missing count, description, tags, urgent"}},
		{"unknown field", submit, `submit amount=1 colour=red`, "", "", []string{`does not take "colour"`}},
		{"not a pair", submit, `submit 12`, "", "", []string{"key=value pairs"}},
		{"bad number", submit, `submit amount=lots description=x urgent=y tags= count=1`, "", "", []string{"amount must be a number", `"lots"`}},
		{"bad bool", submit, `submit amount=1 description=x urgent=maybe tags= count=1`, "", "", []string{"urgent must be true or false"}},
		{"twice", submit, `submit amount=1 amount=2`, "", "", []string{"given twice"}},
		{"unterminated quote", submit, `submit description="x`, "", "", []string{"Unterminated"}},
		{"key sequence", submit, "down  enter", "withdraw", `{}`, nil},
		{"integer free text", typed, "42", "set", `{"n":42}`, nil}, // no option 42: free text
		{"option number needs input", typed, "1", "", "", []string{"needs input", "set <n>"}},
		{"integer value", typed, "set 42", "set", `{"n":42}`, nil},
		{"integer from float", typed, "set 42.0", "set", `{"n":42}`, nil},
		{"integer bad", typed, "set 4.2", "", "", []string{"n must be an integer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			action, input, err := client.Resolve(c.rc.CLI, c.rc.Frame, c.text)
			if c.errHas != nil {
				if err == nil {
					t.Fatalf("Resolve(%q) = %q %v, want an error", c.text, action, input)
				}
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != protocol.EInvalid {
					t.Fatalf("error %T %v is not an invalid *protocol.Error", err, err)
				}
				for _, p := range c.errHas {
					if !strings.Contains(err.Error(), p) {
						t.Fatalf("error %q lacks %q", err, p)
					}
				}
				return
			}
			if err != nil || action != c.action || !equalJSONText(input, c.input) {
				t.Fatalf("Resolve(%q) = %q %v %v; want %q %s", c.text, action, input, err, c.action, c.input)
			}
		})
	}
}

// equalJSONText reports whether v encodes to the JSON text want; a want
// that is not JSON equals nothing.
func equalJSONText(v any, want string) bool {
	var w any
	if err := jsonUnmarshal(want, &w); err != nil {
		return false
	}
	return equalJSON(v, w)
}

func TestResolveArgs(t *testing.T) {
	for _, c := range []struct {
		rc     rcase
		args   []string
		action string
		input  string
		fails  bool
	}{
		{wizardConfigure, []string{"save", "hello", "world"}, "save", `{"value":"hello world"}`, false},
		{wizardConfigure, []string{`"quoted"`}, "save", `{"value":"\"quoted\""}`, false},
		{wizardConfigure, []string{"hello world"}, "save", `{"value":"hello world"}`, false},
		{wizardConfigure, []string{"a", "b"}, "save", `{"value":"a b"}`, false},
		{wizardConfigure, []string{"1"}, "", "", true},
		{wizardConfigure, nil, "", "", true},
		{wizardConfirm, []string{"y"}, "confirm", `{}`, false},
		{wizardConfirm, []string{"2"}, "cancel", `{}`, false},
		{wizardConfirm, []string{"nope"}, "", "", true},
		{submit, []string{"submit", "amount=3", "description=Team lunch", "urgent=no", "tags=x", "count=0"}, "submit",
			`{"amount":3,"count":0,"description":"Team lunch","tags":["x"],"urgent":false}`, false},
	} {
		action, input, err := client.ResolveArgs(c.rc.CLI, c.rc.Frame, c.args)
		if c.fails {
			if err == nil {
				t.Errorf("ResolveArgs(%q) = %q %v, want an error", c.args, action, input)
			}
			continue
		}
		if err != nil || action != c.action || !equalJSONText(input, c.input) {
			t.Errorf("ResolveArgs(%q) = %q %v %v; want %q %s", c.args, action, input, err, c.action, c.input)
		}
	}
}

func TestResolveWithoutOptions(t *testing.T) {
	for _, c := range []struct {
		status, want string
	}{{"processing", "background task"}, {"completed", "offers no more actions"}, {"active", "No actions are offered"}} {
		f := protocol.Frame{State: "X", Status: c.status}
		if _, _, err := client.Resolve(protocol.CLI{}, f, "1"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.status, err)
		}
	}
}

func TestHelp(t *testing.T) {
	h := client.Help(review.CLI, review.Frame)
	for _, p := range []string{"Type a number 1-2", "approve, reject", "a for approve", `reject takes reason (string): type "reject <reason>".`} {
		if !strings.Contains(h, p) {
			t.Errorf("Help = %q lacks %q", h, p)
		}
	}
	if h := client.Help(wizardConfigure.CLI, wizardConfigure.Frame); !strings.Contains(h, "or just the value") {
		t.Errorf("Help = %q", h)
	}
}

func TestParseValue(t *testing.T) {
	for _, c := range []struct {
		typ, text string
		want      string
		fails     bool
	}{
		{"string", " a ", `" a "`, false},
		{"str", "", `""`, false},
		{"integer", "-7", `-7`, false},
		{"int", "1e3", `1000`, false},
		{"integer", "x", "", true},
		{"number", "2.5", `2.5`, false},
		{"float", "NaN", "", true},
		{"number", "0x10", "", true},
		{"number", "Inf", "", true},
		{"boolean", "TRUE", `true`, false},
		{"bool", "off", `false`, false},
		{"boolean", "2", "", true},
		{"array", `[1, "a"]`, `[1,"a"]`, false},
		{"array", `a, {"x":1}`, `["a","{\"x\":1}"]`, false},
		{"array", `[1`, "", true},
		{"object", `{"a":[1]}`, `{"a":[1]}`, false},
		{"object", `[1]`, "", true},
		{"mystery", "as is", `"as is"`, false},
	} {
		v, err := client.ParseValue(c.typ, c.text)
		if c.fails != (err != nil) || (!c.fails && !equalJSONText(v, c.want)) {
			t.Errorf("ParseValue(%q, %q) = %#v, %v", c.typ, c.text, v, err)
		}
	}
	if v, _ := client.ParseValue("number", "3"); v != int64(3) {
		t.Errorf("number 3 = %#v, want int64", v)
	}
}

// A typo of an action suggests that action only: never the option that
// takes free text, which here is the critical reject.
func TestNearMissSuggestsOnlyTheAction(t *testing.T) {
	_, _, err := client.Resolve(review.CLI, review.Frame, "aprove")
	if err == nil || err.Error() != `"aprove" is not an option. Did you mean "approve"?` {
		t.Fatalf("err = %v", err)
	}
}
