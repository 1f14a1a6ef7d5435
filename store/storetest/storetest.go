// Package storetest is the conformance suite of package store: one suite
// per part of the contract, and Run for a backend that implements all of
// store.Store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
//	}
//
// RunStore checks atomic compare-and-set commits (also queued ones, applied
// in order) and gap-free per-run event logs; TaskStore checks task claiming
// with leases and tasks entering and leaving with their run's commits;
// TimerStore checks timers stored and voided by their run's commits and
// claimed once, in due order, under leases; WebhookStore checks
// subscriptions and the outbox of deliveries stored by their run's
// commits, claimed once, at the head of their queue, under leases;
// LedgerStore checks the append-only ledger with gap-free sequence numbers;
// DefinitionStore checks stored definitions and the runs' pins to them;
// ScheduleStore checks schedules and the compare-and-set of their last
// tick that lets one caller start a tick's run.
// Each suite gets a new, empty store per test and closes it afterwards when
// it has a Close method.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Factory returns a new, empty store for one test. The suite closes it.
type Factory func(t *testing.T) store.Store

// Run runs every part's suite (RunStore, TaskStore, TimerStore,
// WebhookStore, LedgerStore, DefinitionStore, ScheduleStore) against
// stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	t.Run("RunStore", func(t *testing.T) {
		RunStore(t, func(t *testing.T) store.RunStore { return newStore(t) })
	})
	t.Run("TaskStore", func(t *testing.T) {
		TaskStore(t, func(t *testing.T) RunsAndTasks { return newStore(t) })
	})
	t.Run("TimerStore", func(t *testing.T) {
		TimerStore(t, func(t *testing.T) RunsAndTimers { return newStore(t) })
	})
	t.Run("WebhookStore", func(t *testing.T) {
		WebhookStore(t, func(t *testing.T) RunsAndWebhooks { return newStore(t) })
	})
	t.Run("LedgerStore", func(t *testing.T) {
		LedgerStore(t, func(t *testing.T) store.LedgerStore { return newStore(t) })
	})
	t.Run("DefinitionStore", func(t *testing.T) {
		DefinitionStore(t, func(t *testing.T) RunsAndDefinitions { return newStore(t) })
	})
	t.Run("ScheduleStore", func(t *testing.T) {
		ScheduleStore(t, func(t *testing.T) store.ScheduleStore { return newStore(t) })
	})
}

// RunStore runs the suite of store.RunStore against stores made by newStore.
func RunStore(t *testing.T, newStore func(t *testing.T) store.RunStore) {
	suite(t, newStore, runListTests)
	suite(t, newStore, []test[store.RunStore]{
		{"CreateAndGet", testCreateAndGet},
		{"CreateDuplicate", testCreateDuplicate},
		{"GetMissing", testGetMissing},
		{"CommitCAS", testCommitCAS},
		{"CommitMissing", testCommitMissing},
		{"ConcurrentCAS", testConcurrentCAS},
		{"QueuedCommitsInOrder", testQueuedCommitsInOrder},
		{"ReadsSeeAcknowledgedCommits", testReadsSeeAcknowledgedCommits},
		{"EventsPaging", testEventsPaging},
		{"SnapshotRoundTrip", testSnapshotRoundTrip},
		{"CountRuns", testCountRuns},
		{"EventLayout", testEventLayout},
		{"EventsPageBytes", testEventsPageBytes},
		{"StaleRunsAndDelete", testStaleRunsAndDelete},
	})
}

// test is one test of a suite over stores of type S.
type test[S any] struct {
	name string
	fn   func(*testing.T, S)
}

