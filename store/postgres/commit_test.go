package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/postgres"
	"github.com/asmp-dev/asmp/store/storetest"
)

// oneLane is the options of a store with one commit lane, whose commits
// all share one queue (the tests of grouping count its groups).
func oneLane() *postgres.Options { return &postgres.Options{CommitLanes: 1} }

// createRuns creates runs id-0 … id-(n-1) at version 1.
func createRuns(t *testing.T, s *postgres.Store, prefix string, n int) []store.Run {
	t.Helper()
	out := make([]store.Run, n)
	for i := range out {
		c := storetest.NewRun(fmt.Sprintf("%s-%d", prefix, i))
		if err := s.CreateRun(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		out[i] = c.Run
	}
	return out
}

// checkStored asserts that replica s sees run id at version with one
// event per version, the last one made by action.
func checkStored(t *testing.T, s *postgres.Store, id string, version int64, action string) {
	t.Helper()
	r, err := s.GetRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != version {
		t.Fatalf("run %s at version %d, want %d", id, r.Version, version)
	}
	evs, err := s.Events(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != version {
		t.Fatalf("run %s has %d events, want %d", id, len(evs), version)
	}
	if last := evs[len(evs)-1]; last.Seq != version || last.Action != action {
		t.Fatalf("run %s's last event is (%d, %q), want (%d, %q)", id, last.Seq, last.Action, version, action)
	}
}

// Commits of different runs that arrive together share one round trip
// (one group); each is durable when its Wait returns (another replica
// reads it), and each is notified to the other replicas once.
func TestGroupCommitSharesARoundTrip(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	app := "asmp-test-" + schema
	a := open(t, u, schema, oneLane())
	b := open(t, withApp(t, u, app), schema, nil)
	ch := listen(t, b)
	waitListening(t, u, app+" listen")
	const n = 16
	runs := createRuns(t, a, schema, n)

	before := a.CommitStats()
	release := postgres.HoldCommits(a)
	pend := make([]store.Pending, n)
	for i, r := range runs {
		pend[i] = a.CommitRun(t.Context(), 1, storetest.Next(r, "go", "B", `{"i":1}`))
	}
	release()
	for i, p := range pend {
		if err := p.Wait(); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	after := a.CommitStats()
	if g := after.Groups - before.Groups; g != 1 {
		t.Fatalf("%d commits took %d round trips, want 1", n, g)
	}
	if after.Solo != before.Solo {
		t.Fatalf("%d commits made alone", after.Solo-before.Solo)
	}
	want := map[string]bool{}
	for _, r := range runs {
		checkStored(t, b, r.ID, 2, "go")
		want[r.ID] = true
	}
	// Each commit is notified once, after its creation's notification.
	seen := map[note]int{}
	timeout := time.After(10 * time.Second) // only turns a hang into a failure
	for len(want) > 0 {
		select {
		case m := <-ch:
			seen[m]++
			if seen[m] > 1 {
				t.Fatalf("notification %+v twice", m)
			}
			if m.version == 2 {
				if seen[note{m.run, 1}] == 0 {
					t.Fatalf("notification %+v before its run's creation", m)
				}
				delete(want, m.run)
			}
		case <-timeout:
			t.Fatalf("no notification of version 2 for %v", want)
		}
	}
}

// In one group, a lost compare-and-set fails only its own commit (the
// group is not retried), and a run's commits queued one after the other
// apply in order; a commit the server refuses fails alone too: the others
// are committed on their own.
func TestGroupCommitMemberFailures(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a := open(t, u, schema, oneLane())
	ctx := t.Context()

	t.Run("conflict", func(t *testing.T) {
		runs := createRuns(t, a, "c", 3)
		before := a.CommitStats()
		release := postgres.HoldCommits(a)
		first := storetest.Next(runs[0], "first", "B", `{}`)
		pFirst := a.CommitRun(ctx, 1, first)
		pStale := a.CommitRun(ctx, 1, storetest.Next(runs[0], "stale", "C", `{}`)) // expects 1, which first moves on
		pSecond := a.CommitRun(ctx, 2, storetest.Next(first.Run, "second", "D", `{}`))
		pOther := a.CommitRun(ctx, 1, storetest.Next(runs[1], "other", "B", `{}`))
		pGone := a.CommitRun(ctx, 1, storetest.Next(store.Run{ID: "c-none", Version: 1}, "x", "B", `{}`))
		release()
		if err := pFirst.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := pStale.Wait(); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale commit: %v, want ErrConflict", err)
		}
		if err := pSecond.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := pOther.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := pGone.Wait(); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("commit of an unknown run: %v, want ErrNotFound", err)
		}
		after := a.CommitStats()
		if g, solo := after.Groups-before.Groups, after.Solo-before.Solo; g != 1 || solo != 0 {
			t.Fatalf("%d groups and %d commits alone, want 1 and 0", g, solo)
		}
		checkStored(t, a, runs[0].ID, 3, "second")
		checkStored(t, a, runs[1].ID, 2, "other")
		checkStored(t, a, runs[2].ID, 1, "")
	})

	t.Run("refused", func(t *testing.T) {
		runs := createRuns(t, a, "r", 3)
		// Run r-1's commit enqueues a task whose id is taken: the server
		// refuses that statement, which aborts the group's transaction.
		taken := storetest.NewRun("r-taken")
		taken.Enqueue = &store.Task{ID: "task-taken", RunID: "r-taken", State: "START", Version: 1, CreatedAt: taken.Run.CreatedAt, UpdatedAt: taken.Run.CreatedAt}
		if err := a.CreateRun(ctx, taken); err != nil {
			t.Fatal(err)
		}
		bad := storetest.Next(runs[1], "bad", "B", `{}`)
		bad.Enqueue = &store.Task{ID: "task-taken", RunID: runs[1].ID, State: "B", Version: 2, CreatedAt: bad.Run.UpdatedAt, UpdatedAt: bad.Run.UpdatedAt}
		before := a.CommitStats()
		release := postgres.HoldCommits(a)
		first := storetest.Next(runs[0], "first", "B", `{}`)
		pFirst := a.CommitRun(ctx, 1, first)
		pBad := a.CommitRun(ctx, 1, bad)
		pSecond := a.CommitRun(ctx, 2, storetest.Next(first.Run, "second", "C", `{}`))
		pOther := a.CommitRun(ctx, 1, storetest.Next(runs[2], "other", "B", `{}`))
		release()
		for name, p := range map[string]store.Pending{"first": pFirst, "second": pSecond, "other": pOther} {
			if err := p.Wait(); err != nil {
				t.Fatalf("%s: %v (a refused commit failed its group)", name, err)
			}
		}
		err := pBad.Wait()
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("commit with a taken task id: %v, want the server's refusal", err)
		}
		after := a.CommitStats()
		if solo := after.Solo - before.Solo; solo != 4 {
			t.Fatalf("%d commits made alone after the refusal, want 4", solo)
		}
		checkStored(t, a, runs[0].ID, 3, "second")
		checkStored(t, a, runs[1].ID, 1, "")
		checkStored(t, a, runs[2].ID, 2, "other")
	})
}

