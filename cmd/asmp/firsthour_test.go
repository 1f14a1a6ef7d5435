package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// streamLine reads the run's stream from its first event and returns the
// first line that contains want (failing when the stream ends first).
func streamLine(t *testing.T, p *proc, id, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/runs/"+id+"/stream", nil)
	req.Header.Set("Last-Event-ID", "0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var seen []string
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return sc.Text()
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("stream ended without %q:\n%s", want, strings.Join(seen, "\n"))
	return ""
}

func actionsOf(f map[string]any) []string {
	var out []string
	ns, _ := f["next_states"].([]any)
	for _, n := range ns {
		out = append(out, n.(map[string]any)["action"].(string))
	}
	return out
}

// number-facts-v1 under a bare serve (exec off): input beyond the declared
// bounds is refused with a hint naming the bound, and the failed
// multiplication offers a way out, so the run can end.
func TestNumberFactsHasAWayOut(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}), 201).RunID
	r := jsonOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 2000000, "b": 5}), 400)
	if h, _ := r["hint"].(string); h != `Field "a" must be at most 1000000, got 2000000.` {
		t.Fatalf("out-of-bounds submit: %v", r)
	}
	jsonOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 0}), 400)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}), 200)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil), 200)
	f := waitRun(t, p, id, nil, 20*time.Second)
	if f["state"] != "FAILED" || !slices.Equal(actionsOf(f), []string{"retry", "change", "cancel"}) {
		t.Fatalf("after the refused task: %v", f)
	}
	// Why it failed: in the frame's hint, on the failing event, in a later
	// stream and in asmp watch, readable.
	const why = "The background task of state MULTIPLYING failed: the directory row number-facts.multiply was refused (invocation task:"
	if h, _ := f["hint"].(string); !strings.Contains(h, why) || !strings.Contains(h, "--allow-exec") {
		t.Fatalf("FAILED hint: %q", h)
	}
	evs := jsonOf(t, p.do("GET", "/runs/"+id+"/events", nil), 200)["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["to"] != "FAILED" || !strings.Contains(last["reason"].(string), why) {
		t.Fatalf("failing event: %v", last)
	}
	if line := streamLine(t, p, id, why); !strings.Contains(line, `"state":"FAILED"`) {
		t.Fatalf("stream replay: %s", line)
	}
	out, err := exec.Command(binary, "watch", id, "--server", p.url, "--until-idle").CombinedOutput()
	if err != nil || !strings.Contains(string(out), why) {
		t.Fatalf("watch: %v\n%s", err, out)
	}
	// change goes back to SUBMIT for other numbers.
	if g := frameOf(t, p.do("POST", "/runs/"+id+"/transitions/change", nil), 200); g.State != "SUBMIT" {
		t.Fatalf("change: %+v", g)
	}
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 3, "b": 4}), 200)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil), 200)
	if f := waitRun(t, p, id, nil, 20*time.Second); f["state"] != "FAILED" {
		t.Fatalf("second try: %v", f)
	}
	if g := frameOf(t, p.do("POST", "/runs/"+id+"/transitions/cancel", nil), 200); g.State != "CANCELLED" || g.Status != "completed" {
		t.Fatalf("cancel: %+v", g)
	}
}

// A workflow with a state no run can leave for a terminal state still
// serves (a benchmark's endless loop), with a warning naming it.
func TestServeWarnsAboutDeadEnds(t *testing.T) {
	p := serve(t, "--db", ":memory:", "testdata/loop.yaml")
	if log := p.stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "no terminal state can be reached from state LOOP (path LOOP)") {
		t.Fatalf("no dead-end warning:\n%s", log)
	}
	id := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/tick", map[string]any{"n": 1}), 200)
}

// The ledger's signing key is created beside the SQLite database, 0600,
// never in the working directory.
func TestSigningKeyBesideTheDatabase(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, "--db", filepath.Join(dir, "runs.db"))
	frameOf(t, p.do("POST", "/runs", nil), 201)
	fi, err := os.Stat(filepath.Join(dir, "runs.db.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key beside the database: %v %v", fi, err)
	}
	if keys, _ := filepath.Glob("*.key"); len(keys) != 0 {
		t.Fatalf("key files in the working directory: %v", keys)
	}
}

