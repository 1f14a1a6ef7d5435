// Package storetest is the conformance suite every store.Store backend runs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
//	}
//
// It checks the contracts written on the store.Store interface: atomic
// compare-and-set commits, gap-free per-run event logs, task claiming with
// leases, and the append-only ledger with gap-free sequence numbers.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Factory returns a new, empty store for one test. The suite closes it.
type Factory func(t *testing.T) store.Store

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateDuplicate", testCreateDuplicate},
		{"GetMissing", testGetMissing},
		{"CommitCAS", testCommitCAS},
		{"CommitMissing", testCommitMissing},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ReadsSeeAcknowledgedCommits", testReadsSeeAcknowledgedCommits},
		{"EventsPaging", testEventsPaging},
		{"SnapshotRoundTrip", testSnapshotRoundTrip},
		{"CountRuns", testCountRuns},
		{"StaleRunsAndDelete", testStaleRunsAndDelete},
		{"TaskLifecycle", testTaskLifecycle},
		{"TaskLeaseExpiry", testTaskLeaseExpiry},
		{"TaskConcurrentClaim", testTaskConcurrentClaim},
		{"TaskReleaseAndFinish", testTaskReleaseAndFinish},
		{"TaskClaimByWorkflow", testTaskClaimByWorkflow},
		{"LedgerAppend", testLedgerAppend},
		{"LedgerBuildError", testLedgerBuildError},
		{"LedgerConcurrentSeq", testLedgerConcurrentSeq},
		{"LedgerLatestAndReplay", testLedgerLatestAndReplay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close() })
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

func mustCreate(t *testing.T, s store.Store, id string) store.Run {
	t.Helper()
	c := NewRun(id)
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatalf("CreateRun(%s): %v", id, err)
	}
	return c.Run
}

func testCreateAndGet(t *testing.T, s store.Store) {
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

func testCreateDuplicate(t *testing.T, s store.Store) {
	mustCreate(t, s, "dup")
	err := s.CreateRun(ctx(), NewRun("dup"))
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second CreateRun = %v, want ErrExists", err)
	}
}

