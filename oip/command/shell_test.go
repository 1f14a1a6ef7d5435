package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
	"pgregory.net/rapid"

	"github.com/asmp-dev/asmp/oip/row"
)

// splitArgv parses line as one POSIX sh simple command and expands its
// words the way a shell builds an argv. It fails if the line is anything
// else (several commands, assignments, redirections, a pipeline) or if any
// expansion other than quote removal would happen: a glob, a parameter, a
// command substitution.
func splitArgv(line string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("%d statements, want 1", len(f.Stmts))
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, fmt.Errorf("not one plain simple command: %#v", st)
	}
	var bad error
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			bad = fmt.Errorf("unexpected expansion %T", n)
		case *syntax.SglQuoted:
			if n.Dollar {
				bad = fmt.Errorf("bash-only $'...' quoting")
			}
		}
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	globbed := false
	cfg := &expand.Config{
		// Called only for words with unquoted glob characters.
		ReadDir2: func(string) ([]fs.DirEntry, error) {
			globbed = true
			return nil, nil
		},
	}
	argv, err := expand.Fields(cfg, call.Args...)
	if err != nil {
		return nil, fmt.Errorf("expand: %w", err)
	}
	if globbed {
		return nil, fmt.Errorf("a word has an unquoted glob")
	}
	return argv, nil
}

func parseArgv(t testing.TB, line string) []string {
	t.Helper()
	argv, err := splitArgv(line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return argv
}

// nasty are the pieces random strings are made of: everything a shell
// treats specially, plus unicode, control bytes and invalid UTF-8.
var nasty = []string{
	"a", "Z", "0", "9", "_", ".", "/", ",", ":", "@", "%", "+", "^",
	" ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\x01", "\x1b", "\x7f",
	"'", "''", "\"", "\\", "\\n", "`", "$", "$(", ")", "(", "${x}", "$HOME", "$1", "$@", "$((1+1))", "$'a'",
	";", "&", "&&", "|", "||", "<", ">", ">>", "<<EOF", "!", "#", "~", "~root", "=", "a=b",
	"*", "?", "[", "]", "[a-z]", "{", "}", "{a,b}", "-", "--", "-x", "--opt=", "if", "then", "fi",
	"é", "日本", "🙂", "\u00a0", "\u2028", "\ufeff", "\u200b", "\U0010ffff", "\ufffd",
}

func nastyString() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "kind") == 0 {
			// Now and then a fully random string, minus NUL (which no
			// command line can carry). rapid.String is valid UTF-8.
			return strings.ReplaceAll(rapid.String().Draw(t, "s"), "\x00", "")
		}
		parts := rapid.SliceOfN(rapid.SampledFrom(nasty), 0, 8).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

var paramTypes = []string{row.TypeString, row.TypeInteger, row.TypeNumber, row.TypeBoolean, row.TypeArray}

// genCase draws a valid row and a valid input for it.
func genCase(t *rapid.T, method string) (*row.Row, map[string]any) {
	r := &row.Row{InvocationMethod: method}
	r.Command = rapid.OneOf(rapid.Just("tool"), rapid.Just("./bin/my tool"), nastyString()).
		Filter(func(s string) bool { return s != "" && !strings.ContainsAny(s, "\n\r") }).Draw(t, "command")
	nArgs := rapid.IntRange(0, 4).Draw(t, "nargs")
	nFlags := rapid.IntRange(0, 5).Draw(t, "nflags")
	input := map[string]any{}
	alias := byte('a')
	for i := 0; i < nArgs+nFlags; i++ {
		p := row.Param{Name: fmt.Sprintf("p%d", i), Type: rapid.SampledFrom(paramTypes).Draw(t, "type")}
		isArg := i < nArgs
		if isArg && p.Type == row.TypeArray && i != nArgs-1 {
			p.Type = row.TypeString
		}
		if !isArg && rapid.Bool().Draw(t, "alias") {
			p.ShortAlias = "-" + string(alias)
			alias++
		}
		present := rapid.Bool().Draw(t, "present")
		if isArg {
			// Keep required args first: an arg is required only if all
			// before it are.
			p.Required = present && (i == 0 || r.Args[i-1].Required)
			if p.Type != row.TypeArray && rapid.Bool().Draw(t, "hasdefault") {
				p.Default, _ = json.Marshal(nastyString().Draw(t, "default"))
				if p.Type != row.TypeString {
					p.Default = defaultJSON(p.Type)
				}
			}
			r.Args = append(r.Args, p)
		} else {
			r.Flags = append(r.Flags, p)
		}
		if present || p.Required {
			input[p.Name] = genValue(t, p.Type)
		}
	}
	// A gap with no default cannot be built; give every such arg a value.
	last := -1
	for i, p := range r.Args {
		if _, ok := input[p.Name]; ok {
			last = i
		}
	}
	for i := 0; i < last; i++ {
		if _, ok := input[r.Args[i].Name]; !ok && r.Args[i].Default == nil {
			input[r.Args[i].Name] = genValue(t, r.Args[i].Type)
		}
	}
	return r, input
}

