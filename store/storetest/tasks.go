package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// RunsAndTasks is a TaskStore with the RunStore over the same data: tasks
// are created and completed by run commits, so the task suite needs both.
type RunsAndTasks interface {
	store.RunStore
	store.TaskStore
}

// TaskStore runs the suite of store.TaskStore against stores made by
// newStore.
func TaskStore(t *testing.T, newStore func(t *testing.T) RunsAndTasks) {
	suite(t, newStore, []test[RunsAndTasks]{
		{"TaskLifecycle", testTaskLifecycle},
		{"TaskLeaseExpiry", testTaskLeaseExpiry},
		{"TaskNotBefore", testTaskNotBefore},
		{"TaskNotBeforeFarAhead", testTaskNotBeforeFarAhead},
		{"TaskConcurrentClaim", testTaskConcurrentClaim},
		{"TaskReleaseAndFinish", testTaskReleaseAndFinish},
		{"TaskClaimByWorkflow", testTaskClaimByWorkflow},
		{"TaskClaimOrder", testTaskClaimOrder},
		{"TasksDeletedWithRun", testTasksDeletedWithRun},
	})
}

func task(id, runID string, version int64) *store.Task {
	return &store.Task{ID: id, RunID: runID, State: "WORK", Version: version, Status: store.TaskPending, CreatedAt: t0, UpdatedAt: t0}
}

// testTaskNotBefore: a task enqueued with NotBefore (a retry's backoff) is
// not claimed before then, and keeps its attempt number.
func testTaskNotBefore(t *testing.T, s RunsAndTasks) {
	c := NewRun("nb")
	tk := task("nb.1", "nb", 1)
	tk.Attempt, tk.NotBefore = 3, t0.Add(time.Minute)
	c.Enqueue = tk
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ClaimTask(ctx(), "w1", t0.Add(59*time.Second), time.Minute, nil); ok || err != nil {
		t.Fatalf("ClaimTask before NotBefore = %+v, %v, %v; want none", got, ok, err)
	}
	got, ok, err := s.ClaimTask(ctx(), "w1", t0.Add(time.Minute), time.Minute, nil)
	if err != nil || !ok || got.ID != "nb.1" {
		t.Fatalf("ClaimTask at NotBefore = %+v, %v, %v; want nb.1", got, ok, err)
	}
	if got.Attempt != 3 || !got.NotBefore.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claimed task Attempt, NotBefore = %d, %v; want 3, %v", got.Attempt, got.NotBefore, t0.Add(time.Minute))
	}
}

// testTaskNotBeforeFarAhead: a task whose NotBefore is centuries ahead
// (a retry with a backoff of 106751d, the longest duration Go has, which
// passes 2262 and so nanoseconds since 1970 in an int64) is still not
// claimed now: the store keeps it as late, not wrapped round to the past.
func testTaskNotBeforeFarAhead(t *testing.T, s RunsAndTasks) {
	c := NewRun("nbf")
	tk := task("nbf.1", "nbf", 1)
	tk.Attempt, tk.NotBefore = 2, t0.Add(106751*24*time.Hour)
	c.Enqueue = tk
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ClaimTask(ctx(), "w1", t0.Add(time.Hour), time.Minute, nil); ok || err != nil {
		t.Fatalf("ClaimTask long before NotBefore %v = %+v, %v, %v; want none", tk.NotBefore, got, ok, err)
	}
}

func testTaskLifecycle(t *testing.T, s RunsAndTasks) {
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
	if err := s.CommitRun(ctx(), 1, next).Wait(); err != nil {
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
	if err := s.CommitRun(ctx(), 1, stale).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit = %v", err)
	}
	if n, _ := s.PendingTasks(ctx()); n != 1 {
		t.Fatalf("PendingTasks after lost CAS = %d, want 1 (tr.2 only)", n)
	}
}

