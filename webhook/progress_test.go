package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// steppedTask reports progress in three steps, each when the test says:
// 10% and 20% at once, then 30%, then 50%, then 100% just before it
// succeeds.
type steppedTask struct {
	done chan int      // the step just reported
	next chan struct{} // go on
}

func (s *steppedTask) run(ctx context.Context, tc *workflow.TaskContext) (string, error) {
	for step, reports := range [][2]string{{"10%", "one"}, {"20%", "two"}, {"30%", "three"}, {"50%", "four"}} {
		tc.Report(reports[0], reports[1])
		if step == 0 {
			continue // 10% and 20% are reported together
		}
		s.done <- step
		select {
		case <-s.next:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	tc.Report("100%", "done")
	return "", nil
}

// A running task's progress reaches the subscriptions that want
// task.progress at most once a second per task (the engine's clock), and
// its last report when it ends if that one was held back, in the run's
// order: after the change that started the task, before the
// one that ended it; subscriptions that do not want it (by type or
// state) get none.
func TestWebhooksTaskProgress(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		st := b.New(t).Open(t)
		fc := clock.NewFake(hookT0)
		task := &steppedTask{done: make(chan int), next: make(chan struct{})}
		fb := workflow.New("progress-v1", "START")
		fb.State("START")
		fb.State("WORK").Task(task.run, "finish", "")
		fb.State("DONE")
		fb.Transition("START", "begin", "WORK")
		fb.Transition("WORK", "finish", "DONE")
		def, err := fb.Build()
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(st, []*workflow.Definition{def}, &engine.Options{Clock: fc, Webhooks: hookSender(fc)})
		if err != nil {
			t.Fatal(err)
		}
		h := &hookRig{eng: eng, clock: fc, rc: newHookReceiver(t)}
		h.rc.now = fc.Now
		h.subscribe(t, protocol.WebhookRequest{Events: []string{"task.progress", "run.state_changed"}})
		other := newHookReceiver(t)
		other.now = fc.Now
		sub2, err := eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: other.srv.URL + "/other",
			Events: []string{"task.progress", "run.state_changed"}, States: []string{"DONE"}})
		if err != nil {
			t.Fatal(err)
		}
		other.secret = sub2.Secret
		w := eng.StartWorkers(&engine.WorkerOptions{Workers: 1, Poll: time.Hour, Owner: "w"})
		t.Cleanup(func() { w.Stop(time.Second) })

		run, err := eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.move(t, run.ID, "begin")
		wantPending := func(step, n int64) {
			t.Helper()
			if got, err := st.PendingDeliveries(context.Background()); err != nil || got != n {
				t.Fatalf("after step %d: pending deliveries = %d, %v; want %d", step, got, err, n)
			}
		}
		waitStep := func(want int) {
			t.Helper()
			select {
			case got := <-task.done:
				if got != want {
					t.Fatalf("task at step %d, want %d", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the task did not reach step %d", want)
			}
		}
		waitStep(1)
		wantPending(1, 2) // run.state_changed into WORK, and 10% (20% came in the same second)
		fc.Advance(999 * time.Millisecond)
		task.next <- struct{}{}
		waitStep(2)
		wantPending(2, 2) // 30%: still within the second
		fc.Advance(time.Millisecond)
		task.next <- struct{}{}
		waitStep(3)
		wantPending(3, 3) // 50%: a second after 10%
		task.next <- struct{}{}
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := eng.GetRun(context.Background(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == "DONE" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run is in %s, want DONE", r.State)
			}
			time.Sleep(2 * time.Millisecond)
		}
		for h.deliver(t) > 0 {
		}
		got := h.rc.received()
		if want := "run.state_changed@WORK task.progress@WORK task.progress@WORK task.progress@WORK run.state_changed@DONE"; hookTypes(got) != want {
			t.Fatalf("received %s\nwant     %s", hookTypes(got), want)
		}
		p1, p2, p3 := got[1].Msg, got[2].Msg, got[3].Msg
		if p1.Data.Progress != "10%" || p1.Data.Hint != "one" || p2.Data.Progress != "50%" || p2.Data.Hint != "four" || p3.Data.Progress != "100%" || p3.Data.Hint != "done" {
			t.Fatalf("progress messages %+v, %+v, %+v; want 10%% (one), 50%% (four) and, held back then sent at the end, 100%% (done)", p1.Data, p2.Data, p3.Data)
		}
		if p1.Data.RunID != run.ID || p1.Data.WorkflowID != "progress-v1" || p1.Data.Status != "processing" || p1.Data.FrameHref != "/runs/"+run.ID ||
			p1.Data.Action != "" || p1.Data.Actor != "" || p1.Data.From != "" {
			t.Fatalf("progress message data %+v", p1.Data)
		}
		if !p2.Timestamp.Equal(hookT0.Add(time.Second)) {
			t.Fatalf("the second progress message's timestamp is %v, want %v", p2.Timestamp, hookT0.Add(time.Second))
		}
		if ids := map[string]bool{got[0].ID: true, got[1].ID: true, got[2].ID: true, got[3].ID: true}; len(ids) != 4 {
			t.Fatalf("message ids %s, %s, %s, %s are not distinct", got[0].ID, got[1].ID, got[2].ID, got[3].ID)
		}
		if o := other.received(); hookTypes(o) != "run.state_changed@DONE" {
			t.Fatalf("the subscription to state DONE received %s, want run.state_changed@DONE only", hookTypes(o))
		}
		if n, _ := st.PendingDeliveries(context.Background()); n != 0 {
			t.Fatalf("pending deliveries after the drain = %d", n)
		}
	})
}