func defaultJSON(typ string) []byte {
	switch typ {
	case row.TypeInteger:
		return []byte("-4")
	case row.TypeNumber:
		return []byte("2.5")
	}
	return []byte("true")
}

func genValue(t *rapid.T, typ string) any {
	switch typ {
	case row.TypeString:
		return nastyString().Draw(t, "string")
	case row.TypeInteger:
		return rapid.Int64().Draw(t, "int")
	case row.TypeNumber:
		return rapid.Float64().Filter(func(f float64) bool { return f == f && f-f == 0 }).Draw(t, "float")
	case row.TypeBoolean:
		return rapid.Bool().Draw(t, "bool")
	}
	n := rapid.IntRange(0, 4).Draw(t, "len")
	a := make([]any, n)
	for i := range a {
		a[i] = genValue(t, rapid.SampledFrom([]string{row.TypeString, row.TypeInteger, row.TypeNumber, row.TypeBoolean}).Draw(t, "etype"))
	}
	return a
}

// The property SPEC section 8 asks for: for any row and input, the shell
// string parses back (POSIX sh, mvdan.cc/sh) to exactly the argv, and the
// argv follows the ordering rules.
func TestShellRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, input := genCase(t, row.MethodShell)
		c, err := Build(r, input)
		if err != nil {
			t.Fatalf("Build: %v\nrow %+v\ninput %#v", err, r, input)
		}
		if c.Shell == "" || c.Shell != c.Line {
			t.Fatalf("shell row without its shell string: %+v", c)
		}
		got, err := splitArgv(c.Shell)
		if err != nil {
			t.Fatalf("%q: %v", c.Shell, err)
		}
		if !reflect.DeepEqual(got, c.Argv) {
			t.Fatalf("shell string %q\nparses to %q\nwant      %q", c.Shell, got, c.Argv)
		}
		if c.Argv[0] != r.Command {
			t.Fatalf("argv[0] = %q, want the command %q", c.Argv[0], r.Command)
		}
		if q, err := syntax.Quote(r.Command, syntax.LangPOSIX); err == nil && q == r.Command &&
			!strings.HasPrefix(c.Shell, r.Command+" ") && c.Shell != r.Command {
			t.Fatalf("plain command %q was not passed as given: %q", r.Command, c.Shell)
		}
	})
}

// Render round-trips any NUL-free argv.
func TestRenderRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		argv := rapid.SliceOfN(nastyString(), 1, 6).Draw(t, "argv")
		line := Render(argv)
		got, err := splitArgv(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !reflect.DeepEqual(got, argv) {
			t.Fatalf("Render = %q parses to %q, want %q", line, got, argv)
		}
	})
}

// /bin/sh itself agrees: it runs the shell string and the program receives
// exactly argv. The program is a script at a path full of shell syntax, so
// the quoting of the command name is checked too.
func TestShellAgreesWithBinSh(t *testing.T) {
	sh, err := exec.LookPath("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, `it's a "tool" $(x) ;*`)
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *rapid.T, c *Command) {
		cmd := exec.Command(sh, "-c", c.Shell)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "x=EXPANDED"}
		cmd.Dir = dir // globs would match the program's own name
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v\n%s", c.Shell, err, stderr.Bytes())
		}
		var got []string
		if len(out) > 0 {
			got = strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		}
		if want := c.Argv[1:]; !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("sh -c %q\ngave  %q\nwant  %q", c.Shell, got, want)
		}
	}
	// A fixed set of the worst strings, in one call.
	fixed := &row.Row{Command: prog, InvocationMethod: row.MethodShell,
		Args:  []row.Param{{Name: "all", Type: row.TypeArray}},
		Flags: []row.Param{{Name: "opt", Type: row.TypeString, ShortAlias: "-o"}}}
	worst := []any{"", "'", `"`, "\\", "a b", "$(echo pwned)", "`echo pwned`", "$x", "${x}", "*", "?", "[a]",
		"~", "~root", "#c", "a=b", ";", "&&", "|", "<x", ">y", "\n", "a\nb", "\t", "\r", "é日本🙂", "\r\n", "a\r\nb\r", "\x01",
		"-x", "--", "!", "{a,b}", "if", "it's", `"$x"`, "'$x'", "\\n", "\u2028", "\ufeff"}
	rapid.Check(t, func(rt *rapid.T) {
		if rapid.IntRange(0, 4).Draw(rt, "fixed") == 0 {
			c, err := Build(fixed, map[string]any{"all": worst, "opt": "-$x '"})
			if err != nil {
				rt.Fatal(err)
			}
			run(rt, c)
			return
		}
		r, input := genCase(rt, row.MethodShell)
		r.Command = prog
		c, err := Build(r, input)
		if err != nil {
			rt.Fatalf("Build: %v", err)
		}
		run(rt, c)
	})
}
