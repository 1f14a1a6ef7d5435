package client_test

import (
	"errors"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// FuzzResolve checks that Resolve never panics, and that what it accepts
// is always an offered action with input the action accepts, while what it
// refuses comes with a hint. The seed corpus is in testdata/fuzz/FuzzResolve.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "1", "2", "y", "save 1", `submit amount=1 description="a b" urgent=y tags=[1] count=3`, `{"value":"x"}`, "down enter", `'\"`} {
		f.Add(s)
	}
	cases := []rcase{wizardConfigure, wizardConfirm, review, submit, typed}
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range cases {
			check := func(action string, input map[string]any, err error) {
				if err != nil {
					var pe *protocol.Error
					if !errors.As(err, &pe) || pe.Hint == "" || pe.Code != protocol.EInvalid {
						t.Fatalf("Resolve(%q) error %T %v has no hint", text, err, err)
					}
					return
				}
				ns, ok := c.Frame.Action(action)
				if !ok {
					t.Fatalf("Resolve(%q) = %q, which is not offered", text, action)
				}
				if input == nil {
					t.Fatalf("Resolve(%q): nil input", text)
				}
				expects := map[string]string{}
				for k, v := range ns.Expects {
					expects[k], _ = protocol.NormalizeType(v)
				}
				if err := protocol.CheckExpects(expects, input); err != nil {
					t.Fatalf("Resolve(%q) = %q %v, which the server refuses: %v", text, action, input, err)
				}
				for k := range input {
					if _, ok := expects[k]; !ok {
						t.Fatalf("Resolve(%q) = %q with unexpected field %q", text, action, k)
					}
				}
			}
			check(client.Resolve(c.CLI, c.Frame, text))
			check(client.ResolveArgs(c.CLI, c.Frame, []string{text, text}))
		}
		for _, typ := range []string{"string", "integer", "number", "boolean", "array", "object"} {
			v, err := client.ParseValue(typ, text)
			if err == nil && !protocol.CheckType(typ, v) {
				t.Fatalf("ParseValue(%s, %q) = %#v, not of its type", typ, text, v)
			}
		}
	})
}
