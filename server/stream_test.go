package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/spec"
	"github.com/asmp-dev/asmp/workflow"
)

// testExamples serve the built-in workflows with payments of short steps.
var testExamples = examples.Options{PaymentStep: 40 * time.Millisecond}

// streamLines opens a stream and delivers its lines (decoded) on a channel.
type streamConn struct {
	lines  chan map[string]any
	raw    chan string
	cancel context.CancelFunc
	status int
	header http.Header
}

func (e *env) openStream(path string, headers ...string) *streamConn {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	sc := &streamConn{lines: make(chan map[string]any, 1000), raw: make(chan string, 1000), cancel: cancel, status: res.StatusCode, header: res.Header}
	go func() {
		defer res.Body.Close()
		defer close(sc.lines)
		s := bufio.NewScanner(res.Body)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			var m map[string]any
			if json.Unmarshal(s.Bytes(), &m) != nil {
				m = map[string]any{"unparsable": s.Text()}
			}
			sc.raw <- s.Text()
			sc.lines <- m
		}
	}()
	e.t.Cleanup(cancel)
	return sc
}

// next returns the next line that is not a heartbeat, or fails after d.
// streamWait bounds each wait for a stream line or a stream's end. It only
// turns a hang into a failure, so it is long enough for a loaded machine.
const streamWait = 10 * time.Second

func (sc *streamConn) next(t *testing.T, d time.Duration) map[string]any {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-sc.lines:
			if !ok {
				t.Fatalf("stream ended while waiting for a line")
			}
			raw := <-sc.raw
			if m["heartbeat"] == true {
				continue
			}
			if _, isFrame := m["state"]; isFrame {
				checkStreamFrame(t, raw)
			}
			return m
		case <-timer.C:
			t.Fatalf("no stream line within %v", d)
		}
	}
}

// checkStreamFrame validates a frame line against the schema, allowing the
// one extra property (id) stream lines carry.
func checkStreamFrame(t *testing.T, raw string) {
	t.Helper()
	var m map[string]any
	json.Unmarshal([]byte(raw), &m)
	if _, ok := m["id"].(float64); !ok {
		t.Fatalf("stream frame without a numeric id: %s", raw)
	}
	delete(m, "id")
	b, _ := json.Marshal(m)
	if err := spec.Validate(spec.StateFrame, b); err != nil {
		t.Fatalf("stream frame does not validate: %v\n%s", err, raw)
	}
}

func (sc *streamConn) ended(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-sc.lines:
			if !ok {
				return
			}
			<-sc.raw
			if m["heartbeat"] != true {
				t.Fatalf("unexpected line before the end: %v", m)
			}
		case <-timer.C:
			t.Fatalf("stream did not end within %v", d)
		}
	}
}

func TestStreamPushesChangesAndEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		id := e.startRun("").RunID
		sc := e.openStream("/runs/" + id + "/stream")
		if sc.status != 200 || sc.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("stream: %d %s", sc.status, sc.header.Get("Content-Type"))
		}
		first := sc.next(t, streamWait)
		if first["id"] != 1.0 || first["state"] != "INITIAL" {
			t.Fatalf("first line = %v", first)
		}
		// Another client's transitions arrive, each once and in order. They
		// are pushed: a stream reads the store only when it opens or finds
		// a gap, and its only timer writes heartbeats (DefaultHeartbeat
		// apart here: 15 s, longer than streamWait).
		for i, step := range []struct {
			action string
			body   any
			state  string
		}{{"start", nil, "CONFIGURE"}, {"save", map[string]any{"value": "x"}, "CONFIRM"}, {"confirm", nil, "DONE"}} {
			frame(t, e.fire(id, step.action, step.body), 200)
			m := sc.next(t, streamWait)
			if m["state"] != step.state || m["id"] != float64(i+2) {
				t.Fatalf("line after %s = %v", step.action, m)
			}
		}
		sc.ended(t, streamWait) // the stream ends after the terminal frame
	})
}

