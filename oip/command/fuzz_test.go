package command

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
)

// FuzzBuild decodes a row and an input and builds the command. It must never
// panic; errors must be EInvalid *protocol.Error values with a hint; a built
// command's string must parse back (POSIX sh) to exactly its argv, whose
// first word is the row's command, and shell rows must carry that string.
func FuzzBuild(f *testing.F) {
	f.Add([]byte(seedRow), []byte(seedInput))
	f.Add([]byte(rulesRow), []byte(`{"src":"-x","count":2.0,"ratio":1e21,"flag_arg":false,"rest":["a b","$(x)",1.5,true],"tag":["-t","'"],"name":"\n","verbose":true}`))
	f.Add([]byte(`{"command":"my tool","invocation_method":"shell","args":[{"name":"a","type":"string","default":"-"},{"name":"b","type":"array"}],"flags":[{"name":"n","type":"number","short_alias":"-n"}],"schema":{"properties":{"n":{"maximum":10}}}}`),
		[]byte(`{"b":["*","~","#","=","\r\n","é"],"n":-0.5}`))
	f.Fuzz(func(t *testing.T, rowJSON, inputJSON []byte) {
		r, err := row.Decode(rowJSON)
		if err != nil {
			return
		}
		input, err := protocol.DecodeObject(inputJSON, 0)
		if err != nil {
			return
		}
		c, err := Build(r, input)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.EInvalid || pe.Hint == "" {
				t.Fatalf("Build error %#v is not an EInvalid *protocol.Error with a hint", err)
			}
			return
		}
		if len(c.Argv) == 0 || c.Argv[0] != r.Command {
			t.Fatalf("argv %q does not start with the command %q", c.Argv, r.Command)
		}
		for _, a := range c.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				t.Fatalf("argv word with NUL: %q", a)
			}
		}
		if (r.Method() == row.MethodShell) != (c.Shell != "") || (c.Shell != "" && c.Shell != c.Line) {
			t.Fatalf("method %q but shell %q, line %q", r.Method(), c.Shell, c.Line)
		}
		got, err := splitArgv(c.Line)
		if err != nil {
			t.Fatalf("%q: %v", c.Line, err)
		}
		if !reflect.DeepEqual(got, c.Argv) {
			t.Fatalf("%q parses to %q, want %q", c.Line, got, c.Argv)
		}
	})
}
