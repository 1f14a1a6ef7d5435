package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// FuzzJSONLines: whatever arrives on stdin, every JSON line is passed on
// unchanged (trimmed) and in order, every other non-blank line is
// answered with one parse error, and nothing else is written.
func FuzzJSONLines(f *testing.F) {
	for _, s := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
		"nonsense\n{}\n\n  [1,2]  \n",
		"{\"a\":\n",
		"",
		"\r\n\t\n",
		"{}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		passed, err := io.ReadAll(jsonLines(strings.NewReader(in), &out, slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		var wantPassed []string
		wantErrors := 0
		for _, l := range strings.Split(in, "\n") {
			switch t := strings.TrimSpace(l); {
			case t == "":
			case json.Valid([]byte(t)):
				wantPassed = append(wantPassed, t)
			default:
				wantErrors++
			}
		}
		if got := strings.Join(wantPassed, "\n"); strings.TrimSuffix(string(passed), "\n") != got {
			t.Fatalf("passed on %q, want %q", passed, got)
		}
		sc := bufio.NewScanner(&out)
		n := 0
		for sc.Scan() {
			var m struct {
				Error struct{ Code int } `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.Error.Code != -32700 {
				t.Fatalf("answered %q", sc.Text())
			}
			n++
		}
		if n != wantErrors {
			t.Fatalf("%d parse errors for %d malformed lines", n, wantErrors)
		}
	})
}

// A line over the limit is read to its end and dropped; the next line is
// read whole, also past the reader's buffer.
func TestReadLineDropsLongLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	r := bufio.NewReaderSize(strings.NewReader(long+"\n"+`{"a":1}`+"\n"+strings.Repeat("y", 40)), 16)
	for i, want := range []struct {
		line string
		long bool
		eof  bool
	}{{"", true, false}, {`{"a":1}` + "\n", false, false}, {strings.Repeat("y", 40), false, true}} {
		line, isLong, err := readLine(r, 50)
		if string(line) != want.line || isLong != want.long || (err == io.EOF) != want.eof || (err != nil && err != io.EOF) {
			t.Fatalf("line %d: %q %v %v", i, line, isLong, err)
		}
	}
}
