package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// referenceServer answers a run's stream the way the reference servers
// do: "id" is a JSON string. The first connection sends the current frame
// and drops; the second must resume after it (Last-Event-ID "0") and gets
// the terminal frame.
func referenceServer(t *testing.T) (url string, lastIDs func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	frame := func(id, state, status string) string {
		b, _ := json.Marshal(map[string]any{"id": id, "run_id": "0190c0de-0000-7000-8000-0000000000aa", "workflow_id": "ref-v1",
			"state": state, "status": status, "hint": "Reference " + state + ".", "next_states": []any{}})
		return string(b)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/stream") {
			http.Error(w, `{"hint":"only the stream here"}`, http.StatusNotFound)
			return
		}
		mu.Lock()
		ids = append(ids, r.Header.Get("Last-Event-ID"))
		n := len(ids)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		if n == 1 {
			fmt.Fprintln(w, frame("0", "WORKING", "active"))
			return
		}
		fmt.Fprintln(w, frame("1", "DONE", "completed"))
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ids...) }
}

// asmp watch follows a reference server's stream of string ids to the end
// instead of giving up after its reconnects.
func TestWatchReferenceStringIDs(t *testing.T) {
	url, lastIDs := referenceServer(t)
	code, out, errOut := asmpRun(t, url, "", "watch", "0190c0de-0000-7000-8000-0000000000aa", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var states []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		states = append(states, fmt.Sprint(l["state"]))
	}
	if strings.Join(states, ",") != "WORKING,DONE" {
		t.Fatalf("states = %v\n%s", states, out)
	}
	if got := lastIDs(); len(got) != 2 || got[1] != "0" {
		t.Fatalf("Last-Event-ID sent = %q", got)
	}
}

// The real binary: asmp drive to DONE (exit 0), and a looping model that
// runs out of steps (exit 1, the reason printed once with the asmp:
// prefix). The key is in the environment only and never printed.
func TestDriveBinary(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	m := newFakeModel(t,
		func(t testing.TB, r chatRequest) []string { return call("start", `{}`) },
		func(t testing.TB, r chatRequest) []string { return call("save", `{"value": "from the model"}`) },
		func(t testing.TB, r chatRequest) []string { return call("confirm", `{}`) },
	)
	a := newAgent(t, bin, "ASMP_LLM_URL="+m.url, "OPENAI_API_KEY="+testKey)
	r := a.run("drive", url, "--model", "m", "--workflow", "config-wizard-v1")
	if r.code != 0 || !strings.Contains(r.stdout, "completed in state DONE after 3 steps") || strings.Contains(r.stdout+r.stderr, testKey) {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m.mu.Lock()
	auth := m.auth[0]
	m.mu.Unlock()
	if auth != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", auth)
	}
	a.ok([]string{"show", strings.Fields(r.stdout[len("Run "):])[0]}, "value", "from the model")

	loop := newFakeModel(t, func(t testing.TB, r chatRequest) []string { return call("cancel", `{}`) })
	a = newAgent(t, bin, "ASMP_LLM_URL="+loop.url)
	r = a.run("drive", url, "--model", "m", "--max-steps", "2")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "asmp: The step budget of 2 ran out") || strings.Count(r.stderr, "asmp:") != 1 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
