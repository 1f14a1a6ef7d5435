package memstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
)

// model is what the store must hold: every run by id, as last written.
type model map[string]store.Run

// list returns what ListRuns(f) must return (storetest.WantList).
func (m model) list(f store.RunFilter) []string {
	return storetest.WantList(slices.Collect(maps.Values(m)), f)
}

// stale returns what StaleRuns must return, by sorting every run.
func (m model) stale(before time.Time, after store.RunCursor, limit int) []string {
	var sel []store.Run
	for _, r := range m {
		if r.UpdatedAt.Before(before) && (after.IsZero() || store.NewerFirst(store.CursorOf(r), after)) {
			sel = append(sel, r)
		}
	}
	slices.SortFunc(sel, func(a, b store.Run) int {
		if store.NewerFirst(store.CursorOf(a), store.CursorOf(b)) {
			return 1
		}
		return -1
	})
	if limit > 0 && len(sel) > limit {
		sel = sel[:limit]
	}
	return ids(sel)
}

func ids(rs []store.Run) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// randomOps creates, commits and deletes runs at random on s and m:
// times drawn from a small range (so that they tie), some before 1970 or
// far from now, workflows, states and statuses from small sets; and checks
// every list, filter and page against the model.
func randomOps(t *testing.T, s *Store, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	m := model{}
	var live []string
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	when := func() time.Time {
		switch rng.IntN(20) {
		case 0:
			return time.Date(1500, 1, 1, 0, 0, 0, rng.IntN(3), time.UTC)
		case 1:
			return time.Time{}
		}
		return base.Add(time.Duration(rng.IntN(200)) * time.Millisecond).Add(time.Duration(rng.IntN(3)))
	}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	status := func() string { return pick("", "", "processing", "failed") }
	ctx := t.Context()
	// check compares every filter's pages (of one run too when all).
	check := func(all bool) {
		t.Helper()
		empty, processing := "", "processing"
		filters := []store.RunFilter{{}, {WorkflowID: "wf-a"}, {State: "B"}, {Override: &processing}, {Override: &empty},
			{WorkflowID: "wf-b", State: "A"}, {WorkflowID: "wf-a", State: "C", Override: &empty}, {State: "A", Override: &processing},
			{WorkflowID: "none"}, {UpdatedAfter: base.Add(100 * time.Millisecond)}, {WorkflowID: "wf-c", UpdatedAfter: base}}
		for _, f := range filters {
			for _, limit := range []int{0, 1, 7} {
				if limit == 1 && !all {
					continue
				}
				f.Limit = limit
				var paged []string
				for range 100000 {
					got, err := s.ListRuns(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range got {
						if w := m[r.ID]; !r.UpdatedAt.Equal(w.UpdatedAt) || r.State != w.State || r.Version != w.Version {
							t.Fatalf("listed %+v, stored %+v", r, w)
						}
					}
					paged = append(paged, ids(got)...)
					if limit == 0 || len(got) < limit {
						break
					}
					f.Before = store.CursorOf(got[len(got)-1])
				}
				f.Before, f.Limit = store.RunCursor{}, 0
				if want := m.list(f); !slices.Equal(paged, want) {
					t.Fatalf("filter %+v, pages of %d:\n got %v\nwant %v", f, limit, paged, want)
				}
			}
		}
		before := when()
		for _, limit := range []int{0, 3} {
			var paged []string
			cur := store.RunCursor{}
			for range 100000 {
				got, err := s.StaleRuns(ctx, before, cur, limit)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, ids(got)...)
				if limit == 0 || len(got) < limit {
					break
				}
				cur = store.CursorOf(got[len(got)-1])
			}
			if want := m.stale(before, store.RunCursor{}, 0); !slices.Equal(paged, want) {
				t.Fatalf("stale before %v, pages of %d:\n got %v\nwant %v", before, limit, paged, want)
			}
		}
	}
	for i := range ops {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			id := fmt.Sprintf("r%04d", rng.IntN(100000))
			if _, ok := m[id]; ok {
				continue
			}
			at := when()
			snap := store.Snapshot{State: pick("A", "B", "C"), Status: status(), Data: json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`)}
			c := store.Commit{Run: store.Run{ID: id, WorkflowID: pick("wf-a", "wf-b", "wf-c"), Snapshot: snap, Version: 1, CreatedAt: at, UpdatedAt: at},
				Event: store.Event{RunID: id, Seq: 1, Time: at, Kind: store.EventCreated, Snapshot: snap}}
			if err := s.CreateRun(ctx, c); err != nil {
				t.Fatal(err)
			}
			m[id] = c.Run
			live = append(live, id)
		case op < 9:
			id := live[rng.IntN(len(live))]
			r := m[id]
			n := r
			n.Version++
			n.UpdatedAt = when()
			n.State, n.Status = pick("A", "B", "C"), status()
			n.Data = json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`)
			ev := store.Event{RunID: id, Seq: n.Version, Time: n.UpdatedAt, Kind: store.EventTransition, Snapshot: n.Snapshot, Patch: json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`)}
			if err := s.CommitRun(ctx, r.Version, store.Commit{Run: n, Event: ev}).Wait(); err != nil {
				t.Fatal(err)
			}
			m[id] = n
		default:
			k := rng.IntN(len(live))
			id := live[k]
			if err := s.DeleteRun(ctx, id, m[id].Version); err != nil {
				t.Fatal(err)
			}
			delete(m, id)
			live = append(live[:k], live[k+1:]...)
		}
		if i%251 == 0 {
			check(false)
		}
	}
	check(true)
	for id, want := range m {
		got, err := s.GetRun(ctx, id)
		if err != nil || got.Version != want.Version || string(got.Data) != string(want.Data) {
			t.Fatalf("GetRun(%s) = %+v, %v; want %+v", id, got, err, want)
		}
		evs, err := s.Events(ctx, id, 0, 0)
		if err != nil || int64(len(evs)) != want.Version {
			t.Fatalf("Events(%s): %d events, %v; want %d", id, len(evs), err, want.Version)
		}
		// The first event of a page carries the data.
		if evs, err = s.Events(ctx, id, want.Version-1, 1); err != nil || len(evs) != 1 || string(evs[0].Data) != string(want.Data) {
			t.Fatalf("Events(%s) from the last: %+v, %v; want data %s", id, evs, err, want.Data)
		}
	}
}

// Every list and stale page the index answers is the page a sort of
// every run gives, through creations, commits that move runs in time and
// between groups, and deletions: enough of them to split and merge the
// index's nodes at several heights.
func TestRunIndexRandomized(t *testing.T) {
	t.Parallel()
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := New()
			randomOps(t, s, seed, 5000)
			if s.idx.height < 2 {
				t.Fatalf("index of height %d: the test did not reach inner splits", s.idx.height)
			}
		})
	}
}

// Runs whose ids hash alike are told apart by their ids: with every id
// hashing to one value, the store still finds, lists and deletes each.
func TestHashCollisions(t *testing.T) {
	t.Parallel()
	s := New()
	s.hashFn = func(string) uint64 { return 7 }
	randomOps(t, s, 42, 1500)
	if len(s.overflow) == 0 {
		t.Fatal("no id went to the overflow map")
	}
}

// The arena reclaims what commits leave behind: after many commits of a
// few runs, the chunks hold at most about twice the live bytes, and the
// runs read back whole.
func TestArenaCompacts(t *testing.T) {
	t.Parallel()
	s := New()
	ctx := t.Context()
	data := json.RawMessage(`{"pad":"` + string(make([]byte, 0)) + fmt.Sprintf("%0900d", 0) + `"}`)
	runs := make([]store.Run, 50)
	for i := range runs {
		id := fmt.Sprint("run-", i)
		snap := store.Snapshot{State: "A", Data: data}
		c := store.Commit{Run: store.Run{ID: id, WorkflowID: "wf", Snapshot: snap, Version: 1}, Event: store.Event{RunID: id, Seq: 1, Snapshot: snap}}
		if err := s.CreateRun(ctx, c); err != nil {
			t.Fatal(err)
		}
		runs[i] = c.Run
	}
	for i := range 40000 {
		r := &runs[i%len(runs)]
		n := *r
		n.Version++
		n.Data = json.RawMessage(fmt.Sprintf(`{"pad":"%0900d"}`, i))
		// Whole events only: a run's log grows by a whole copy each time.
		ev := store.Event{RunID: r.ID, Seq: n.Version, Snapshot: n.Snapshot}
		if err := s.CommitRun(ctx, r.Version, store.Commit{Run: n, Event: ev}).Wait(); err != nil {
			t.Fatal(err)
		}
		*r = n
		if i%len(runs) == len(runs)-1 && i < 20000 {
			// Drop the runs' history: delete and create them again.
			for j := range runs {
				if err := s.DeleteRun(ctx, runs[j].ID, runs[j].Version); err != nil {
					t.Fatal(err)
				}
				snap := store.Snapshot{State: "A", Data: data}
				c := store.Commit{Run: store.Run{ID: runs[j].ID, WorkflowID: "wf", Snapshot: snap, Version: 1}, Event: store.Event{RunID: runs[j].ID, Seq: 1, Snapshot: snap}}
				if err := s.CreateRun(ctx, c); err != nil {
					t.Fatal(err)
				}
				runs[j] = c.Run
			}
		}
	}
	allocated, dead := s.ar.live()
	live := allocated - dead
	if allocated > 2*live+2*chunkSize {
		t.Fatalf("arena holds %d bytes, %d of them live", allocated, live)
	}
	for _, r := range runs {
		evs, err := s.Events(ctx, r.ID, 0, 0)
		if err != nil || int64(len(evs)) != r.Version || string(evs[len(evs)-1].Data) != string(r.Data) { // whole events: each has its data
			t.Fatalf("run %s after compaction: %d events, %v", r.ID, len(evs), err)
		}
		if got, err := s.GetRun(ctx, r.ID); err != nil || string(got.Data) != string(r.Data) {
			t.Fatalf("GetRun(%s) after compaction: %v", r.ID, err)
		}
	}
}

// checkTree verifies the index's invariants: every inner node's least
// keys are its kids' least keys, no node but the root is empty, the leaves
// chain in order and hold exactly want, ascending.
func checkTree(t *testing.T, x *runIndex, want []ikey) {
	t.Helper()
	var walk func(node int32, h int, root bool)
	var leaves []int32
	walk = func(node int32, h int, root bool) {
		if h == 0 {
			if !root && x.leaves.at(node).n == 0 {
				t.Fatalf("empty leaf %d", node)
			}
			leaves = append(leaves, node)
			return
		}
		n := x.inners.at(node)
		if n.n == 0 || root && n.n < 2 {
			t.Fatalf("inner node %d with %d kids (root %v)", node, n.n, root)
		}
		for j := range n.n {
			walk(n.kids[j], h-1, false)
			if got := x.minOf(n.kids[j], h-1); got != n.mins[j] {
				t.Fatalf("inner node %d: least key of kid %d is %+v, recorded %+v", node, j, got, n.mins[j])
			}
		}
	}
	walk(x.root, x.height, true)
	var got []ikey
	for i, l := range leaves {
		lf := x.leaves.at(l)
		if i > 0 && lf.prev != leaves[i-1] || i+1 < len(leaves) && lf.next != leaves[i+1] {
			t.Fatalf("leaf %d chained to %d and %d", l, lf.prev, lf.next)
		}
		got = append(got, lf.keys[:lf.n]...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("index holds %d keys, want %d (or out of order)", len(got), len(want))
	}
	var back []ikey
	for at := x.prev(pos{leaf: -1}); x.valid(at); at = x.prev(at) {
		back = append(back, x.key(at))
	}
	slices.Reverse(back)
	if !slices.Equal(back, want) {
		t.Fatalf("walking backwards: %d keys, want %d", len(back), len(want))
	}
}

// The index keeps its invariants through keys appended in time order (the
// usual case, which splits nodes where the keys go) and removed from
// either end or at random, and through random keys.
func TestRunIndexInvariants(t *testing.T) {
	t.Parallel()
	ids := func(slot int32) []byte { return fmt.Appendf(nil, "id-%06d", slot) }
	for _, order := range []string{"newest first", "oldest first", "random", "random keys"} {
		t.Run(order, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			x := newRunIndex(ids)
			var keys []ikey
			for i := range int32(16000) {
				k := ikey{group: uint64(i%3) << 56, sec: int64(i), slot: i}
				if order == "random keys" {
					k.sec = rng.Int64N(500)
				}
				x.insert(k)
				keys = append(keys, k)
			}
			sorted := func() []ikey {
				s := slices.Clone(keys)
				slices.SortFunc(s, func(a, b ikey) int {
					p := probe{ikey: b}
					return x.cmp(a, &p)
				})
				return s
			}
			checkTree(t, &x, sorted())
			if x.height < 2 {
				t.Fatalf("height %d", x.height)
			}
			switch order {
			case "newest first":
				slices.Reverse(keys)
			case "random", "random keys":
				rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			}
			for len(keys) > 0 {
				n := min(len(keys), 997)
				for _, k := range keys[:n] {
					if !x.delete(k) {
						t.Fatalf("key %+v not found", k)
					}
				}
				keys = keys[n:]
				checkTree(t, &x, sorted())
			}
			if x.height != 0 {
				t.Fatalf("empty index of height %d", x.height)
			}
		})
	}
}

// A key appended to a full index splits a leaf and its full parent at the
// end, leaving a node with one kid of one key; removing that key must not
// leave an empty node (whose least key would be stale) in the tree.
func TestRunIndexSplitAtEndThenEmptied(t *testing.T) {
	t.Parallel()
	x := newRunIndex(func(slot int32) []byte { return fmt.Appendf(nil, "id-%06d", slot) })
	var keys []ikey
	for i := range int32(leafMax*innerMax + 1) {
		k := ikey{sec: int64(i), slot: i}
		x.insert(k)
		keys = append(keys, k)
	}
	if x.height != 2 {
		t.Fatalf("height %d, want 2 (the test no longer reaches the case)", x.height)
	}
	x.delete(keys[len(keys)-1])
	checkTree(t, &x, keys[:len(keys)-1])
}

// A list walks the smallest index group that holds its matches, so a
// filter matching few runs never walks the others.
func TestListWalksSmallestGroup(t *testing.T) {
	t.Parallel()
	s := New()
	mk := func(id, wf, state, status string) {
		snap := store.Snapshot{State: state, Status: status, Data: json.RawMessage(`{}`)}
		c := store.Commit{Run: store.Run{ID: id, WorkflowID: wf, Snapshot: snap, Version: 1}, Event: store.Event{RunID: id, Seq: 1, Snapshot: snap}}
		if err := s.CreateRun(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		mk(fmt.Sprint("a", i), "wf-a", "S", "")
	}
	for i := range 3 {
		mk(fmt.Sprint("b", i), "wf-b", "S", "failed")
	}
	mk("c", "wf-a", "T", "")
	mk("d", "wf-b", "T", "")
	id := func(n string) int32 { i, _ := s.names.find(n); return i }
	cases := []struct {
		want  [3]int32
		group uint64
	}{
		{[3]int32{-1, -1, -1}, groupAll},
		{[3]int32{id("wf-b"), -1, -1}, groupOf(groupWorkflow, id("wf-b"), 0)},
		{[3]int32{-1, id("S"), id("failed")}, groupOf(groupStatus, id("failed"), 0)},
		{[3]int32{id("wf-a"), id("T"), id("")}, groupOf(groupWorkflowState, id("wf-a"), id("T"))},
		{[3]int32{-1, id("T"), -1}, groupOf(groupState, id("T"), 0)},
	}
	for _, c := range cases {
		if got := s.listGroup(c.want); got != c.group {
			t.Errorf("listGroup(%v) = %x, want %x", c.want, got, c.group)
		}
	}
}

// Moves of entries within their group — to its end, as a tick moves a
// run ticked among others, and to random times — keep the tree's
// invariants and its order: in place, removed where they were found, or
// removed and inserted again.
func TestRunIndexMoves(t *testing.T) {
	ids := func(slot int32) []byte { return fmt.Appendf(nil, "id-%06d", slot) }
	rng := rand.New(rand.NewPCG(9, 9))
	x := newRunIndex(ids)
	keys := make([]ikey, 0, 6000)
	for i := range int32(6000) {
		k := ikey{group: uint64(i%3) << 56, sec: int64(i), slot: i}
		x.insert(k)
		keys = append(keys, k)
	}
	sorted := func() []ikey {
		s := slices.Clone(keys)
		slices.SortFunc(s, func(a, b ikey) int {
			p := probe{ikey: b}
			return x.cmp(a, &p)
		})
		return s
	}
	clock := int64(6000)
	for round := range 6 {
		for range 2000 {
			j := rng.IntN(len(keys))
			old, nk := keys[j], keys[j]
			if round%2 == 0 {
				clock++
				nk.sec = clock // to the end of its group
			} else {
				nk.sec = rng.Int64N(clock) // anywhere in it
			}
			x.move(old, nk)
			keys[j] = nk
		}
		checkTree(t, &x, sorted())
		// Thin the index out so that leaves sit near their minimum and
		// moves take the removal and insertion too.
		for range 700 {
			j := rng.IntN(len(keys))
			if !x.delete(keys[j]) {
				t.Fatalf("key %+v not found", keys[j])
			}
			keys = append(keys[:j], keys[j+1:]...)
		}
		checkTree(t, &x, sorted())
	}
}