// suite runs each test on a new store, closed when the test ends. The
// tests of a store private to its process run in parallel (each has its
// own store); those of a shared one (store.Capabilities.Shared: a
// database server's connections) one at a time.
func suite[S any](t *testing.T, newStore func(t *testing.T) S, tests []test[S]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if c, ok := any(s).(io.Closer); ok {
				t.Cleanup(func() { _ = c.Close() })
			}
			if cs, ok := any(s).(interface{ Capabilities() store.Capabilities }); ok && !cs.Capabilities().Shared {
				t.Parallel()
			}
			tc.fn(t, s)
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// NewRun returns a first commit for a run with the given id.
func NewRun(id string) store.Commit {
	snap := store.Snapshot{State: "START", Data: json.RawMessage(`{}`)}
	return store.Commit{
		Run:   store.Run{ID: id, WorkflowID: "wf-test", Snapshot: snap, Version: 1, CreatedAt: t0, UpdatedAt: t0},
		Event: store.Event{RunID: id, Seq: 1, Time: t0, Kind: store.EventCreated, To: "START", Actor: "tester", Snapshot: snap},
	}
}

// Next returns the commit that moves r to state with data, one version on.
func Next(r store.Run, action, state, data string) store.Commit {
	now := r.UpdatedAt.Add(time.Second)
	snap := store.Snapshot{State: state, Data: json.RawMessage(data), Milestones: append(append([]string{}, r.Milestones...), "m-"+state)}
	n := r
	n.Snapshot = snap
	n.Version = r.Version + 1
	n.UpdatedAt = now
	return store.Commit{
		Run:   n,
		Event: store.Event{RunID: r.ID, Seq: n.Version, Time: now, Kind: store.EventTransition, Action: action, From: r.State, To: state, Actor: "tester", Snapshot: snap},
	}
}

func ctx() context.Context { return context.Background() }

func mustCreate(t *testing.T, s store.RunStore, id string) store.Run {
	t.Helper()
	c := NewRun(id)
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatalf("CreateRun(%s): %v", id, err)
	}
	return c.Run
}

func testCreateAndGet(t *testing.T, s store.RunStore) {
	want := mustCreate(t, s, "run-1")
	got, err := s.GetRun(ctx(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.WorkflowID != want.WorkflowID || got.State != "START" || got.Version != 1 {
		t.Fatalf("GetRun = %+v, want %+v", got, want)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
		t.Fatalf("times = %v %v, want %v", got.CreatedAt, got.UpdatedAt, t0)
	}
	evs, err := s.Events(ctx(), "run-1", 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 || evs[0].Kind != store.EventCreated {
		t.Fatalf("Events = %+v, %v; want the creation event", evs, err)
	}
}

func testCreateDuplicate(t *testing.T, s store.RunStore) {
	mustCreate(t, s, "dup")
	err := s.CreateRun(ctx(), NewRun("dup"))
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second CreateRun = %v, want ErrExists", err)
	}
}

func testGetMissing(t *testing.T, s store.RunStore) {
	if _, err := s.GetRun(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.Events(ctx(), "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Events(missing) = %v, want ErrNotFound", err)
	}
}

func testCommitCAS(t *testing.T, s store.RunStore) {
	r := mustCreate(t, s, "cas")
	c := Next(r, "go", "MIDDLE", `{"a":1}`)
	if err := s.CommitRun(ctx(), 1, c).Wait(); err != nil {
		t.Fatal(err)
	}
	// A second writer that also read version 1 must lose, and write nothing.
	stale := Next(r, "other", "ELSEWHERE", `{"b":2}`)
	if err := s.CommitRun(ctx(), 1, stale).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale CommitRun = %v, want ErrConflict", err)
	}
	got, _ := s.GetRun(ctx(), "cas")
	if got.Version != 2 || got.State != "MIDDLE" || string(got.Data) != `{"a":1}` {
		t.Fatalf("run after CAS = %+v", got)
	}
	evs, _ := s.Events(ctx(), "cas", 0, 0)
	if len(evs) != 2 || evs[1].Action != "go" {
		t.Fatalf("events after lost CAS = %+v, want exactly creation + go", evs)
	}
}

func testCommitMissing(t *testing.T, s store.RunStore) {
	r := NewRun("ghost").Run
	if err := s.CommitRun(ctx(), 1, Next(r, "go", "X", `{}`)).Wait(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CommitRun(missing) = %v, want ErrNotFound", err)
	}
}

// testConcurrentCAS: many writers race read-modify-write loops; every
// increment lands exactly once and the event log has no gap.
func testConcurrentCAS(t *testing.T, s store.RunStore) {
	mustCreate(t, s, "race")
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; {
				r, err := s.GetRun(ctx(), "race")
				if err != nil {
					errs <- err
					return
				}
				err = s.CommitRun(ctx(), r.Version, Next(r, fmt.Sprintf("w%d", w), "LOOP", `{}`)).Wait()
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				i++
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const want = 1 + writers*each
	r, err := s.GetRun(ctx(), "race")
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != want {
		t.Fatalf("version = %d, want %d", r.Version, want)
	}
	evs, err := s.Events(ctx(), "race", 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs) != want {
		t.Fatalf("the log holds %d events, want %d: one per acknowledged commit", len(evs), want)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap or duplicate", i, e.Seq)
		}
	}
}

// testReadsSeeAcknowledgedCommits: a read that starts after a commit was
// acknowledged sees that commit (or a later one), while commits and reads
// of the run go on concurrently. A store that caches runs must never
// serve a value older than an acknowledged write.
func testReadsSeeAcknowledgedCommits(t *testing.T, s store.RunStore) {
	const commits = 150
	r := mustCreate(t, s, "hot")
	var acked atomic.Int64
	acked.Store(1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				want := acked.Load()
				got, err := s.GetRun(ctx(), "hot")
				if err != nil {
					errs <- err
					return
				}
				if got.Version < want {
					errs <- fmt.Errorf("read version %d after version %d was acknowledged", got.Version, want)
					return
				}
			}
		}()
	}
	for range commits {
		c := Next(r, "tick", "START", `{}`)
		if err := s.CommitRun(ctx(), r.Version, c).Wait(); err != nil {
			t.Fatal(err)
		}
		r = c.Run
		acked.Store(r.Version)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, err := s.GetRun(ctx(), "hot"); err != nil || got.Version != commits+1 {
		t.Fatalf("final read: version %d, %v", got.Version, err)
	}
}

