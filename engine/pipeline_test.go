package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// queuedStore is a memstore whose run commits wait in a queue, applied in
// order when the test flushes it: a store like store/sqlite (group commit)
// whose timing the test controls.
type queuedStore struct {
	*memstore.Store
	mu   sync.Mutex
	q    []queuedCommit
	fail func(c store.Commit) error // called for each commit at flush; an error fails it
}

type queuedCommit struct {
	expected int64
	c        store.Commit
	res      chan error
}

// CommitRun queues the commit; its Pending settles when the test flushes.
func (s *queuedStore) CommitRun(ctx context.Context, expected int64, c store.Commit) store.Pending {
	res := make(chan error, 1)
	s.mu.Lock()
	s.q = append(s.q, queuedCommit{expected, c, res})
	s.mu.Unlock()
	return store.Later(res)
}

func (s *queuedStore) flush() {
	s.mu.Lock()
	q := s.q
	s.q = nil
	fail := s.fail
	s.mu.Unlock()
	for _, x := range q {
		var err error
		if fail != nil {
			err = fail(x.c)
		}
		if err == nil {
			err = s.Store.CommitRun(context.Background(), x.expected, x.c).Wait()
		}
		x.res <- err
	}
}

// waitQueued waits until n commits are queued.
func (s *queuedStore) waitQueued(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		l := len(s.q)
		s.mu.Unlock()
		if l >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commits queued, want %d", l, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	r   *engine.Run
	err error
}

func fire(e *engine.Engine, id, action string) chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := e.Transition(context.Background(), id, action, nil, engine.TransitionOptions{})
		ch <- result{r, err}
	}()
	return ch
}