func TestStreamResumeWithLastEventID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		id := e.startRun("").RunID
		sc := e.openStream("/runs/" + id + "/stream")
		sc.next(t, streamWait)
		frame(t, e.fire(id, "start", nil), 200)
		if m := sc.next(t, streamWait); m["id"] != 2.0 {
			t.Fatalf("got %v", m)
		}
		sc.cancel() // disconnect; then two transitions happen while away
		frame(t, e.fire(id, "save", map[string]any{"value": "v"}), 200)
		frame(t, e.fire(id, "cancel", nil), 200)
		for _, hdr := range []string{"Last-Event-ID", "X-Last-Event-ID"} {
			re := e.openStream("/runs/"+id+"/stream", hdr, "2")
			a := re.next(t, streamWait)
			b := re.next(t, streamWait)
			if a["id"] != 3.0 || a["state"] != "CONFIRM" || b["id"] != 4.0 || b["state"] != "CANCELLED" {
				t.Fatalf("%s replay = %v, %v; want exactly events 3 and 4", hdr, a, b)
			}
			re.ended(t, streamWait)
		}
		// Resuming at the terminal event of a finished run ends at once.
		done := e.openStream("/runs/"+id+"/stream", "Last-Event-ID", "4")
		done.ended(t, streamWait)
		// X-Run-Id and Mcp-Session-Id name the run on GET /stream.
		for _, hdr := range []string{"X-Run-Id", "Mcp-Session-Id"} {
			re := e.openStream("/stream", hdr, id, "Last-Event-ID", "3")
			if m := re.next(t, streamWait); m["id"] != 4.0 || m["run_id"] != id {
				t.Fatalf("%s stream = %v", hdr, m)
			}
			re.ended(t, streamWait)
		}
		if r := e.do("GET", "/stream", nil); r.status != 400 || !strings.Contains(r.hint(t), "X-Run-Id") {
			t.Fatalf("GET /stream without a run: %d %s", r.status, r.body)
		}
		// A Last-Event-ID ahead of the run is refused.
		if r := e.do("GET", "/runs/"+id+"/stream", nil, "Last-Event-ID", "99"); r.status != 400 {
			t.Fatalf("future Last-Event-ID: %d", r.status)
		}
	})
}

func TestStreamResumeMidRunGoesLive(t *testing.T) {
	e := start(t, setup{defs: []*workflow.Definition{loopWorkflow(t)}})
	id := e.startRun("").RunID
	for i := 0; i < 5; i++ {
		frame(t, e.fire(id, "tick", nil), 200)
	}
	sc := e.openStream("/runs/"+id+"/stream", "Last-Event-ID", "3")
	for want := 4.0; want <= 6; want++ {
		if m := sc.next(t, streamWait); m["id"] != want {
			t.Fatalf("replayed %v, want id %v", m["id"], want)
		}
	}
	// Ticks racing the subscription are delivered once each, in order.
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); e.fire(id, "tick", nil) }()
	}
	wg.Wait()
	for want := 7.0; want <= 16; want++ {
		if m := sc.next(t, streamWait); m["id"] != want {
			t.Fatalf("live %v, want id %v", m["id"], want)
		}
	}
}

func TestManySubscribersAllReceiveEveryEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 streams")
	}
	e := start(t, setup{defs: []*workflow.Definition{loopWorkflow(t)}})
	id := e.startRun("").RunID
	const subs, ticks = 1000, 5
	tr := &http.Transport{MaxIdleConnsPerHost: subs, MaxConnsPerHost: 0}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var ready, done sync.WaitGroup
	errs := make(chan error, subs)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < subs; i++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/runs/"+id+"/stream", nil)
			res, err := hc.Do(req)
			if err != nil {
				ready.Done()
				errs <- err
				return
			}
			defer res.Body.Close()
			s := bufio.NewScanner(res.Body)
			want := int64(1)
			first := true
			for s.Scan() {
				var m struct {
					ID        int64 `json:"id"`
					Heartbeat bool  `json:"heartbeat"`
				}
				json.Unmarshal(s.Bytes(), &m)
				if m.Heartbeat {
					continue
				}
				if m.ID != want {
					errs <- fmt.Errorf("got id %d, want %d", m.ID, want)
					if first {
						ready.Done()
					}
					return
				}
				if first {
					first = false
					ready.Done()
				}
				if want == 1+ticks {
					return
				}
				want++
			}
			errs <- errors.New("stream ended early")
		}()
	}
	ready.Wait()
	for i := 0; i < ticks; i++ {
		frame(t, e.fire(id, "tick", nil), 200)
	}
	done.Wait()
	close(errs)
	n := 0
	for err := range errs {
		n++
		if n < 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d subscribers missed events", n, subs)
	}
}

