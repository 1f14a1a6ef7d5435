package memstore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The timer heaps stay heaps through random replacements, completions,
// claims, releases and deletions of runs: every entry is where its record
// says, no child comes before its parent, the heaps hold exactly the
// timers on the runs' lists, and a walk of the due heap finds exactly the
// timers due before a time.
func TestTimerHeapsStayOrdered(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	create := func(id string) {
		t.Helper()
		r := store.Run{ID: id, WorkflowID: "wf", Version: 1, CreatedAt: t0, UpdatedAt: t0}
		r.State, r.Data = "A", json.RawMessage(`{}`)
		c := store.Commit{Run: r, Event: store.Event{RunID: id, Seq: 1, Time: t0, Kind: store.EventCreated, To: "A", Snapshot: r.Snapshot}}
		if err := s.CreateRun(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		create(fmt.Sprintf("r/%d", i)) // a "/" in the id, as findTimer allows
	}
	pending := func() map[string]time.Time {
		all := map[string]time.Time{}
		for i := range 20 {
			ts, err := s.RunTimers(t.Context(), fmt.Sprintf("r/%d", i))
			if err != nil {
				t.Fatal(err)
			}
			for _, tt := range ts {
				all[tt.ID] = tt.DueAt
			}
		}
		return all
	}
	check := func(step int) {
		t.Helper()
		all := pending()
		for _, h := range []*timerHeap{&s.tm.ready, &s.tm.due} {
			if len(h.a) != len(all) || s.tm.n != len(all) {
				t.Fatalf("step %d: heap %d holds %d entries (count %d) for %d timers", step, h.which, len(h.a), s.tm.n, len(all))
			}
			for i, e := range h.a {
				if int(s.trec(e.t).at[h.which]) != i {
					t.Fatalf("step %d: heap %d entry %d says it is at %d", step, h.which, i, s.trec(e.t).at[h.which])
				}
				if i > 0 && s.less(h, i, (i-1)/heapArity) {
					t.Fatalf("step %d: heap %d entry %d comes before its parent", step, h.which, i)
				}
			}
		}
		cut := t0.Add(time.Duration(rng.IntN(100)) * time.Second)
		var got, want []string
		s.before(&s.tm.due, cut, func(tt int32) { got = append(got, s.timerID(tt)) })
		for id, due := range all {
			if due.Before(cut) {
				want = append(want, id)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: timers due before %v: walk %q, want %q", step, cut, got, want)
		}
	}
	now := t0
	for step := range 3000 {
		run := fmt.Sprintf("r/%d", rng.IntN(20))
		slot, ok := s.lookup(run)
		if !ok {
			create(run)
			slot, _ = s.lookup(run)
		}
		ts, _ := s.RunTimers(t.Context(), run)
		switch op := rng.IntN(11); {
		case op < 5:
			var nts []store.Timer
			for j := range rng.IntN(4) {
				due := t0.Add(time.Duration(rng.IntN(100)) * time.Second)
				nts = append(nts, store.Timer{RunID: run, WorkflowID: "wf", State: "A", Version: int64(step), Action: fmt.Sprintf("a%d", j), DueAt: due})
			}
			s.replaceTimers(slot, nts)
		case op < 7:
			if len(ts) > 0 {
				if err := s.CompleteTimer(t.Context(), ts[rng.IntN(len(ts))].ID); err != nil {
					t.Fatal(err)
				}
			}
		case op < 9:
			now = now.Add(time.Duration(rng.IntN(5)) * time.Second)
			if _, err := s.ClaimDueTimers(t.Context(), now, 1+rng.IntN(3), "w", now.Add(time.Duration(1+rng.IntN(30))*time.Second)); err != nil {
				t.Fatal(err)
			}
		case op < 10:
			if len(ts) > 0 {
				_ = s.ReleaseTimer(t.Context(), ts[0].ID, "w")
			}
		default:
			if err := s.DeleteRun(t.Context(), run, 1); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
}

// Timers due at the same time are ordered by id (store.TimerID), without
// building the ids: idLess agrees with comparing them, for runs whose ids
// share prefixes, hold "/", or are longer than its buffers.
func TestTimerTieOrderIsByID(t *testing.T) {
	s := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := []string{"a", "a/1", "ab", "b", "a" + strings.Repeat("x", 200), "a" + strings.Repeat("x", 199)}
	for _, id := range ids {
		r := store.Run{ID: id, WorkflowID: "wf", Version: 1, CreatedAt: t0, UpdatedAt: t0}
		r.State, r.Data = "A", json.RawMessage(`{}`)
		c := store.Commit{Run: r, Event: store.Event{RunID: id, Seq: 1, Time: t0, Kind: store.EventCreated, To: "A", Snapshot: r.Snapshot},
			Timers: []store.Timer{{Action: "x", DueAt: t0}, {Action: "x/1", DueAt: t0}, {Action: "y", DueAt: t0}}}
		if err := s.CreateRun(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	slots := s.tm.ready.a
	for _, a := range slots {
		for _, b := range slots {
			if got, want := s.idLess(a.t, b.t), s.timerID(a.t) < s.timerID(b.t); got != want {
				t.Errorf("idLess(%q, %q) = %v, want %v", s.timerID(a.t), s.timerID(b.t), got, want)
			}
		}
	}
}
