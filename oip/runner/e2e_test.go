package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/runner"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/spec"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// site is an in-process asmp server serving number-facts-v1 with the
// ledger, the executor (when allow is not nil) and the row invoker.
type site struct {
	t   *testing.T
	url string
}

// principals by bearer token: "reader" lacks the exec scope.
var principals = map[string]auth.Principal{
	"admin":  {Name: "admin", Scopes: auth.AllScopes},
	"reader": {Name: "reader", Scopes: []string{auth.ScopeRead, auth.ScopeRuns}},
}

func newSite(t *testing.T, allow []string) *site {
	t.Helper()
	st := memstore.New()
	o := &oip.Options{}
	if allow != nil {
		ex, err := runner.New(runner.Options{Allow: allow, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		o.Executor = ex
	}
	svc, err := oip.New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := examples.Rows()
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v %v", rows, err)
	}
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Name: "server", Scopes: auth.AllScopes})
	for _, r := range rows {
		if _, _, err := svc.EnsureRow(ctx, r.Key, r.Body); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := engine.New(st, []*workflow.Definition{examples.NumberFacts()}, &engine.Options{Invoker: oip.NewInvoker(svc)})
	if err != nil {
		t.Fatal(err)
	}
	w := eng.StartWorkers(&engine.WorkerOptions{Poll: 50 * time.Millisecond})
	srv := server.New(eng, &server.Options{
		API:       svc.API(),
		Heartbeat: 200 * time.Millisecond,
		Authenticate: func(r *http.Request) (auth.Principal, error) {
			p, ok := principals[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			if !ok {
				return auth.Principal{}, protocol.Errorf(protocol.EUnauthorized, "Unknown token.")
			}
			return p, nil
		},
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		w.Stop(time.Second)
		st.Close()
	})
	return &site{t: t, url: hs.URL}
}

// do sends a request as the admin (or the token given) and decodes the
// JSON answer, checking the status.
func (s *site) do(method, path string, body any, status int, token ...string) map[string]any {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	tok := "admin"
	if len(token) > 0 {
		tok = token[0]
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, status, b)
	}
	if strings.HasPrefix(path, "/runs") && !strings.Contains(path, "/invoke/") && status < 300 {
		if err := spec.Validate(spec.StateFrame, b); err != nil {
			s.t.Fatalf("frame does not validate: %v\n%s", err, b)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return m
}

// stream sends a run's stream lines as they come; the channel closes
// when the stream ends (terminal status) or after 20 seconds.
func (s *site) stream(runID string) <-chan map[string]any {
	s.t.Helper()
	out := make(chan map[string]any, 64)
	req, _ := http.NewRequest("GET", s.url+"/runs/"+runID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer admin")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	s.t.Cleanup(cancel)
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		s.t.Fatal(err)
	}
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				out <- m
			}
		}
	}()
	return out
}

// untilFinished collects stream lines up to the task's "finished"
// progress line.
func untilFinished(t *testing.T, lines <-chan map[string]any) []map[string]any {
	t.Helper()
	var got []map[string]any
	timeout := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return got
			}
			got = append(got, l)
			if l["progress"] == "finished" {
				return got
			}
		case <-timeout:
			t.Fatalf("no finished progress line; got %v", got)
		}
	}
}