func testTaskLeaseExpiry(t *testing.T, s RunsAndTasks) {
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

func testTaskConcurrentClaim(t *testing.T, s RunsAndTasks) {
	const n = 20
	for i := 0; i < n; i++ {
		c := NewRun(fmt.Sprintf("cc%02d", i))
		c.Enqueue = task(fmt.Sprintf("cc%02d.1", i), c.Run.ID, 1)
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	if claimed := ClaimAll(t, []store.TaskStore{s, s, s, s, s, s}, t0); len(claimed) != n {
		t.Fatalf("claimed %d tasks, want %d", len(claimed), n)
	}
}

// ClaimAll runs one worker per entry of workers (a store may appear more
// than once: several workers on one process), each claiming tasks at now
// until none is claimable, and returns every claimed task by id. A task
// claimed twice fails t.
func ClaimAll(t *testing.T, workers []store.TaskStore, now time.Time) map[string]store.Task {
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

func testTaskReleaseAndFinish(t *testing.T, s RunsAndTasks) {
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
func testTaskClaimByWorkflow(t *testing.T, s RunsAndTasks) {
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
	now := t0.Add(time.Second)
	got, ok, err := s.ClaimTask(ctx(), "w-new", now, time.Hour, []string{"new-v1", "other-v1"})
	if err != nil || !ok || got.ID != "wf-new.1" {
		t.Fatalf("ClaimTask(new-v1) = %+v, %v, %v; want wf-new.1 (not the older task of old-v1)", got, ok, err)
	}
	if got, ok, _ := s.ClaimTask(ctx(), "w-new", now, time.Hour, []string{"new-v1"}); ok {
		t.Fatalf("claimed %s, a task of a workflow not served", got.ID)
	}
	if _, ok, _ := s.ClaimTask(ctx(), "w-none", now, time.Hour, []string{}); ok {
		t.Fatal("an empty workflow list claimed a task")
	}
	got, ok, _ = s.ClaimTask(ctx(), "w-any", now, time.Hour, nil)
	if !ok || got.ID != "wf-old.1" {
		t.Fatalf("ClaimTask(any) = %+v, %v; want wf-old.1", got, ok)
	}
}

// testTaskClaimOrder: tasks are claimed in the order they became
// claimable, not created: a retry when its NotBefore passed, a running
// task when its lease ended, a fresh task when it was created (ties by
// id); a released task at once. Nothing is claimed before it is ready.
func testTaskClaimOrder(t *testing.T, s RunsAndTasks) {
	enqueue := func(run string, tk *store.Task) {
		t.Helper()
		c := NewRun(run)
		c.Enqueue = tk
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("ord-c", task("ord-c.1", "ord-c", 1)) // created at t0
	retry := task("ord-d.2", "ord-d", 1)          // created at t0, a retry due at t0+5s
	retry.Attempt, retry.NotBefore = 2, t0.Add(5*time.Second)
	enqueue("ord-d", retry)
	fresh := task("ord-a.1", "ord-a", 1) // created at t0+10s
	fresh.CreatedAt, fresh.UpdatedAt = t0.Add(10*time.Second), t0.Add(10*time.Second)
	enqueue("ord-a", fresh)
	if got, ok, err := s.ClaimTask(ctx(), "w", t0.Add(2*time.Second), 5*time.Second, nil); err != nil || !ok || got.ID != "ord-c.1" {
		t.Fatalf("ClaimTask at t0+2s = %+v, %v, %v; want ord-c.1, the one task ready", got, ok, err)
	}
	if got, ok, err := s.ClaimTask(ctx(), "w", t0.Add(4*time.Second), time.Minute, nil); ok || err != nil {
		t.Fatalf("ClaimTask at t0+4s = %+v, %v, %v; want none (a retry not due, a live lease, a task not yet created)", got, ok, err)
	}
	var order []string
	for range 3 {
		got, ok, err := s.ClaimTask(ctx(), "w2", t0.Add(20*time.Second), time.Minute, nil)
		if err != nil || !ok {
			t.Fatalf("ClaimTask at t0+20s after %v = %v, %v", order, ok, err)
		}
		order = append(order, got.ID)
	}
	// ord-d.2 ready at t0+5s, ord-c.1's lease ended at t0+7s, ord-a.1 created at t0+10s.
	if want := []string{"ord-d.2", "ord-c.1", "ord-a.1"}; !slices.Equal(order, want) {
		t.Fatalf("claim order %v, want %v", order, want)
	}
	if err := s.ReleaseTask(ctx(), "ord-a.1", "w2"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ClaimTask(ctx(), "w3", t0.Add(20*time.Second), time.Minute, nil); err != nil || !ok || got.ID != "ord-a.1" {
		t.Fatalf("ClaimTask after a release = %+v, %v, %v; want ord-a.1", got, ok, err)
	}
}

// testTasksDeletedWithRun: DeleteRun removes the run's tasks with it, and
// a run created again under the same id starts with none.
func testTasksDeletedWithRun(t *testing.T, s RunsAndTasks) {
	keep := NewRun("keep")
	keep.Enqueue = task("keep.1", "keep", 1)
	gone := NewRun("gone")
	gone.Enqueue = task("gone.1", "gone", 1)
	for _, c := range []store.Commit{keep, gone} {
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRun(ctx(), "gone", 1); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PendingTasks(ctx()); err != nil || n != 1 {
		t.Fatalf("pending tasks %d, %v after deleting the run of one of two, want 1", n, err)
	}
	got, ok, err := s.ClaimTask(ctx(), "w", t0.Add(time.Hour), time.Minute, nil)
	if err != nil || !ok || got.ID != "keep.1" {
		t.Fatalf("ClaimTask = %+v, %v, %v; want keep.1", got, ok, err)
	}
	if _, ok, err := s.ClaimTask(ctx(), "w", t0.Add(time.Hour), time.Minute, nil); err != nil || ok {
		t.Fatalf("claimed a deleted run's task: %v %v", ok, err)
	}
	if err := s.CreateRun(ctx(), NewRun("gone")); err != nil {
		t.Fatalf("re-creating a deleted run's id: %v", err)
	}
	if n, _ := s.PendingTasks(ctx()); n != 1 {
		t.Fatalf("pending tasks %d after re-creating a deleted run without a task, want 1", n)
	}
}
