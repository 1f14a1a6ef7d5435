package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The timer heaps stay heaps through random replacements, completions,
// claims and releases: every entry is where its record says, no child
// comes before its parent, and a walk of the due heap finds exactly the
// timers due before a time.
func TestTimerHeapsStayOrdered(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	check := func(step int) {
		t.Helper()
		for _, h := range []*timerHeap{&s.tm.ready, &s.tm.due} {
			if len(h.a) != len(s.tm.byID) {
				t.Fatalf("step %d: heap %d holds %d entries for %d timers", step, h.which, len(h.a), len(s.tm.byID))
			}
			for i, e := range h.a {
				if e.r.at[h.which] != i {
					t.Fatalf("step %d: heap %d entry %d says it is at %d", step, h.which, i, e.r.at[h.which])
				}
				if i > 0 && h.less(i, (i-1)/2) {
					t.Fatalf("step %d: heap %d entry %d comes before its parent", step, h.which, i)
				}
			}
		}
		cut := t0.Add(time.Duration(rng.IntN(100)) * time.Second)
		var got, want []string
		s.tm.due.before(cut, func(r *timerRec) { got = append(got, r.t.ID) })
		for id, r := range s.tm.byID {
			if r.t.DueAt.Before(cut) {
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
		run := fmt.Sprintf("r%d", rng.IntN(20))
		switch op := rng.IntN(10); {
		case op < 5:
			var ts []store.Timer
			for j := range rng.IntN(4) {
				due := t0.Add(time.Duration(rng.IntN(100)) * time.Second)
				ts = append(ts, store.Timer{ID: fmt.Sprintf("%s/%d/a%d", run, step, j), RunID: run, DueAt: due})
			}
			s.tm.replace(run, ts)
		case op < 7:
			if rs := s.tm.byRun[run]; len(rs) > 0 {
				s.tm.done([]string{rs[rng.IntN(len(rs))].t.ID})
			}
		case op < 9:
			now = now.Add(time.Duration(rng.IntN(5)) * time.Second)
			if _, err := s.ClaimDueTimers(t.Context(), now, 1+rng.IntN(3), "w", now.Add(time.Duration(1+rng.IntN(30))*time.Second)); err != nil {
				t.Fatal(err)
			}
		default:
			if rs := s.tm.byRun[run]; len(rs) > 0 {
				_ = s.ReleaseTimer(t.Context(), rs[0].t.ID, "w")
			}
		}
		check(step)
	}
}
