package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/internal/testsupport/testbin"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/spec"
)

var binary string

func TestMain(m *testing.M) { testbin.Main(m, &binary, nil) }

// The server under test has the race detector exactly when the tests do:
// go test -race checks it, a plain go test does not wait for a race build.
func TestBinaryRaceMatchesTests(t *testing.T) {
	race, err := testbin.BuiltWithRace(binary)
	if err != nil {
		t.Fatal(err)
	}
	if race != testbin.Race {
		t.Fatalf("asmp built with -race=%v, tests run with -race=%v", race, testbin.Race)
	}
}

// proc is a running `asmp serve`.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// serve starts the real binary on a free loopback port.
func serve(t *testing.T, args ...string) *proc {
	t.Helper()
	return serveCmd(t, exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...))
}

// serveCmd starts cmd, an `asmp serve` command the caller has set up, and
// waits until it listens.
func serveCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(p.stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	found := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			if m := listening.FindStringSubmatch(s.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("asmp serve exited before listening:\n%s", p.stderr.String())
		}
		p.url = u
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("asmp serve did not start:\n%s", p.stderr.String())
	}
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (p *proc) do(method, path string, body any, headers ...string) response {
	p.t.Helper()
	r, err := p.try(method, path, body, headers...)
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

func (p *proc) try(method, path string, body any, headers ...string) (response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}, err
}

func frameOf(t *testing.T, r response, status int) protocol.Frame {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if err := spec.Validate(spec.StateFrame, r.body); err != nil {
		t.Fatalf("frame invalid: %v\n%s", err, r.body)
	}
	var f protocol.Frame
	json.Unmarshal(r.body, &f)
	return f
}

func cliOf(t *testing.T, r response) protocol.CLI {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("cli status %d: %s", r.status, r.body)
	}
	if err := spec.Validate(spec.CLI, r.body); err != nil {
		t.Fatalf("cli invalid: %v\n%s", err, r.body)
	}
	var c protocol.CLI
	json.Unmarshal(r.body, &c)
	return c
}

// The seed's flow over the real binary, then a stop and a restart: the run
// is where it was left.
func TestWizardSurvivesRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "asmp.db")
	p := serve(t, "--db", db)
	f := frameOf(t, p.do("POST", "/runs", nil), 201)
	id := f.RunID
	if c := cliOf(t, p.do("GET", "/runs/"+id+"/cli", nil)); c.Prompt != "Config wizard" || c.Options[0].Keys != "1" {
		t.Fatalf("cli = %+v", c)
	}
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/start", nil), 200)
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/save", map[string]any{"value": "blue"}), 200)
	// A clean stop: SIGTERM, exit code 0.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("clean shutdown exited with %v:\n%s", err, p.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	q := serve(t, "--db", db)
	f = frameOf(t, q.do("GET", "/runs/"+id, nil), 200)
	if f.State != "CONFIRM" || f.Data["value"] != "blue" {
		t.Fatalf("after restart: %+v", f)
	}
	want := protocol.CLI{Prompt: "Apply configuration?", Hint: "Confirm to apply or cancel.", RunID: id,
		Options: []protocol.CLIOption{{Action: "confirm", Label: "Yes, apply", Keys: "y"}, {Action: "cancel", Label: "No, cancel", Keys: "n"}}}
	if c := cliOf(t, q.do("GET", "/runs/"+id+"/cli", nil)); !reflect.DeepEqual(c, want) {
		t.Fatalf("cli after restart = %+v", c)
	}
	if f := frameOf(t, q.do("POST", "/runs/"+id+"/transitions/confirm", nil), 200); f.Status != "completed" {
		t.Fatalf("confirm after restart: %+v", f)
	}
}

// Every acknowledged transition survives kill -9, even under concurrent load.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "asmp.db")
	p := serve(t, "--db", db, "testdata/loop.yaml")
	const runs = 4
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	}
	var acked [runs]atomic.Int64 // highest n acknowledged per run
	// The kill comes once enough transitions were acknowledged to prove
	// something, however slow the machine.
	const enough = 500
	var nacked atomic.Int64
	loaded := make(chan struct{})
	var loadedOnce sync.Once
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < runs; i++ {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for n := int64(1); ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					r, err := p.try("POST", "/runs/"+ids[i]+"/transitions/tick", map[string]any{"n": n})
					if err != nil {
						return // the server died
					}
					if r.status == 200 {
						v := etagVersion(r.header.Get("ETag"))
						for cur := acked[i].Load(); v > cur && !acked[i].CompareAndSwap(cur, v); cur = acked[i].Load() {
						}
						if nacked.Add(1) == enough {
							loadedOnce.Do(func() { close(loaded) })
						}
					}
				}
			}(i)
		}
	}
	select {
	case <-loaded:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d transitions acknowledged in two minutes:\n%s", nacked.Load(), p.stderr.String())
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	close(stop)
	wg.Wait()
	q := serve(t, "--db", db, "testdata/loop.yaml")
	total := int64(0)
	for i, id := range ids {
		r := q.do("GET", "/runs/"+id, nil)
		frameOf(t, r, 200)
		got := etagVersion(r.header.Get("ETag"))
		if got < acked[i].Load() {
			t.Fatalf("run %d: version %d after restart, but version %d was acknowledged", i, got, acked[i].Load())
		}
		var evs struct {
			Events []map[string]any `json:"events"`
		}
		json.Unmarshal(q.do("GET", "/runs/"+id+"/events?limit=1000", nil).body, &evs)
		if int64(len(evs.Events)) != got {
			t.Fatalf("run %d: %d events for version %d", i, len(evs.Events), got)
		}
		total += acked[i].Load()
	}
	if total < enough {
		t.Fatalf("only %d transitions were acknowledged before the kill; the test proved little", total)
	}
	t.Logf("%d acknowledged transitions survived kill -9", total)
}