func TestHeartbeatsOnIdleStream(t *testing.T) {
	e := start(t, setup{opts: &server.Options{Heartbeat: 50 * time.Millisecond}})
	id := e.startRun("").RunID
	sc := e.openStream("/runs/" + id + "/stream")
	<-sc.lines
	<-sc.raw
	for i := 0; i < 2; i++ {
		select {
		case m := <-sc.lines:
			<-sc.raw
			if m["heartbeat"] != true || m["id"] != 1.0 {
				t.Fatalf("idle line = %v, want a heartbeat with id 1", m)
			}
		case <-time.After(streamWait):
			t.Fatal("no heartbeat on an idle stream")
		}
	}
}

// A run entering a task state shows processing, streams progress, then
// completes on its own.
func TestBackgroundTaskWithProgress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		id := e.startRun("expense-approval-v1").RunID
		frame(t, e.fire(id, "submit", map[string]any{"amount": 12.5, "description": "Lunch"}), 200)
		sc := e.openStream("/runs/" + id + "/stream")
		sc.next(t, streamWait)
		f := frame(t, e.fire(id, "approve", nil), 200)
		if f.State != "PAYING" || f.Status != "processing" {
			t.Fatalf("approve -> %+v", f)
		}
		if acts := f.Actions(); len(acts) != 1 || acts[0] != "cancel" {
			t.Fatalf("while processing, offered = %v (task actions are reserved)", acts)
		}
		if r := e.fire(id, "paid", nil); r.status != 403 {
			t.Fatalf("a client fired the task's own action: %d", r.status)
		}
		var progress []string
		for {
			m := sc.next(t, streamWait)
			if p, ok := m["progress"].(string); ok {
				progress = append(progress, p)
				continue
			}
			if m["state"] == "PAYING" {
				continue
			}
			if m["state"] != "PAID" || m["status"] != "completed" {
				t.Fatalf("after the task: %v", m)
			}
			break
		}
		if len(progress) < 3 || progress[len(progress)-1] != "100%" {
			t.Fatalf("progress lines = %v", progress)
		}
		sc.ended(t, streamWait)
		evs := e.events(id)
		last := evs[len(evs)-1]
		if last["action"] != "paid" || last["actor"] != "task" {
			t.Fatalf("last event = %v", last)
		}
		if n, _ := e.st.PendingTasks(t.Context()); n != 0 {
			t.Fatalf("%d tasks still pending", n)
		}
	})
}

func TestTransitionStreamsUntilProcessingEnds(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("expense-approval-v1").RunID
	frame(t, e.fire(id, "submit", map[string]any{"amount": 10, "description": "Taxi"}), 200)
	req, _ := http.NewRequest("POST", e.url+"/runs/"+id+"/transitions/approve", strings.NewReader("{}"))
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 202 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("unified endpoint: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := bufio.NewScanner(res.Body)
	var states []string
	progress := 0
	for s.Scan() {
		var m map[string]any
		json.Unmarshal(s.Bytes(), &m)
		if st, ok := m["state"].(string); ok {
			checkStreamFrame(t, s.Text())
			states = append(states, st+"/"+m["status"].(string))
		} else if _, ok := m["progress"]; ok {
			progress++
		}
	}
	if len(states) != 2 || states[0] != "PAYING/processing" || states[1] != "PAID/completed" || progress == 0 {
		t.Fatalf("streamed states %v with %d progress lines", states, progress)
	}
	// A transition into a state that is not processing answers 200 JSON as usual.
	id2 := e.startRun("").RunID
	r := e.do("POST", "/runs/"+id2+"/transitions/start", nil, "Accept", "application/x-ndjson")
	if f := frame(t, r, 200); f.State != "CONFIGURE" {
		t.Fatalf("non-processing target: %+v", f)
	}
}

func taskWorkflow(t *testing.T, withFailure bool) *workflow.Definition {
	b := workflow.New("task-v1", "READY")
	b.State("READY").Hint("Go.")
	failAction := ""
	if withFailure {
		failAction = "oops"
	}
	b.State("WORK").Hint("Working.").Task(func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
		if tc.IdempotencyKey == "" || tc.Attempt != 1 {
			return "", fmt.Errorf("bad task context %+v", tc)
		}
		return "", errors.New("disk full")
	}, "ok", failAction)
	b.State("DONE").Hint("Done.")
	b.State("RECOVER").Hint("The work failed; try again.")
	b.Transition("READY", "go", "WORK")
	b.Transition("WORK", "ok", "DONE")
	b.Transition("WORK", "oops", "RECOVER")
	b.Transition("RECOVER", "retry", "WORK")
	return b.MustBuild()
}

