package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// The task queue's walk returns the first task in (ready, id) order that
// is ready by now and passes the filter, as a sort of every open task
// would, through adds, moves and removals; and it visits no task ready
// after now.
func TestTaskQueueWalksInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var q taskQueue
	open := map[string]*store.Task{}
	at := func() time.Time { return t0.Add(time.Duration(rng.IntN(100)) * time.Second) }
	for i := range 3000 {
		switch op := rng.IntN(4); {
		case op <= 1 || len(open) == 0:
			tk := &store.Task{ID: fmt.Sprintf("t%04d", i), CreatedAt: at()}
			if rng.IntN(2) == 0 {
				tk.NotBefore = at()
			}
			open[tk.ID] = tk
			q.add(tk)
		case op == 2:
			for id := range open {
				q.move(id, at())
				break
			}
		default:
			for id := range open {
				q.remove(id)
				delete(open, id)
				break
			}
		}
		now := at()
		odd := rng.IntN(2) == 0 // a filter that refuses half the tasks
		pass := func(tk *store.Task) bool { return !odd || tk.ID[len(tk.ID)-1]%2 == 1 }
		var want *store.Task
		for _, e := range q.h { // the reference: a sort of every open task
			if !e.ready.After(now) && pass(e.t) && (want == nil || before(e, q.pos[want.ID])) {
				want = e.t
			}
		}
		visited := 0
		got := q.first(now, func(tk *store.Task) bool {
			visited++
			if q.pos[tk.ID].ready.After(now) {
				t.Fatalf("step %d: visited %s, ready after now", i, tk.ID)
			}
			return pass(tk)
		})
		if got != want {
			t.Fatalf("step %d: first(%s) = %v, want %v", i, now, got, want)
		}
		if q.len() != len(open) || len(q.pos) != len(open) {
			t.Fatalf("step %d: %d queued, %d indexed, want %d", i, q.len(), len(q.pos), len(open))
		}
	}
	ids := make([]string, 0, len(q.h))
	for _, e := range q.h {
		ids = append(ids, e.t.ID)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(open) {
		t.Fatal("a task is queued twice")
	}
}