// asmpCmd runs a client command of the binary against p, with its own
// state directory; it returns the exit code, stdout and stderr.
func asmpCmd(t *testing.T, p *proc, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "ASMP_URL="+p.url, "ASMP_STATE_DIR="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// Hints fit their readers: the CLI object (TUI, attach) carries the human
// hint, quoting the run's own data; the frame keeps the agent's. A typo is
// answered with the nearest action only; command line users are told the
// command, not the HTTP route.
func TestHintsFitTheirReaders(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	f := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "expense-approval-v1"}), 201)
	id := f.RunID
	if c := cliOf(t, p.do("GET", "/runs/"+id+"/cli", nil)); !strings.Contains(f.Hint, "POST submit") || strings.Contains(c.Hint, "POST") || c.Hint == "" {
		t.Fatalf("SUBMIT: frame hint %q, cli hint %q", f.Hint, c.Hint)
	}
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"amount": 12.5, "description": "Team lunch"}), 200)
	if c := cliOf(t, p.do("GET", "/runs/"+id+"/cli", nil)); !strings.HasPrefix(c.Hint, "Team lunch: 12.5 EUR.") {
		t.Fatalf("REVIEW cli hint %q", c.Hint)
	}
	code, _, errOut := asmpCmd(t, p, "step", id, "aprove")
	if code != 1 || strings.TrimSpace(errOut) != `asmp: "aprove" is not an option. Did you mean "approve"?` {
		t.Fatalf("typo: %d %q", code, errOut)
	}
	code, _, errOut = asmpCmd(t, p, "show", "0190aaaa-0000-7000-8000-000000000000")
	if code != 1 || strings.Contains(errOut, "POST /runs") || !strings.Contains(errOut, "Start one with `asmp start`") {
		t.Fatalf("unknown run: %d %q", code, errOut)
	}
}

// The first minutes: serve says where to go next; a browser at / gets a
// page; a busy port is found before anything is created; mistaken flags
// and a missing run id are explained; graph takes built-in ids.
func TestFirstMinutes(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, "--db", filepath.Join(dir, "first.db"))
	if log := p.stderr.String(); !strings.Contains(log, "asmp attach "+p.url) || !strings.Contains(log, p.url+"/console/") || !strings.Contains(log, p.url+"/openapi.json") || !strings.Contains(log, p.url+"/visualize") {
		t.Fatalf("serve says nothing about what next:\n%s", log)
	}
	page := p.do("GET", "/", nil, "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	if page.status != 200 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), `href="`+p.url+`/visualize?workflow_id=expense-approval-v1"`) || !strings.Contains(string(page.body), `href="`+p.url+`/openapi.json"`) ||
		!strings.Contains(string(page.body), `href="`+p.url+`/console/"`) {
		t.Fatalf("browser at /: %d %s\n%s", page.status, page.header, page.body)
	}
	for _, accept := range []string{"", "application/json", "*/*"} {
		if f := frameOf(t, p.do("GET", "/", nil, "Accept", accept), 200); len(f.NextStates) != 3 {
			t.Fatalf("Accept %q: %+v", accept, f)
		}
	}

	// A busy port: an error naming --addr, and no database or key created.
	busy := filepath.Join(t.TempDir(), "busy.db")
	addr := strings.TrimPrefix(p.url, "http://")
	out, err := exec.Command(binary, "serve", "--addr", addr, "--db", busy).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "address is in use") || !strings.Contains(string(out), "--addr") {
		t.Fatalf("busy port: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(busy + "*"); len(left) != 0 {
		t.Fatalf("a refused serve created %v", left)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--port", "9000"}, "takes the whole address to listen on, e.g. --addr 127.0.0.1:9000"},
		{[]string{"show"}, "show needs a run id: asmp show RUN"},
		{[]string{"step"}, "A run's id is printed by asmp start"},
	} {
		out, err := exec.Command(binary, c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("asmp %v: %v\n%s", c.args, err, out)
		}
	}
	out, err = exec.Command(binary, "graph", "expense-approval-v1").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUBMIT --> REVIEW") {
		t.Fatalf("graph of a built-in id: %v\n%s", err, out)
	}
}