// waitState polls the run until it leaves processing.
func (s *site) waitState(runID string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f := s.do("GET", "/runs/"+runID, nil, 200)
		if f["status"] != "processing" {
			return f
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("run %s still processing: %v", runID, f)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

var taskKeyRE = regexp.MustCompile(`invocation (task:[A-Za-z0-9._:-]+)\)`)

// progressKey returns the task's invocation key from its progress lines
// and checks they report started and finished.
func progressKey(t *testing.T, lines []map[string]any) (key, finished string) {
	t.Helper()
	var seen []string
	for _, l := range lines {
		p, ok := l["progress"].(string)
		if !ok {
			continue
		}
		h, _ := l["hint"].(string)
		seen = append(seen, p)
		if m := taskKeyRE.FindStringSubmatch(h); m != nil && p == "started" {
			key = m[1]
		}
		if p == "finished" {
			finished = h
		}
	}
	if key == "" || finished == "" {
		t.Fatalf("progress lines %q lack started/finished (lines: %v)", seen, lines)
	}
	return key, finished
}

// TestNumberFactsOverHTTP drives number-facts-v1 end to end: the
// row-bound tool as a caller with and without the exec scope, the
// row-bound task with its progress, the receipts afterwards, and a replay
// linked both ways.
func TestNumberFactsOverHTTP(t *testing.T) {
	s := newSite(t, []string{"factor", "expr"})
	f := s.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, 201)
	id := f["run_id"].(string)
	s.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}, 200)

	// The tool, as a caller with exec.
	res := s.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{360, 17}}, 200)["result"].(map[string]any)
	out := res["outcome"].(map[string]any)
	if out["class"] != "succeeded" || res["exit_code"] != 0.0 || res["stdout"] != "360: 2 2 2 3 3 5\n17: 17\n" {
		t.Fatalf("tool result %v", res)
	}
	rec := s.do("GET", "/api/dispatch?receipt="+res["inv_ID"].(string), nil, 200)
	if rec["type"] != "invocation_result" || rec["result_of"] == nil || rec["body"].(map[string]any)["outcome"].(map[string]any)["class"] != "succeeded" {
		t.Fatalf("tool receipt %v", rec)
	}
	attempt := s.do("GET", "/api/dispatch?receipt="+rec["result_of"].(string), nil, 200)
	if attempt["type"] != "invocation" || attempt["source"] != "admin" || attempt["body"].(map[string]any)["command"].(map[string]any)["command"] != "factor 360 17" {
		t.Fatalf("tool attempt %v", attempt)
	}

	// The tool as a caller without exec of its own: the workflow's row
	// version carries the authority (SPEC section 9), so it runs, and the
	// records name the caller.
	res = s.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{12}}, 200, "reader")["result"].(map[string]any)
	out = res["outcome"].(map[string]any)
	if out["class"] != "succeeded" || res["stdout"] != "12: 2 2 3\n" {
		t.Fatalf("tool result for a caller without exec %v", res)
	}
	rec = s.do("GET", "/api/dispatch?receipt="+res["inv_ID"].(string), nil, 200)
	attempt = s.do("GET", "/api/dispatch?receipt="+rec["result_of"].(string), nil, 200)
	if rec["type"] != "invocation_result" || attempt["source"] != "reader" || attempt["type"] != "invocation" {
		t.Fatalf("records of the call %v %v", rec, attempt)
	}
	// Input the row's schema refuses: refused with the hint.
	res = s.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{0}}, 200)["result"].(map[string]any)
	if out = res["outcome"].(map[string]any); out["class"] != "refused" || !strings.Contains(out["reason"].(string), "does not fit the row") {
		t.Fatalf("bad input %v", res)
	}

	// The task.
	lines := s.stream(id)
	s.do("POST", "/runs/"+id+"/transitions/multiply", nil, 200)
	f = s.waitState(id)
	if f["state"] != "DONE" || f["status"] != "completed" {
		t.Fatalf("after the task: %v", f)
	}
	if d, _ := f["data"].(map[string]any); d["product"] != 42.0 || d["a"] != 6.0 {
		t.Fatalf("the task's output is not in the run's data: %v", f["data"])
	}
	key, finished := progressKey(t, untilFinished(t, lines))
	if !strings.Contains(finished, "succeeded, exit code 0") {
		t.Fatalf("finished: %q", finished)
	}
	hist := s.do("GET", "/api/dispatch?key="+key+"&history=true", nil, 200)["records"].([]any)
	if len(hist) != 2 {
		t.Fatalf("task history %v", hist)
	}
	taskAttempt, taskResult := hist[0].(map[string]any), hist[1].(map[string]any)
	body := taskAttempt["body"].(map[string]any)
	if taskAttempt["source"] != oip.TaskActor || body["command"].(map[string]any)["command"] != "expr 6 '*' 7" || len(body["input"].(map[string]any)) != 2 {
		t.Fatalf("task attempt %v", taskAttempt)
	}
	if o := taskResult["body"].(map[string]any)["outcome"].(map[string]any); o["class"] != "succeeded" || o["output"] != 42.0 || taskResult["result_of"] != taskAttempt["inv_ID"] {
		t.Fatalf("task result %v", taskResult)
	}

	// Replay the task's invocation by hand: replay_of and replayed_by.
	rc := s.do("POST", "/api/dispatch", map[string]any{"key": "replay-1", "body": map[string]any{
		"type": "invocation", "object_key": examples.MultiplyRow, "input": map[string]any{"a": 6, "b": 7},
		"execute": true, "replay_of": taskAttempt["inv_ID"]}}, 201)
	if o := rc["outcome"].(map[string]any); o["class"] != "succeeded" || o["output"] != 42.0 {
		t.Fatalf("replay receipt %v", rc)
	}
	replayed := s.do("GET", "/api/dispatch?receipt="+taskAttempt["inv_ID"].(string), nil, 200)
	replay := s.do("GET", "/api/dispatch?key=replay-1&history=true", nil, 200)["records"].([]any)[0].(map[string]any)
	if by := replayed["replayed_by"].([]any); len(by) != 1 || by[0] != replay["inv_ID"] || replay["replay_of"] != taskAttempt["inv_ID"] {
		t.Fatalf("replay links: %v / %v", replayed["replayed_by"], replay)
	}
}