// Close commits what was queued before it; a commit handed to a closed
// store fails at once.
func TestCommitAfterClose(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a := open(t, u, schema, nil)
	runs := createRuns(t, a, "z", 3)
	release := postgres.HoldCommits(a)
	pend := make([]store.Pending, len(runs))
	for i, r := range runs {
		pend[i] = a.CommitRun(t.Context(), 1, storetest.Next(r, "go", "B", `{}`))
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	release()
	for i, p := range pend {
		if err := p.Wait(); err != nil {
			t.Fatalf("commit %d queued before Close: %v", i, err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := a.CommitRun(t.Context(), 2, storetest.Next(runs[0], "again", "C", `{}`)).Wait(); err == nil {
		t.Fatal("a commit on a closed store succeeded")
	}
	b := open(t, u, schema, nil)
	for _, r := range runs {
		checkStored(t, b, r.ID, 2, "go")
	}
}

// With several commit lanes, each run's queued commits still apply in call
// order (they all take its lane), every commit is applied, and the lanes'
// groups are in flight at once: held, each lane has taken a group, so the
// commits arrive in more than one group.
func TestCommitLanesKeepEachRunsOrder(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a := open(t, u, schema, &postgres.Options{CommitLanes: 4, MaxConns: 8})
	const runs, steps = 32, 6
	rs := createRuns(t, a, "lane", runs)
	before := a.CommitStats()
	release := postgres.HoldCommits(a)
	var pend []store.Pending
	for i := range rs {
		r := rs[i]
		for k := range steps {
			c := storetest.Next(r, fmt.Sprintf("s%d", k), fmt.Sprintf("S%d", k), `{}`)
			pend = append(pend, a.CommitRun(t.Context(), r.Version, c))
			r = c.Run
		}
	}
	release()
	for i, p := range pend {
		if err := p.Wait(); err != nil {
			t.Fatalf("commit %d (run %d, step %d): %v", i, i/steps, i%steps, err)
		}
	}
	for _, r := range rs {
		checkStored(t, a, r.ID, 1+steps, fmt.Sprintf("s%d", steps-1))
	}
	if g := a.CommitStats().Groups - before.Groups; g < 2 {
		t.Fatalf("%d commits over 4 lanes took %d group(s), want one per lane used", runs*steps, g)
	}
}

// A pool of fewer than 4 connections gets one commit lane (a lane holds a
// connection while its group is in flight, and reads need the rest): the
// commits of many runs queued together share one group.
func TestSmallPoolHasOneCommitLane(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	a := open(t, u, schema, &postgres.Options{MaxConns: 3})
	runs := createRuns(t, a, "small", 16)
	before := a.CommitStats()
	release := postgres.HoldCommits(a)
	pend := make([]store.Pending, len(runs))
	for i, r := range runs {
		pend[i] = a.CommitRun(t.Context(), 1, storetest.Next(r, "go", "B", `{}`))
	}
	release()
	for i, p := range pend {
		if err := p.Wait(); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if g := a.CommitStats().Groups - before.Groups; g != 1 {
		t.Fatalf("16 commits on a pool of 3 took %d groups, want 1 (one lane)", g)
	}
}