func etagVersion(etag string) int64 {
	var v int64
	fmt.Sscanf(strings.Trim(etag, `"`), "%d", &v)
	return v
}

// A background task interrupted by kill -9 completes after a restart.
func TestTaskSurvivesKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "asmp.db")
	p := serve(t, "--db", db, "--task-lease", "2s")
	id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "expense-approval-v1"}), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"amount": 20, "description": "Train"}), 200)
	if f := frameOf(t, p.do("POST", "/runs/"+id+"/transitions/approve", nil), 200); f.Status != "processing" {
		t.Fatalf("approve: %+v", f)
	}
	waitProgress(t, p, id) // the task is running (it takes ~3 s)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	// The killed worker's lease must expire before another claims the task.
	q := serve(t, "--db", db, "--task-lease", "2s")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		f := frameOf(t, q.do("GET", "/runs/"+id, nil), 200)
		if f.State == "PAID" {
			if f.Status != "completed" {
				t.Fatalf("PAID with status %s", f.Status)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the interrupted task never completed:\n%s", q.stderr.String())
}

// waitProgress returns once run id's stream reports progress of its
// background task: a worker has claimed the task and is running it.
func waitProgress(t *testing.T, p *proc, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/runs/"+id+"/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	s := bufio.NewScanner(res.Body)
	for s.Scan() {
		var m map[string]any
		if err := json.Unmarshal(s.Bytes(), &m); err != nil {
			t.Fatalf("stream line %q: %v", s.Text(), err)
		}
		if _, ok := m["progress"]; ok {
			return
		}
		if m["status"] == "completed" {
			t.Fatalf("the task completed before any progress was seen: %s", s.Text())
		}
	}
	t.Fatalf("the stream ended without task progress: %v", s.Err())
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--db", ":memory:").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to listen on 0.0.0.0:0") {
		t.Fatalf("open server on all interfaces: %v\n%s", err, out)
	}
}

func TestValidateAndGraphCommands(t *testing.T) {
	out, err := exec.Command(binary, "validate", "../../examples/config-wizard.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "examples/config-wizard.yaml: ok (workflow config-wizard-v1, 5 states)") {
		t.Fatalf("validate ok file: %v\n%s", err, out)
	}
	// A state no run can ever leave for a terminal state fails validation,
	// with the path to it; serve only warns (TestServeWarnsAboutDeadEnds).
	out, err = exec.Command(binary, "validate", "testdata/loop.yaml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "testdata/loop.yaml:") || !strings.Contains(string(out), "no terminal state can be reached from state LOOP (path LOOP)") {
		t.Fatalf("validate dead end: %v\n%s", err, out)
	}
	trap := filepath.Join(t.TempDir(), "trap.yaml")
	os.WriteFile(trap, []byte("workflow_id: trap-v1\ninitial_state: A\nstates: {A: {}, B: {}, C: {}, END: {}}\ntransitions: [{from: A, action: go, to: B}, {from: A, action: stop, to: END}, {from: B, action: on, to: C}, {from: C, action: back, to: B}]\n"), 0o644)
	out, err = exec.Command(binary, "validate", trap).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "state B (path A -go-> B)") || !strings.Contains(string(out), "state C (path A -go-> B -on-> C)") || strings.Contains(string(out), "state A ") {
		t.Fatalf("validate trap: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("workflow_id: x\ninitial_state: A\nstates: {A: {}}\ntransitions: [{from: A, action: go, to: B}]\n"), 0o644)
	out, err = exec.Command(binary, "validate", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad.yaml:1:14: workflow_id") || !strings.Contains(string(out), `goes to state "B"`) {
		t.Fatalf("validate bad file: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "graph", "--format", "dot", "testdata/loop.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"LOOP" -> "LOOP"`) {
		t.Fatalf("graph: %v\n%s", err, out)
	}
}

// --retention deletes ended runs once unchanged that long, with their
// events; a run still in progress stays, and the metric counts them.
func TestRetentionPrunesEndedRuns(t *testing.T) {
	p := serve(t, "--db", filepath.Join(t.TempDir(), "asmp.db"), "--retention", "1s")
	ended := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	for _, step := range []struct {
		action string
		body   any
	}{{"start", nil}, {"save", map[string]any{"value": "v"}}, {"confirm", nil}} {
		frameOf(t, p.do("POST", "/runs/"+ended+"/transitions/"+step.action, step.body), 200)
	}
	active := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	deadline := time.Now().Add(15 * time.Second)
	for p.do("GET", "/runs/"+ended, nil).status != 404 {
		if time.Now().After(deadline) {
			t.Fatalf("the ended run was not pruned:\n%s", p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := p.do("GET", "/runs/"+ended+"/events", nil); r.status != 404 {
		t.Fatalf("pruned run's events: %d %s", r.status, r.body)
	}
	frameOf(t, p.do("GET", "/runs/"+active, nil), 200)
	if m := string(p.do("GET", "/metrics", nil).body); !strings.Contains(m, "asmp_runs_pruned_total 1") {
		t.Fatalf("metrics lack the pruned run:\n%s", m)
	}
	if !strings.Contains(p.stderr.String(), "retention: deleted ended runs") {
		t.Fatalf("no retention log line:\n%s", p.stderr.String())
	}
}
