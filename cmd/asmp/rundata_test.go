package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// notesYAML: NOTES takes two string keys, a and b, each by its own
// transition, as often as a client likes.
const notesYAML = `workflow_id: notes-v1
initial_state: NOTES
states:
  NOTES:
    hint: Write notes.
transitions:
  - {from: NOTES, action: a, to: NOTES, expects: {a: string}}
  - {from: NOTES, action: b, to: NOTES, expects: {b: string}}
  - {from: NOTES, action: stay, to: NOTES}
`

// A run's data cannot grow past --max-run-data by many transitions each
// within the body limit: the one that would gets a JSON 413 naming the
// limit and the size, and nothing is written. A run stored larger under
// an earlier limit stays readable after a restart with a lower one.
func TestRunDataIsBoundedOverHTTP(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "notes.yaml")
	if err := os.WriteFile(wf, []byte(notesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "asmp.db")
	json := []string{"Content-Type", "application/json"}
	note := func(key string, n int) string { return `{"` + key + `":"` + strings.Repeat("x", n) + `"}` }

	p := serve(t, "--db", db, "--max-run-data", "3000", wf)
	id := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"notes-v1"}`, json...), 201).RunID
	frameOf(t, p.raw("POST", "/runs/"+id+"/transitions/a", note("a", 2000), json...), 200)
	r := p.raw("POST", "/runs/"+id+"/transitions/b", note("b", 2000), json...)
	h := errorOf(t, r, 413)
	if !strings.Contains(h, "3000") || !strings.Contains(h, "--max-run-data") {
		t.Fatalf("the hint does not name the limit: %q", h)
	}
	if m := jsonOf(t, r, 413); m["limit_bytes"] != 3000.0 || m["size_bytes"].(float64) <= 3000 {
		t.Fatalf("413 body: %s", r.body)
	}
	f := frameOf(t, p.do("GET", "/runs/"+id, nil), 200)
	if _, ok := f.Data["b"]; ok || etagVersion(p.do("GET", "/runs/"+id, nil).header.Get("ETag")) != 2 {
		t.Fatalf("the refused transition was written: %s", p.do("GET", "/runs/"+id, nil).body)
	}
	// Initial data over the limit: refused too.
	errorOf(t, p.raw("POST", "/runs", `{"workflow_id":"notes-v1","data":`+note("a", 4000)+`}`, json...), 413)
	// A run stored under a higher limit...
	big := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"notes-v1","data":`+note("a", 2500)+`}`, json...), 201).RunID
	p.kill()

	// ... stays readable under a lower one, and moves on without growing.
	p = serve(t, "--db", db, "--max-run-data", "1000", wf)
	if f := frameOf(t, p.do("GET", "/runs/"+big, nil), 200); len(f.Data["a"].(string)) != 2500 {
		t.Fatalf("the stored run changed: %v", f.Data)
	}
	frameOf(t, p.raw("POST", "/runs/"+big+"/transitions/stay", `{}`, json...), 200)
	errorOf(t, p.raw("POST", "/runs/"+big+"/transitions/b", note("b", 100), json...), 413)
	if code := p.do("GET", "/runs/"+big+"/events", nil).status; code != 200 {
		t.Fatalf("GET events: %d", code)
	}
}

// A negative --max-run-data is refused at start, naming the flag.
func TestMaxRunDataFlagIsChecked(t *testing.T) {
	out, err := runAsmp(t, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--max-run-data", "-5")
	if err == nil || !strings.Contains(out, "--max-run-data -5") {
		t.Fatalf("err %v, output %q", err, out)
	}
}

// A lone surrogate escape encodes no character: run data, transitions,
// tool input, /api/commands and /api/dispatch refuse it with a 400 that
// names it, instead of storing U+FFFD in its place; a surrogate pair is
// the character it encodes.
func TestLoneSurrogatesAreRefusedOverHTTP(t *testing.T) {
	wf := filepath.Join(t.TempDir(), "notes.yaml")
	if err := os.WriteFile(wf, []byte(notesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	p := serve(t, "--db", ":memory:", wf)
	json := []string{"Content-Type", "application/json"}
	id := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"notes-v1"}`, json...), 201).RunID
	for _, c := range []struct{ path, body string }{
		{"/runs", `{"workflow_id":"notes-v1","data":{"a":"\ud800"}}`},
		{"/runs/" + id + "/transitions/a", `{"a":"x\udfffy"}`},
		{"/api/commands/my-cli-tool-v1", `{"input":{"input_file":"\ud800"}}`},
		{"/api/dispatch", `{"key":"k","body":{"type":"note","text":"\ud800"}}`},
	} {
		h := errorOf(t, p.raw("POST", c.path, c.body, json...), 400)
		if !strings.Contains(h, "surrogate") {
			t.Errorf("POST %s: the hint does not say why: %q", c.path, h)
		}
	}
	if f := frameOf(t, p.do("GET", "/runs/"+id, nil), 200); len(f.Data) != 0 {
		t.Fatalf("a refused transition wrote data: %v", f.Data)
	}
	f := frameOf(t, p.raw("POST", "/runs/"+id+"/transitions/a", `{"a":"\ud83d\ude00"}`, json...), 200)
	if f.Data["a"] != "😀" {
		t.Fatalf("a surrogate pair: %v", f.Data)
	}
}

// A guard that would run for hours over a run's large array (quadratic:
// `in` inside a predicate) is stopped at its bound: the transition gets
// 403, and the hint names the guard and the bound.
func TestGuardsAreBoundedOverHTTP(t *testing.T) {
	wf := filepath.Join(t.TempDir(), "quadratic.yaml")
	if err := os.WriteFile(wf, []byte(`workflow_id: quadratic-v1
initial_state: A
states:
  A: {hint: Send a list.}
  B: {hint: Done.}
transitions:
  - {from: A, action: go, to: B, guard: {expr: "all(data.a, {# in data.a})", reason: The list is not checked.}}
  - {from: A, action: list, to: A, expects: {a: array}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := serve(t, "--db", ":memory:", wf)
	json := []string{"Content-Type", "application/json"}
	id := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"quadratic-v1"}`, json...), 201).RunID
	var list strings.Builder
	for i := range 100000 {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(strconv.Itoa(i % 100000))
	}
	frameOf(t, p.raw("POST", "/runs/"+id+"/transitions/list", `{"a":[`+list.String()+`]}`, json...), 200)
	h := errorOf(t, p.raw("POST", "/runs/"+id+"/transitions/go", `{}`, json...), 403)
	if !strings.Contains(h, "The list is not checked.") || !strings.Contains(h, "all(data.a, {# in data.a})") || !strings.Contains(h, "ran longer than") {
		t.Fatalf("the hint of a guard past its bound: %q", h)
	}
}