func TestTaskFailure(t *testing.T) {
	t.Run("failure action", func(t *testing.T) {
		e := start(t, setup{defs: []*workflow.Definition{taskWorkflow(t, true)}})
		id := e.startRun("").RunID
		sc := e.openStream("/runs/" + id + "/stream")
		sc.next(t, streamWait)
		frame(t, e.fire(id, "go", nil), 200)
		sc.next(t, streamWait) // WORK/processing
		m := sc.next(t, streamWait)
		if m["state"] != "RECOVER" || m["status"] != "active" {
			t.Fatalf("after a failing task with a failure action: %v", m)
		}
	})
	t.Run("no failure action", func(t *testing.T) {
		e := start(t, setup{defs: []*workflow.Definition{taskWorkflow(t, false)}})
		id := e.startRun("").RunID
		sc := e.openStream("/runs/" + id + "/stream")
		sc.next(t, streamWait)
		frame(t, e.fire(id, "go", nil), 200)
		sc.next(t, streamWait)
		m := sc.next(t, streamWait)
		if m["state"] != "WORK" || m["status"] != "failed" || !strings.Contains(m["hint"].(string), "disk full") || len(m["next_states"].([]any)) != 0 {
			t.Fatalf("after a failing task without a failure action: %v", m)
		}
		sc.ended(t, streamWait)
		if r := e.fire(id, "ok", nil); r.status != 403 || !strings.Contains(r.hint(t), "failed") {
			t.Fatalf("transition on a failed run: %d %s", r.status, r.body)
		}
	})
}

func TestShutdownEndsStreamsWithFinalLine(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("").RunID
	sc := e.openStream("/runs/" + id + "/stream")
	sc.next(t, streamWait)
	e.srv.Shutdown()
	m := sc.next(t, streamWait)
	if m["end"] != "shutdown" || m["id"] != 1.0 || !strings.Contains(m["hint"].(string), "Last-Event-ID: 1") {
		t.Fatalf("final line = %v", m)
	}
	sc.ended(t, streamWait)
}

// A task's result lands in the run's data under the state's output key, in
// the commit of its success action; a failed task stores nothing.
func TestTaskOutputInRunData(t *testing.T) {
	b := workflow.New("output-v1", "READY")
	b.State("READY").Hint("Go.")
	b.State("WORK").Hint("Working.").Task(func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
		if n, _ := tc.Data["n"].(int64); n < 0 {
			tc.Result = "never stored"
			return "", errors.New("negative")
		}
		tc.Result = map[string]any{"double": 2 * tc.Data["n"].(int64), "note": "ok"}
		return "", nil
	}, "ok", "oops").TaskOutput("result")
	b.State("DONE").Hint("Done.")
	b.State("RECOVER").Hint("Failed.")
	b.Transition("READY", "go", "WORK").Expect("n", "integer")
	b.Transition("WORK", "ok", "DONE")
	b.Transition("WORK", "oops", "RECOVER")
	def := b.MustBuild()
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			checkTaskOutput(t, start(t, setup{defs: []*workflow.Definition{def}, newStor: open}))
		})
	}
}

func checkTaskOutput(t *testing.T, e *env) {
	for _, c := range []struct {
		n     int
		state string
		want  any
	}{{21, "DONE", map[string]any{"double": 42.0, "note": "ok"}}, {-1, "RECOVER", nil}} {
		id := e.startRun("").RunID
		sc := e.openStream("/runs/" + id + "/stream")
		sc.next(t, streamWait)
		frame(t, e.fire(id, "go", map[string]any{"n": c.n}), 200)
		sc.next(t, streamWait) // WORK/processing
		m := sc.next(t, streamWait)
		data, _ := m["data"].(map[string]any)
		if m["state"] != c.state || !reflect.DeepEqual(data["result"], c.want) || data["n"] != float64(c.n) {
			t.Fatalf("n=%d: after the task: %v", c.n, m)
		}
	}
}