func testEventsPaging(t *testing.T, s store.RunStore) {
	r := mustCreate(t, s, "page")
	for i := 0; i < 5; i++ {
		c := Next(r, fmt.Sprintf("a%d", i), "S", `{}`)
		if err := s.CommitRun(ctx(), r.Version, c).Wait(); err != nil {
			t.Fatal(err)
		}
		r = c.Run
	}
	evs, err := s.Events(ctx(), "page", 2, 0)
	if err != nil || len(evs) != 4 || evs[0].Seq != 3 || evs[3].Seq != 6 {
		t.Fatalf("Events(after 2) = %+v, %v; want seqs 3..6", evs, err)
	}
	evs, _ = s.Events(ctx(), "page", 2, 2)
	if len(evs) != 2 || evs[1].Seq != 4 {
		t.Fatalf("Events(after 2, limit 2) = %+v; want seqs 3,4", evs)
	}
	evs, err = s.Events(ctx(), "page", 6, 0)
	if err != nil || len(evs) != 0 {
		t.Fatalf("Events(after last) = %+v, %v; want none", evs, err)
	}
}

func testSnapshotRoundTrip(t *testing.T, s store.RunStore) {
	r := mustCreate(t, s, "snap")
	c := Next(r, "act", "FAILED_STATE", `{"x":"ü \" \n","n":12345678901234}`)
	c.Run.Status, c.Run.Error = "failed", "boom: it broke"
	c.Event.Snapshot = c.Run.Snapshot
	if err := s.CommitRun(ctx(), 1, c).Wait(); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetRun(ctx(), "snap")
	if got.Status != "failed" || got.Error != "boom: it broke" || len(got.Milestones) != 1 || got.Milestones[0] != "m-FAILED_STATE" {
		t.Fatalf("snapshot fields lost: %+v", got.Snapshot)
	}
	var a, b any
	if err := json.Unmarshal(got.Data, &a); err != nil {
		t.Fatalf("stored data %q is not JSON: %v", got.Data, err)
	}
	if err := json.Unmarshal(c.Run.Data, &b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("data = %s, want %s", got.Data, c.Run.Data)
	}
	evs, _ := s.Events(ctx(), "snap", 1, 0)
	e := evs[0]
	if e.Action != "act" || e.From != "START" || e.To != "FAILED_STATE" || e.Actor != "tester" || e.Status != "failed" || e.Error != "boom: it broke" || !e.Time.Equal(c.Event.Time) {
		t.Fatalf("event = %+v, want %+v", e, c.Event)
	}
}