// The seed's row ships in examples/ as the README uses it.
func TestSeedRowShipsInExamples(t *testing.T) {
	shipped, err := os.ReadFile("../../examples/my-cli-tool-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := os.ReadFile("../../oip/testdata/seed_dispatch.json")
	var a, b any
	if json.Unmarshal(shipped, &a) != nil || json.Unmarshal(seed, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("examples/my-cli-tool-v1.json is not the seed's dispatch")
	}
	p := serve(t, "--db", ":memory:")
	if code, out, errOut := asmpCmd(t, p, "dispatch", "../../examples/my-cli-tool-v1.json"); code != 0 || !strings.Contains(out, "my-cli-tool-v1") {
		t.Fatalf("dispatch: %d %s %s", code, out, errOut)
	}
}

// valueFor is what a client that knows only a field's type sends.
func valueFor(typ string) any {
	switch typ {
	case "number", "integer":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return "x"
}

// Every built-in workflow, walked from its start to a terminal state under
// a bare asmp serve (no exec flags), using only what the frames, hints and
// CLI objects say: the discovery frame's start hrefs, the CLI options (an
// option not yet taken in that state first), the expects of the offered
// transitions, and waiting while a task processes. A workflow whose rows
// need exec says which flags in its first hint.
func TestEveryBuiltinWorkflowEnds(t *testing.T) {
	p := serve(t, "--db", filepath.Join(t.TempDir(), "walk.db"))
	disc := frameOf(t, p.do("GET", "/", nil), 200)
	if len(disc.NextStates) != 3 {
		t.Fatalf("discovery offers %d workflows", len(disc.NextStates))
	}
	for _, start := range disc.NextStates {
		t.Run(start.Action, func(t *testing.T) {
			r, err := p.try("POST", strings.TrimPrefix(start.Href, p.url), nil)
			if err != nil {
				t.Fatal(err)
			}
			f := frameOf(t, r, 201)
			if f.WorkflowID == "number-facts-v1" && !strings.Contains(f.Hint, "--allow-exec --exec-allow factor --exec-allow expr") {
				t.Errorf("number-facts' first hint does not name the flags it needs: %q", f.Hint)
			}
			taken := map[string]map[string]int{}
			var path []string
			for step := 0; ; step++ {
				if step > 40 {
					t.Fatalf("no terminal state after 40 steps: %s", strings.Join(path, " "))
				}
				if f.Status == "processing" {
					waitRun(t, p, f.RunID, nil, 30*time.Second)
					f = frameOf(t, p.do("GET", "/runs/"+f.RunID, nil), 200)
					continue
				}
				if f.Status == "completed" || f.Status == "failed" {
					break
				}
				cli := cliOf(t, p.do("GET", "/runs/"+f.RunID+"/cli", nil))
				if len(cli.Options) == 0 {
					t.Fatalf("state %s offers nothing and is not terminal (hint %q)", f.State, f.Hint)
				}
				if taken[f.State] == nil {
					taken[f.State] = map[string]int{}
				}
				pick := cli.Options[0].Action
				for _, o := range cli.Options {
					if taken[f.State][o.Action] < taken[f.State][pick] {
						pick = o.Action
					}
				}
				taken[f.State][pick]++
				ns, ok := f.Action(pick)
				if !ok {
					t.Fatalf("CLI option %s is not in the frame's next_states", pick)
				}
				body := map[string]any{}
				for k, typ := range ns.Expects {
					body[k] = valueFor(typ)
				}
				path = append(path, f.State+" -"+pick+"->")
				r, err := p.try("POST", strings.TrimPrefix(ns.Href, p.url), body)
				if err != nil {
					t.Fatal(err)
				}
				f = frameOf(t, r, 200)
			}
			t.Logf("%s: %s %s [%s]", f.WorkflowID, strings.Join(path, " "), f.State, f.Status)
		})
	}
}

// One server per database file, whatever path names it: a second server
// on a symbolic link to the file, or on a hard link, is refused while
// the first runs (two writers with two signing keys would break the
// ledger for good). Started alone through a link, a server uses the
// file's own key, beside the file, and creates no second one.
func TestOneServerPerDatabaseFile(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	db := filepath.Join(a, "asmp.db")
	p := serve(t, "--db", db)
	frameOf(t, p.do("POST", "/runs", nil), 201)
	dispatchRow(t, p, "one-file")
	sym, hard := filepath.Join(b, "link.db"), filepath.Join(b, "hard.db")
	if err := os.Symlink(db, sym); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(db, hard); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{sym, hard} {
		out, err := runAsmp(t, "serve", "--db", other, "--addr", "127.0.0.1:0")
		if err == nil || !strings.Contains(out, "in use by another process") {
			t.Fatalf("a second server on %s: %v\n%s", other, err, out)
		}
	}
	stop(t, p)
	if keys, _ := filepath.Glob(filepath.Join(b, "*.key")); len(keys) != 0 {
		t.Fatalf("a refused server created a signing key: %v", keys)
	}
	q := serve(t, "--db", sym)
	if r := q.do("GET", "/api/dispatch?key=one-file", nil); r.status != 200 {
		t.Fatalf("the row through the link: %d %s", r.status, r.body)
	}
	if keys, _ := filepath.Glob(filepath.Join(b, "*")); len(keys) != 2 {
		t.Fatalf("a server started through a link wrote beside the link: %v", keys)
	}
}