// TestNumberFactsWithoutExec: with execution disabled the tool answers a
// refused outcome and the task's failure action fires; both are recorded.
func TestNumberFactsWithoutExec(t *testing.T) {
	s := newSite(t, nil)
	id := s.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, 201)["run_id"].(string)
	s.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}, 200)
	res := s.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{360}}, 200)["result"].(map[string]any)
	if out := res["outcome"].(map[string]any); out["class"] != "refused" || !strings.Contains(out["reason"].(string), "--allow-exec") {
		t.Fatalf("tool %v", res)
	}
	lines := s.stream(id)
	s.do("POST", "/runs/"+id+"/transitions/multiply", nil, 200)
	f := s.waitState(id)
	if f["state"] != "FAILED" {
		t.Fatalf("after the task: %v", f)
	}
	key, finished := progressKey(t, untilFinished(t, lines))
	if key != "task:"+id+".3:1" || !strings.Contains(finished, "Finished: refused") || !strings.Contains(finished, "--allow-exec") {
		t.Fatalf("progress: %q %q", key, finished)
	}
	rec := s.do("GET", "/api/dispatch?key=task:"+id+".3:1", nil, 200)
	o := rec["body"].(map[string]any)["outcome"].(map[string]any)
	if rec["type"] != "invocation" || o["class"] != "refused" || !strings.Contains(o["reason"].(string), "--allow-exec") {
		t.Fatalf("task record %v", rec)
	}
	// retry goes back.
	s.do("POST", "/runs/"+id+"/transitions/retry", nil, 200)
}

// TestNumberFactsNotAllowlisted: exec is on but expr is not allowed.
func TestNumberFactsNotAllowlisted(t *testing.T) {
	s := newSite(t, []string{"factor"})
	id := s.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, 201)["run_id"].(string)
	s.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}, 200)
	s.do("POST", "/runs/"+id+"/transitions/multiply", nil, 200)
	if f := s.waitState(id); f["state"] != "FAILED" {
		t.Fatalf("after the task: %v", f)
	}
	hist := s.do("GET", "/api/dispatch?key=task:"+id+".3:1&history=true", nil, 200)["records"].([]any)
	if len(hist) != 2 {
		t.Fatalf("history %v", hist)
	}
	o := hist[1].(map[string]any)["body"].(map[string]any)["outcome"].(map[string]any)
	if o["class"] != "refused" || !strings.Contains(o["reason"].(string), "not on this server's allowlist") {
		t.Fatalf("result %v", o)
	}
}

// TestToolCallsConcurrently: many tool calls at once all get recorded
// under distinct keys.
func TestToolCallsConcurrently(t *testing.T) {
	s := newSite(t, []string{"factor", "expr"})
	id := s.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, 201)["run_id"].(string)
	s.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 2, "b": 3}, 200)
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			b, _ := json.Marshal(map[string]any{"numbers": []int{i + 2}})
			req, _ := http.NewRequest("POST", s.url+"/runs/"+id+"/invoke/factor", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer admin")
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			var m struct {
				Result oip.ToolResult `json:"result"`
			}
			if err := json.NewDecoder(res.Body).Decode(&m); err != nil || m.Result.Outcome == nil || m.Result.Outcome.Class != oip.OutcomeSucceeded {
				t.Errorf("call %d: %+v %v", i, m, err)
				return
			}
			mu.Lock()
			ids[m.Result.Key] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 16 {
		t.Fatalf("%d distinct keys", len(ids))
	}
}

// TestExecutionOutlivesWriteTimeout: POST /api/dispatch waits for an
// execution longer than the HTTP server's write timeout and still answers.
func TestExecutionOutlivesWriteTimeout(t *testing.T) {
	l := newLedger(t, &runner.Options{Allow: []string{"sleep"}})
	l.row("sleep", `{"type":"directory_row","command":"sleep","args":[{"name":"s","type":"number","required":true}],"timeout":5}`)
	hs := httptest.NewUnstartedServer(l.svc.Handler())
	hs.Config.WriteTimeout = 300 * time.Millisecond
	hs.Start()
	defer hs.Close()
	body := `{"key":"slow-1","body":{"type":"invocation","object_key":"sleep","input":{"s":1},"execute":true}}`
	res, err := http.Post(hs.URL+"/api/dispatch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var rc oip.Receipt
	if err := json.NewDecoder(res.Body).Decode(&rc); err != nil || res.StatusCode != 201 || rc.Outcome == nil || rc.Outcome.Class != oip.OutcomeSucceeded {
		t.Fatalf("status %d %+v %v", res.StatusCode, rc, err)
	}
}