func testCountRuns(t *testing.T, s store.RunStore) {
	mustCreate(t, s, "c1")
	r := mustCreate(t, s, "c2")
	c := Next(r, "x", "Y", `{}`)
	c.Run.Status = "failed"
	c.Event.Snapshot = c.Run.Snapshot
	if err := s.CommitRun(ctx(), 1, c).Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := s.CountRuns(ctx())
	want := []store.RunCount{{WorkflowID: "wf-test", N: 1}, {WorkflowID: "wf-test", Status: "failed", N: 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("CountRuns = %v, %v; want %v", got, err, want)
	}
	// Back to a derived status, then deleted: the counts follow.
	r, _ = s.GetRun(ctx(), "c2")
	c = Next(r, "x", "Z", `{}`)
	if err := s.CommitRun(ctx(), 2, c).Wait(); err != nil {
		t.Fatal(err)
	}
	other := NewRun("c3")
	other.Run.WorkflowID = "wf-other"
	if err := s.CreateRun(ctx(), other); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRun(ctx(), "c1", 1); err != nil {
		t.Fatal(err)
	}
	got, err = s.CountRuns(ctx())
	want = []store.RunCount{{WorkflowID: "wf-other", N: 1}, {WorkflowID: "wf-test", N: 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("CountRuns after commit, create and delete = %v, %v; want %v", got, err, want)
	}
}

// testStaleRunsAndDelete: StaleRuns pages through the runs last changed
// before a time, oldest first; DeleteRun removes a run with its events
// only at the version the caller saw (its tasks: see testTasksDeletedWithRun).
func testStaleRunsAndDelete(t *testing.T, s store.RunStore) {
	// r0 and r1 stay at t0; r2 and r3 move on to t0+1s and t0+2s; r4 has a task.
	for _, id := range []string{"r0", "r1", "r2", "r3", "r4"} {
		mustCreate(t, s, id)
	}
	for i, id := range []string{"r2", "r3"} {
		r, _ := s.GetRun(ctx(), id)
		for range i + 1 {
			if err := s.CommitRun(ctx(), r.Version, Next(r, "go", "NEXT", `{}`)).Wait(); err != nil {
				t.Fatal(err)
			}
			r, _ = s.GetRun(ctx(), id)
		}
	}
	r4, _ := s.GetRun(ctx(), "r4")
	c := Next(r4, "go", "WAIT", `{}`)
	c.Event.Time, c.Run.UpdatedAt = t0, t0 // still at t0
	c.Enqueue = task("t4", "r4", 2)
	if err := s.CommitRun(ctx(), 1, c).Wait(); err != nil {
		t.Fatal(err)
	}

	ids := func(rs []store.Run) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all, err := s.StaleRuns(ctx(), t0.Add(2*time.Second), store.RunCursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all); !slices.Equal(got, []string{"r0", "r1", "r4", "r2"}) {
		t.Fatalf("stale before t0+2s = %v, want [r0 r1 r4 r2] (by time, then id)", got)
	}
	if all[3].Version != 2 || !all[3].UpdatedAt.Equal(t0.Add(time.Second)) || all[0].WorkflowID != "wf-test" {
		t.Fatalf("stale run values: %+v", all)
	}
	// Paging: two at a time, resuming after the last seen.
	var paged []string
	cur := store.RunCursor{}
	for {
		page, err := s.StaleRuns(ctx(), t0.Add(time.Hour), cur, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d, limit 2", len(page))
		}
		paged = append(paged, ids(page)...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		cur = store.RunCursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	if !slices.Equal(paged, []string{"r0", "r1", "r4", "r2", "r3"}) {
		t.Fatalf("paged = %v", paged)
	}
	if none, err := s.StaleRuns(ctx(), t0, store.RunCursor{}, 0); err != nil || len(none) != 0 {
		t.Fatalf("stale before t0: %v, %v", none, err)
	}

	// Delete only at the version seen.
	if err := s.DeleteRun(ctx(), "r2", 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete at an old version: %v, want ErrConflict", err)
	}
	if err := s.DeleteRun(ctx(), "nope", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of an unknown run: %v, want ErrNotFound", err)
	}
	if err := s.DeleteRun(ctx(), "r4", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx(), "r4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted run still readable: %v", err)
	}
	if _, err := s.Events(ctx(), "r4", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted run's events: %v, want ErrNotFound", err)
	}
	if err := s.CreateRun(ctx(), NewRun("r4")); err != nil {
		t.Fatalf("re-creating a deleted run's id: %v", err)
	}
	if evs, err := s.Events(ctx(), "r4", 0, 0); err != nil || len(evs) != 1 {
		t.Fatalf("a re-created run has old events: %v %v", evs, err)
	}
	counts, _ := s.CountRuns(ctx())
	if len(counts) != 1 || counts[0].N != 5 {
		t.Fatalf("runs counted after delete and re-create: %v", counts)
	}
}

// testQueuedCommitsInOrder: commits are applied in the order CommitRun was
// called, even when each is handed over before the one before it is
// durable; one expecting the version a failed commit would have created
// loses its compare-and-set.
func testQueuedCommitsInOrder(t *testing.T, s store.RunStore) {
	r := mustCreate(t, s, "queued")
	a := Next(r, "a", "A", `{}`)
	b := Next(a.Run, "b", "B", `{}`)
	late := Next(a.Run, "late", "LATE", `{}`) // also expects a's version
	pa := s.CommitRun(ctx(), 1, a)
	pb := s.CommitRun(ctx(), 2, b)
	pl := s.CommitRun(ctx(), 2, late)
	if err := pa.Wait(); err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := pb.Wait(); err != nil {
		t.Fatalf("b, queued behind a: %v", err)
	}
	if err := pl.Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("late, queued behind b: %v, want ErrConflict", err)
	}
	evs, err := s.Events(ctx(), "queued", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range evs {
		actions = append(actions, e.Action)
	}
	if !slices.Equal(actions, []string{"", "a", "b"}) {
		t.Fatalf("event actions = %q, want creation, a, b", actions)
	}

	// A commit that fails in the queue (it expects a version the run never
	// had): the one queued behind it, expecting the version it would have
	// created, fails too, and neither writes anything.
	r, _ = s.GetRun(ctx(), "queued")
	ahead := r
	ahead.Version++ // the failing commit pretends the run is one version on
	bad := Next(ahead, "bad", "BAD", `{}`)
	next := Next(bad.Run, "next", "NEXT", `{}`)
	pbad := s.CommitRun(ctx(), ahead.Version, bad)
	pnext := s.CommitRun(ctx(), bad.Run.Version, next)
	if err := pbad.Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit expecting version %d of a run at %d: %v, want ErrConflict", ahead.Version, r.Version, err)
	}
	if err := pnext.Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit behind a failed one: %v, want ErrConflict", err)
	}
	if got, _ := s.GetRun(ctx(), "queued"); got.Version != r.Version || got.State != "B" {
		t.Fatalf("run after a failed commit = version %d state %s, want %d B", got.Version, got.State, r.Version)
	}
}