func testGetMissing(t *testing.T, s store.Store) {
	if _, err := s.GetRun(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.Events(ctx(), "nope", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Events(missing) = %v, want ErrNotFound", err)
	}
}

func testCommitCAS(t *testing.T, s store.Store) {
	r := mustCreate(t, s, "cas")
	c := Next(r, "go", "MIDDLE", `{"a":1}`)
	if err := s.CommitRun(ctx(), 1, c); err != nil {
		t.Fatal(err)
	}
	// A second writer that also read version 1 must lose, and write nothing.
	stale := Next(r, "other", "ELSEWHERE", `{"b":2}`)
	if err := s.CommitRun(ctx(), 1, stale); !errors.Is(err, store.ErrConflict) {
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

func testCommitMissing(t *testing.T, s store.Store) {
	r := NewRun("ghost").Run
	if err := s.CommitRun(ctx(), 1, Next(r, "go", "X", `{}`)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CommitRun(missing) = %v, want ErrNotFound", err)
	}
}

// testConcurrentCAS: many writers race read-modify-write loops; every
// increment lands exactly once and the event log has no gap.
func testConcurrentCAS(t *testing.T, s store.Store) {
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
				err = s.CommitRun(ctx(), r.Version, Next(r, fmt.Sprintf("w%d", w), "LOOP", `{}`))
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
func testReadsSeeAcknowledgedCommits(t *testing.T, s store.Store) {
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
		if err := s.CommitRun(ctx(), r.Version, c); err != nil {
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

func testEventsPaging(t *testing.T, s store.Store) {
	r := mustCreate(t, s, "page")
	for i := 0; i < 5; i++ {
		c := Next(r, fmt.Sprintf("a%d", i), "S", `{}`)
		if err := s.CommitRun(ctx(), r.Version, c); err != nil {
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

func testSnapshotRoundTrip(t *testing.T, s store.Store) {
	r := mustCreate(t, s, "snap")
	c := Next(r, "act", "FAILED_STATE", `{"x":"ü \" \n","n":12345678901234}`)
	c.Run.Status, c.Run.Error = "failed", "boom: it broke"
	c.Event.Snapshot = c.Run.Snapshot
	if err := s.CommitRun(ctx(), 1, c); err != nil {
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

func testCountRuns(t *testing.T, s store.Store) {
	mustCreate(t, s, "c1")
	r := mustCreate(t, s, "c2")
	c := Next(r, "x", "Y", `{}`)
	c.Run.Status = "failed"
	c.Event.Snapshot = c.Run.Snapshot
	if err := s.CommitRun(ctx(), 1, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.CountRuns(ctx())
	if err != nil || got[""] != 1 || got["failed"] != 1 {
		t.Fatalf("CountRuns = %v, %v", got, err)
	}
}

// testStaleRunsAndDelete: StaleRuns pages through the runs last changed
// before a time, oldest first; DeleteRun removes a run with its events and
// tasks only at the version the caller saw.
func testStaleRunsAndDelete(t *testing.T, s store.Store) {
	// r0 and r1 stay at t0; r2 and r3 move on to t0+1s and t0+2s; r4 has a task.
	for _, id := range []string{"r0", "r1", "r2", "r3", "r4"} {
		mustCreate(t, s, id)
	}
	for i, id := range []string{"r2", "r3"} {
		r, _ := s.GetRun(ctx(), id)
		for range i + 1 {
			if err := s.CommitRun(ctx(), r.Version, Next(r, "go", "NEXT", `{}`)); err != nil {
				t.Fatal(err)
			}
			r, _ = s.GetRun(ctx(), id)
		}
	}
	r4, _ := s.GetRun(ctx(), "r4")
	c := Next(r4, "go", "WAIT", `{}`)
	c.Event.Time, c.Run.UpdatedAt = t0, t0 // still at t0
	c.Enqueue = task("t4", "r4", 2)
	if err := s.CommitRun(ctx(), 1, c); err != nil {
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
	pending, _ := s.PendingTasks(ctx())
	if err := s.DeleteRun(ctx(), "r4", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx(), "r4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted run still readable: %v", err)
	}
	if _, err := s.Events(ctx(), "r4", 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted run's events: %v, want ErrNotFound", err)
	}
	if n, _ := s.PendingTasks(ctx()); n != pending-1 {
		t.Fatalf("pending tasks %d after deleting the run of one, want %d", n, pending-1)
	}
	if _, ok, err := s.ClaimTask(ctx(), "w", t0.Add(time.Hour), time.Minute, nil); err != nil || ok {
		t.Fatalf("claimed a deleted run's task: %v %v", ok, err)
	}
	if err := s.CreateRun(ctx(), NewRun("r4")); err != nil {
		t.Fatalf("re-creating a deleted run's id: %v", err)
	}
	if evs, err := s.Events(ctx(), "r4", 0, 0); err != nil || len(evs) != 1 {
		t.Fatalf("a re-created run has old events: %v %v", evs, err)
	}
	counts, _ := s.CountRuns(ctx())
	if total := counts[""]; total != 5 {
		t.Fatalf("runs counted after delete and re-create: %v", counts)
	}
}

func task(id, runID string, version int64) *store.Task {
	return &store.Task{ID: id, RunID: runID, State: "WORK", Version: version, Status: store.TaskPending, CreatedAt: t0, UpdatedAt: t0}
}

func testTaskLifecycle(t *testing.T, s store.Store) {
	c := NewRun("tr")
	c.Enqueue = task("tr.1", "tr", 1)
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PendingTasks(ctx()); n != 1 {
		t.Fatalf("PendingTasks = %d, want 1", n)
	}
	got, ok, err := s.ClaimTask(ctx(), "w1", t0, time.Minute, nil)
	if err != nil || !ok || got.ID != "tr.1" || got.Owner != "w1" || got.Attempts != 1 || got.Status != store.TaskRunning || got.Version != 1 || got.State != "WORK" || got.RunID != "tr" {
		t.Fatalf("ClaimTask = %+v, %v, %v", got, ok, err)
	}
	if _, ok, _ := s.ClaimTask(ctx(), "w2", t0.Add(time.Second), time.Minute, nil); ok {
		t.Fatal("a task under lease was claimed twice")
	}
	if err := s.ExtendTask(ctx(), "tr.1", "w2", t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ExtendTask by non-owner = %v, want ErrConflict", err)
	}
	if err := s.ExtendTask(ctx(), "tr.1", "w1", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The commit that leaves the state completes the task atomically and enqueues the next.
	next := Next(c.Run, "done", "WORK2", `{}`)
	next.Complete = "tr.1"
	next.Enqueue = task("tr.2", "tr", 2)
	if err := s.CommitRun(ctx(), 1, next); err != nil {
		t.Fatal(err)
	}
	got, ok, _ = s.ClaimTask(ctx(), "w1", t0.Add(2*time.Hour), time.Minute, nil)
	if !ok || got.ID != "tr.2" {
		t.Fatalf("after completion ClaimTask = %+v, %v; want tr.2", got, ok)
	}
	if _, ok, _ := s.ClaimTask(ctx(), "w1", t0.Add(2*time.Hour), time.Minute, nil); ok {
		t.Fatal("a completed task was claimable")
	}
	// A lost CAS must not enqueue or complete anything.
	stale := Next(c.Run, "late", "ELSE", `{}`)
	stale.Enqueue = task("tr.x", "tr", 2)
	stale.Complete = "tr.2"
	if err := s.CommitRun(ctx(), 1, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit = %v", err)
	}
	if n, _ := s.PendingTasks(ctx()); n != 1 {
		t.Fatalf("PendingTasks after lost CAS = %d, want 1 (tr.2 only)", n)
	}
}

func testTaskLeaseExpiry(t *testing.T, s store.Store) {
	c := NewRun("lease")
	c.Enqueue = task("lease.1", "lease", 1)
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.ClaimTask(ctx(), "dead", t0, time.Minute, nil); !ok {
		t.Fatal("no task to claim")
	}
	got, ok, err := s.ClaimTask(ctx(), "alive", t0.Add(2*time.Minute), time.Minute, nil)
	if err != nil || !ok || got.Owner != "alive" || got.Attempts != 2 {
		t.Fatalf("reclaim after lease = %+v, %v, %v; want attempt 2 by alive", got, ok, err)
	}
	if err := s.ExtendTask(ctx(), "lease.1", "dead", t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("old owner ExtendTask = %v, want ErrConflict", err)
	}
}

func testTaskConcurrentClaim(t *testing.T, s store.Store) {
	const n = 20
	for i := 0; i < n; i++ {
		c := NewRun(fmt.Sprintf("cc%02d", i))
		c.Enqueue = task(fmt.Sprintf("cc%02d.1", i), c.Run.ID, 1)
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	if claimed := ClaimAll(t, []store.Store{s, s, s, s, s, s}, t0); len(claimed) != n {
		t.Fatalf("claimed %d tasks, want %d", len(claimed), n)
	}
}

// ClaimAll runs one worker per entry of workers (a store may appear more
// than once: several workers on one process), each claiming tasks at now
// until none is claimable, and returns every claimed task by id. A task
// claimed twice fails t.
func ClaimAll(t *testing.T, workers []store.Store, now time.Time) map[string]store.Task {
	t.Helper()
	var mu sync.Mutex
	claimed := map[string]store.Task{}
	var wg sync.WaitGroup
	for w, s := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			for {
				tk, ok, err := s.ClaimTask(ctx(), owner, now, time.Hour, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := claimed[tk.ID]; dup {
					t.Errorf("task %s claimed by %s and %s", tk.ID, prev.Owner, owner)
				}
				claimed[tk.ID] = tk
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return claimed
}

func testTaskReleaseAndFinish(t *testing.T, s store.Store) {
	c := NewRun("rel")
	c.Enqueue = task("rel.1", "rel", 1)
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	s.ClaimTask(ctx(), "w1", t0, time.Hour, nil)
	if err := s.ReleaseTask(ctx(), "rel.1", "w2"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseTask by non-owner = %v", err)
	}
	if err := s.ReleaseTask(ctx(), "rel.1", "w1"); err != nil {
		t.Fatal(err)
	}
	got, ok, _ := s.ClaimTask(ctx(), "w2", t0, time.Hour, nil)
	if !ok || got.Owner != "w2" {
		t.Fatalf("released task not claimable: %+v %v", got, ok)
	}
	if err := s.FinishTask(ctx(), "rel.1"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTask(ctx(), "rel.1"); err != nil {
		t.Fatalf("finishing twice = %v, want no-op", err)
	}
	if n, _ := s.PendingTasks(ctx()); n != 0 {
		t.Fatalf("PendingTasks = %d after finish", n)
	}
	if err := s.FinishTask(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FinishTask(missing) = %v", err)
	}
}

// testTaskClaimByWorkflow: a process claims only tasks of the workflows it
// serves (replicas during a rolling deploy may serve different sets).
func testTaskClaimByWorkflow(t *testing.T, s store.Store) {
	old := NewRun("wf-old")
	old.Run.WorkflowID = "old-v1"
	old.Enqueue = task("wf-old.1", "wf-old", 1)
	if err := s.CreateRun(ctx(), old); err != nil {
		t.Fatal(err)
	}
	cur := NewRun("wf-new")
	cur.Run.WorkflowID = "new-v1"
	cur.Enqueue = task("wf-new.1", "wf-new", 1)
	cur.Enqueue.CreatedAt = t0.Add(time.Second) // younger than wf-old.1
	if err := s.CreateRun(ctx(), cur); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.ClaimTask(ctx(), "w-new", t0, time.Hour, []string{"new-v1", "other-v1"})
	if err != nil || !ok || got.ID != "wf-new.1" {
		t.Fatalf("ClaimTask(new-v1) = %+v, %v, %v; want wf-new.1 (not the older task of old-v1)", got, ok, err)
	}
	if got, ok, _ := s.ClaimTask(ctx(), "w-new", t0, time.Hour, []string{"new-v1"}); ok {
		t.Fatalf("claimed %s, a task of a workflow not served", got.ID)
	}
	if _, ok, _ := s.ClaimTask(ctx(), "w-none", t0, time.Hour, []string{}); ok {
		t.Fatal("an empty workflow list claimed a task")
	}
	got, ok, _ = s.ClaimTask(ctx(), "w-any", t0, time.Hour, nil)
	if !ok || got.ID != "wf-old.1" {
		t.Fatalf("ClaimTask(any) = %+v, %v; want wf-old.1", got, ok)
	}
}

// Record builds a ledger record for tests.
func Record(p store.LedgerPrev, key, typ, invID string) store.LedgerRecord {
	r := store.LedgerRecord{InvID: invID, Seq: p.Seq, Key: key, Type: typ, Body: json.RawMessage(`{"type":"` + typ + `"}`), Timestamp: t0, Source: "anonymous", EntryHash: fmt.Sprintf("%064x", p.Seq)}
	if p.Latest != nil {
		r.Supersedes = p.Latest.InvID
	}
	return r
}

func appendRec(t *testing.T, s store.Store, key, typ, invID string, mod func(*store.LedgerRecord)) store.LedgerRecord {
	t.Helper()
	r, err := s.AppendLedger(ctx(), key, func(p store.LedgerPrev) (store.LedgerRecord, error) {
		r := Record(p, key, typ, invID)
		if mod != nil {
			mod(&r)
		}
		return r, nil
	})
	if err != nil {
		t.Fatalf("AppendLedger(%s): %v", invID, err)
	}
	return r
}

func testLedgerAppend(t *testing.T, s store.Store) {
	a := appendRec(t, s, "row-a", "directory_row", "inv_1", nil)
	b := appendRec(t, s, "row-a", "directory_row", "inv_2", nil)
	if a.Seq != 1 || b.Seq != 2 || b.Supersedes != "inv_1" || a.Supersedes != "" {
		t.Fatalf("records = %+v %+v", a, b)
	}
	got, err := s.LedgerRecord(ctx(), "inv_1")
	if err != nil || got.Key != "row-a" || string(got.Body) != `{"type":"directory_row"}` || !got.Timestamp.Equal(t0) || got.EntryHash != a.EntryHash {
		t.Fatalf("LedgerRecord = %+v, %v", got, err)
	}
	h, err := s.LedgerHistory(ctx(), "row-a")
	if err != nil || len(h) != 2 || h[0].InvID != "inv_1" || h[1].InvID != "inv_2" {
		t.Fatalf("LedgerHistory = %+v, %v", h, err)
	}
	if _, err := s.LedgerHistory(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LedgerHistory(missing) = %v", err)
	}
	if _, err := s.LedgerRecord(ctx(), "inv_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LedgerRecord(missing) = %v", err)
	}
	rng, _ := s.LedgerRange(ctx(), 2, 3)
	if len(rng) != 1 || rng[0].InvID != "inv_2" {
		t.Fatalf("LedgerRange(2,3) = %+v", rng)
	}
	if n, _ := s.LedgerSize(ctx()); n != 2 {
		t.Fatalf("LedgerSize = %d", n)
	}
}

func testLedgerBuildError(t *testing.T, s store.Store) {
	boom := errors.New("refused")
	_, err := s.AppendLedger(ctx(), "k", func(store.LedgerPrev) (store.LedgerRecord, error) { return store.LedgerRecord{}, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("AppendLedger error = %v, want the builder's", err)
	}
	if n, _ := s.LedgerSize(ctx()); n != 0 {
		t.Fatalf("a refused append wrote %d records", n)
	}
	if r := appendRec(t, s, "k", "directory_row", "inv_ok", nil); r.Seq != 1 {
		t.Fatalf("seq after a refused append = %d, want 1 (no gap)", r.Seq)
	}
}

func testLedgerConcurrentSeq(t *testing.T, s store.Store) {
	const n = 50
	var wg sync.WaitGroup
	seqs := make(chan int64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := s.AppendLedger(ctx(), fmt.Sprintf("key-%d", i%7), func(p store.LedgerPrev) (store.LedgerRecord, error) {
				return Record(p, fmt.Sprintf("key-%d", i%7), "directory_row", fmt.Sprintf("inv_c%d", i)), nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			seqs <- r.Seq
		}(i)
	}
	wg.Wait()
	close(seqs)
	var got []int
	for q := range seqs {
		got = append(got, int(q))
	}
	sort.Ints(got)
	for i, q := range got {
		if q != i+1 {
			t.Fatalf("seqs = %v: want 1..%d with no gap or duplicate", got, n)
		}
	}
	// Every key's history links each record to its predecessor.
	for k := 0; k < 7; k++ {
		h, _ := s.LedgerHistory(ctx(), fmt.Sprintf("key-%d", k))
		for i := 1; i < len(h); i++ {
			if h[i].Supersedes != h[i-1].InvID {
				t.Fatalf("key-%d record %d supersedes %q, want %q", k, i, h[i].Supersedes, h[i-1].InvID)
			}
		}
	}
}

func testLedgerLatestAndReplay(t *testing.T, s store.Store) {
	appendRec(t, s, "b-row", "directory_row", "inv_b1", nil)
	appendRec(t, s, "a-row", "directory_row", "inv_a1", nil)
	appendRec(t, s, "b-row", "directory_row", "inv_b2", nil)
	appendRec(t, s, "build-1", "invocation", "inv_i1", nil)
	appendRec(t, s, "build-2", "invocation", "inv_i2", func(r *store.LedgerRecord) { r.ReplayOf = "inv_i1" })
	appendRec(t, s, "build-1", "invocation_result", "inv_r1", func(r *store.LedgerRecord) { r.ResultOf = "inv_i1" })
	rows, err := s.LedgerLatest(ctx(), "directory_row", "", 0)
	if err != nil || len(rows) != 2 || rows[0].InvID != "inv_a1" || rows[1].InvID != "inv_b2" {
		t.Fatalf("LedgerLatest = %+v, %v; want a-row@a1, b-row@b2", rows, err)
	}
	rows, _ = s.LedgerLatest(ctx(), "directory_row", "a-row", 10)
	if len(rows) != 1 || rows[0].Key != "b-row" {
		t.Fatalf("LedgerLatest(after a-row) = %+v", rows)
	}
	rows, _ = s.LedgerLatest(ctx(), "directory_row", "", 1)
	if len(rows) != 1 || rows[0].Key != "a-row" {
		t.Fatalf("LedgerLatest(limit 1) = %+v", rows)
	}
	by, err := s.ReplayedBy(ctx(), "inv_i1")
	if err != nil || len(by) != 1 || by[0] != "inv_i2" {
		t.Fatalf("ReplayedBy = %v, %v", by, err)
	}
	r, _ := s.LedgerRecord(ctx(), "inv_r1")
	if r.ResultOf != "inv_i1" || r.Supersedes != "inv_i1" {
		t.Fatalf("result record = %+v", r)
	}
	r, _ = s.LedgerRecord(ctx(), "inv_i2")
	if r.ReplayOf != "inv_i1" {
		t.Fatalf("replay record = %+v", r)
	}
}
