package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// runListTests are RunStore's tests of ListRuns.
var runListTests = []test[store.RunStore]{
	{"ListRunsFilters", testListRunsFilters},
	{"ListRunsPaging", testListRunsPaging},
	{"ListRunsUpdatedAfterMillisecond", testListRunsUpdatedAfterMillisecond},
}

// listFixture stores twelve runs over two workflows, three states and
// three status overrides, whose updated_at values tie in pairs, and
// returns them as stored.
func listFixture(t *testing.T, s store.RunStore) []store.Run {
	t.Helper()
	states := []string{"START", "WAIT", "DONE"}
	overrides := []string{"", "", "processing", "", "failed", ""}
	var out []store.Run
	for i := range 12 {
		c := NewRun(fmt.Sprintf("run-%02d", i))
		c.Run.WorkflowID = []string{"wf-a", "wf-b"}[i%2]
		c.Run.State = states[i%3]
		c.Run.Status = overrides[i%6]
		c.Run.UpdatedAt = t0.Add(time.Duration(i/2) * time.Second) // pairs tie
		c.Event.Snapshot = c.Run.Snapshot
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRun(ctx(), c.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

// WantList is what ListRuns(f) must return, by the contract's meaning,
// from a store holding runs: their ids, newest first. A backend's own
// tests compare against it.
func WantList(runs []store.Run, f store.RunFilter) []string {
	var sel []store.Run
	for _, r := range runs {
		if f.Matches(r) && (f.Before.IsZero() || store.NewerFirst(f.Before, store.CursorOf(r))) {
			sel = append(sel, r)
		}
	}
	slices.SortFunc(sel, func(a, b store.Run) int {
		if store.NewerFirst(store.CursorOf(a), store.CursorOf(b)) {
			return -1
		}
		return 1
	})
	if f.Limit > 0 && len(sel) > f.Limit {
		sel = sel[:f.Limit]
	}
	return runIDs(sel)
}

func runIDs(rs []store.Run) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testListRunsFilters(t *testing.T, s store.RunStore) {
	runs := listFixture(t, s)
	empty, processing := "", "processing"
	filters := map[string]store.RunFilter{
		"all":               {},
		"workflow":          {WorkflowID: "wf-a"},
		"state":             {State: "WAIT"},
		"workflow+state":    {WorkflowID: "wf-b", State: "DONE"},
		"override":          {Override: &processing},
		"derived":           {Override: &empty},
		"all three":         {WorkflowID: "wf-a", State: "DONE", Override: &empty},
		"updated after":     {UpdatedAfter: t0.Add(3 * time.Second)},
		"limit":             {Limit: 5},
		"workflow+after":    {WorkflowID: "wf-a", UpdatedAfter: t0.Add(time.Second)},
		"unknown workflow":  {WorkflowID: "nope"},
		"state+override":    {State: "START", Override: &empty},
		"before a tie":      {Before: store.RunCursor{UpdatedAt: t0.Add(2 * time.Second), ID: "run-05"}},
		"before, filtered":  {WorkflowID: "wf-b", Before: store.CursorOf(runs[7])},
		"after and limited": {UpdatedAfter: t0, Limit: 3},
	}
	for name, f := range filters {
		got, err := s.ListRuns(ctx(), f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := WantList(runs, f); !slices.Equal(runIDs(got), want) {
			t.Errorf("%s: ListRuns = %v, want %v", name, runIDs(got), want)
		}
	}
	// The listed runs are the stored runs, field for field.
	got, err := s.ListRuns(ctx(), store.RunFilter{WorkflowID: "wf-a", State: "WAIT", Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListRuns = %v, %v", got, err)
	}
	w := runs[10] // wf-a, state WAIT (10%3 = 1), newest of them
	if g := got[0]; g.ID != w.ID || g.Status != w.Status || !g.UpdatedAt.Equal(w.UpdatedAt) || !g.CreatedAt.Equal(w.CreatedAt) || g.Version != 1 || string(g.Data) != "{}" {
		t.Fatalf("listed run %+v, stored %+v", g, w)
	}
}

func testListRunsPaging(t *testing.T, s store.RunStore) {
	runs := listFixture(t, s)
	// A run that changes moves to the front of the list.
	moved := runs[0]
	c := Next(moved, "go", "WAIT", `{}`)
	c.Run.UpdatedAt, c.Event.Time = t0.Add(time.Minute), t0.Add(time.Minute)
	if err := s.CommitRun(ctx(), 1, c).Wait(); err != nil {
		t.Fatal(err)
	}
	runs[0], _ = s.GetRun(ctx(), moved.ID)
	for _, f := range []store.RunFilter{{}, {WorkflowID: "wf-a"}, {State: "WAIT"}} {
		want := WantList(runs, f)
		if f.WorkflowID == "" && want[0] != runs[0].ID {
			t.Fatalf("the changed run %s is not first: %v", runs[0].ID, want)
		}
		for limit := 1; limit <= 3; limit++ {
			var paged []string
			page := f
			page.Limit = limit
			for range 20 {
				got, err := s.ListRuns(ctx(), page)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) > limit {
					t.Fatalf("page of %d runs with limit %d", len(got), limit)
				}
				paged = append(paged, runIDs(got)...)
				if len(got) < limit {
					break
				}
				page.Before = store.CursorOf(got[len(got)-1])
			}
			if !slices.Equal(paged, want) {
				t.Fatalf("filter %+v, pages of %d: %v, want %v", f, limit, paged, want)
			}
		}
	}
}

// updated_after compares at millisecond precision, the precision run
// times are shown at: a run whose UpdatedAt falls within the millisecond
// of UpdatedAfter is not after it, one of the next millisecond is. The
// offsets are whole microseconds, which every backend keeps.
func testListRunsUpdatedAfterMillisecond(t *testing.T, s store.RunStore) {
	at := map[string]time.Duration{
		"run-a": time.Millisecond,                        // the millisecond itself, as shown
		"run-b": time.Millisecond + 250*time.Microsecond, // within it
		"run-c": 2*time.Millisecond - time.Microsecond,   // its last microsecond
		"run-d": 2 * time.Millisecond,                    // the next one
		"run-e": 3*time.Millisecond + 500*time.Microsecond,
		"run-f": 0, // the one before
	}
	for _, id := range []string{"run-a", "run-b", "run-c", "run-d", "run-e", "run-f"} {
		c := NewRun(id)
		c.Run.UpdatedAt = t0.Add(at[id])
		c.Event.Snapshot = c.Run.Snapshot
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		after time.Duration
		want  []string
	}{
		{time.Millisecond, []string{"run-e", "run-d"}},
		{time.Millisecond + 250*time.Microsecond, []string{"run-e", "run-d"}}, // a finer time: its millisecond
		{2*time.Millisecond - time.Microsecond, []string{"run-e", "run-d"}},
		{2 * time.Millisecond, []string{"run-e"}},
		{0, []string{"run-e", "run-d", "run-c", "run-b", "run-a"}},
		{-time.Microsecond, []string{"run-e", "run-d", "run-c", "run-b", "run-a", "run-f"}},
	} {
		for _, f := range []store.RunFilter{{UpdatedAfter: t0.Add(tc.after)}, {UpdatedAfter: t0.Add(tc.after), State: "START"}} {
			got, err := s.ListRuns(ctx(), f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(runIDs(got), tc.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", f, runIDs(got), tc.want)
			}
		}
	}
}