// Transitions of one run queue up behind each other, each validated
// against the value the previous one leaves, and share one flush; their
// events reach subscribers in order.
func TestQueuedTransitionsShareAGroup(t *testing.T) {
	qs := &queuedStore{Store: memstore.New()}
	e := loopOn(t, qs, false)
	r, err := e.StartRun(context.Background(), "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := e.Hub().Subscribe(r.ID)
	defer sub.Close()
	var results []chan result
	for i := 0; i < 5; i++ {
		results = append(results, fire(e, r.ID, "tick"))
		qs.waitQueued(t, i+1) // queued before the previous one is durable
	}
	qs.flush()
	seen := map[int64]bool{}
	for _, ch := range results {
		res := <-ch
		if res.err != nil {
			t.Fatal(res.err)
		}
		seen[res.r.Version] = true
	}
	for v := int64(2); v <= 6; v++ {
		if !seen[v] {
			t.Fatalf("versions answered = %v", seen)
		}
		m := <-sub.C
		if m.Event.Seq != v {
			t.Fatalf("subscriber got event %d, want %d", m.Event.Seq, v)
		}
	}
}

// A queued commit that fails makes the one queued behind it lose its
// compare-and-set; that one is validated again against the stored run and
// lands on its own.
func TestQueuedCommitFailureRevalidatesTheNext(t *testing.T) {
	qs := &queuedStore{Store: memstore.New()}
	e := loopOn(t, qs, false)
	r, _ := e.StartRun(context.Background(), "", nil, engine.StartOptions{})
	a := fire(e, r.ID, "tick")
	qs.waitQueued(t, 1)
	b := fire(e, r.ID, "tick")
	qs.waitQueued(t, 2)
	failed := false
	qs.fail = func(c store.Commit) error {
		if !failed {
			failed = true
			return errors.New("disk on fire")
		}
		return nil
	}
	qs.flush() // a fails, b (expecting a's version) loses its compare-and-set
	if res := <-a; protocol.ErrorCode(res.err) != protocol.EInternal {
		t.Fatalf("a: %v, want an internal error", res.err)
	}
	qs.waitQueued(t, 1) // b again, against the stored run
	qs.flush()
	res := <-b
	if res.err != nil || res.r.Version != 2 {
		t.Fatalf("b: %+v, %v; want version 2", res.r, res.err)
	}
	if evs, _ := e.Events(context.Background(), r.ID, 0, 0); len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
}

// An action refused against a value that is not durable yet is decided
// against the stored run: cancel behind a confirm that then fails wins.
func TestQueuedRefusalWaitsForTheStoredRun(t *testing.T) {
	qs := &queuedStore{Store: memstore.New()}
	e, err := engine.New(qs, []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
	for _, a := range []string{"start", "save"} {
		ch := make(chan error, 1)
		go func() {
			_, err := e.Transition(ctx, r.ID, a, map[string]any{"value": "v"}, engine.TransitionOptions{})
			ch <- err
		}()
		qs.waitQueued(t, 1)
		qs.flush()
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	confirm := fire(e, r.ID, "confirm")
	qs.waitQueued(t, 1)
	cancel := fire(e, r.ID, "cancel") // not offered in DONE, the queued value
	time.Sleep(50 * time.Millisecond)
	qs.fail = func(c store.Commit) error {
		if c.Event.Action == "confirm" {
			return errors.New("disk on fire")
		}
		return nil
	}
	qs.flush()
	if res := <-confirm; res.err == nil {
		t.Fatal("confirm succeeded")
	}
	qs.waitQueued(t, 1)
	qs.flush()
	res := <-cancel
	if res.err != nil || res.r.State != "CANCELLED" {
		t.Fatalf("cancel: %+v, %v; want CANCELLED", res.r, res.err)
	}
}

// The value a durable commit left is kept to plan the run's next
// transition; when someone else has moved the run meanwhile (another
// process, a task worker committing directly), the compare-and-set fails
// and the transition is planned again on the stored run.
func TestKeptValueGoneStaleIsReplanned(t *testing.T) {
	qs := &queuedStore{Store: memstore.New()}
	e := loopOn(t, qs, true)
	ctx := context.Background()
	r, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
	tick := func(n int64) *engine.Run {
		ch := make(chan result, 1)
		go func() {
			r, err := e.Transition(ctx, r.ID, "tick", map[string]any{"n": n}, engine.TransitionOptions{})
			ch <- result{r, err}
		}()
		for {
			qs.waitQueued(t, 1)
			qs.flush()
			select {
			case res := <-ch:
				if res.err != nil {
					t.Fatal(res.err)
				}
				return res.r
			case <-time.After(20 * time.Millisecond): // replanned: queued again
			}
		}
	}
	tick(1) // version 2, kept
	// Another writer moves the run to version 3 behind the engine's back.
	cur, _ := qs.Store.GetRun(ctx, r.ID)
	next := cur
	next.Version = 3
	next.Data = []byte(`{"n":99}`)
	ev := store.Event{RunID: r.ID, Seq: 3, Time: cur.UpdatedAt, Kind: store.EventTransition, Action: "tick", From: "LOOP", To: "LOOP", Actor: "other", Snapshot: next.Snapshot}
	if err := qs.Store.CommitRun(ctx, 2, store.Commit{Run: next, Event: ev}).Wait(); err != nil {
		t.Fatal(err)
	}
	got := tick(3)
	if got.Version != 4 || got.Data["n"] != int64(3) {
		t.Fatalf("after the other writer: version %d data %v, want version 4 n=3", got.Version, got.Data)
	}
}

// On a store that commits before CommitRun returns (memstore, Postgres) the
// engine takes the same path: it keeps the value its last commit left, and
// when another engine on the same store (another replica) has moved the run
// meanwhile, the compare-and-set fails and the transition is planned again
// on the stored run; an If-Match refused against the kept value is decided
// against the stored run.
func TestSettledStoreReplansAfterAnotherWriter(t *testing.T) {
	st := memstore.New()
	a, b := loopOn(t, st, true), loopOn(t, st, true)
	ctx := context.Background()
	r, err := a.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tick := func(e *engine.Engine, n, ifMatch int64) (*engine.Run, error) {
		return e.Transition(ctx, r.ID, "tick", map[string]any{"n": n}, engine.TransitionOptions{IfMatch: ifMatch})
	}
	if _, err := tick(a, 1, 0); err != nil { // a keeps version 2
		t.Fatal(err)
	}
	if _, err := tick(b, 2, 0); err != nil { // b moves the run to 3
		t.Fatal(err)
	}
	got, err := tick(a, 3, 3) // a's kept value says 2; the stored run is at 3
	if err != nil || got.Version != 4 || got.Data["n"] != int64(3) {
		t.Fatalf("a after b: %+v, %v; want version 4 with n=3", got, err)
	}
	if _, err := tick(b, 4, 3); protocol.ErrorCode(err) != protocol.EConflict {
		t.Fatalf("stale If-Match: %v, want EConflict", err)
	}
	evs, err := a.Events(ctx, r.ID, 0, 0)
	if err != nil || len(evs) != 4 {
		t.Fatalf("events = %d, %v; want 4", len(evs), err)
	}
}
