package memstore

import (
	"container/heap"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// taskQueue holds the open tasks (pending or running) in the claim order
// of store.TaskStore.ClaimTask: by when each became claimable (ready:
// store.TaskReadyAt while pending, zero once released, the lease's end
// while running), ties by id. It is a min-heap whose entries know their
// index, so a task is moved or removed in O(log n), and a claim walks it
// in order from the root visiting only the tasks ready by then: however
// many tasks wait out a backoff or a live lease, a claim does not read
// them (a list in creation order read every one of them first).
type taskQueue struct {
	h   queueHeap
	pos map[string]*queued // by task id
}

type queued struct {
	t     *store.Task
	ready time.Time
	i     int // index in h
}

type queueHeap []*queued

func (h queueHeap) Len() int { return len(h) }
func (h queueHeap) Less(i, j int) bool {
	return before(h[i], h[j])
}
func (h queueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *queueHeap) Push(x any) {
	q := x.(*queued)
	q.i = len(*h)
	*h = append(*h, q)
}
func (h *queueHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return q
}

// before orders two entries: by ready, then by task id.
func before(a, b *queued) bool {
	if !a.ready.Equal(b.ready) {
		return a.ready.Before(b.ready)
	}
	return a.t.ID < b.t.ID
}

// len is the number of open tasks.
func (q *taskQueue) len() int { return len(q.h) }

// add puts t, newly enqueued and pending, into the queue.
func (q *taskQueue) add(t *store.Task) {
	if q.pos == nil {
		q.pos = map[string]*queued{}
	}
	e := &queued{t: t, ready: store.TaskReadyAt(t)}
	q.pos[t.ID] = e
	heap.Push(&q.h, e)
}

// remove takes task id out of the queue (it is done or deleted), if there.
func (q *taskQueue) remove(id string) {
	if e, ok := q.pos[id]; ok {
		heap.Remove(&q.h, e.i)
		delete(q.pos, id)
	}
}

// move gives task id a new place in the order: ready.
func (q *taskQueue) move(id string, ready time.Time) {
	if e, ok := q.pos[id]; ok {
		e.ready = ready
		heap.Fix(&q.h, e.i)
	}
}

// first returns the first task in the claim order, ready at or before
// now, for which ok reports true; nil if none. It walks the heap in order
// from the root (a frontier of the entries whose parents it visited), so
// it visits the tasks ready by now that come before the one it returns,
// and their children, no other.
func (q *taskQueue) first(now time.Time, ok func(*store.Task) bool) *store.Task {
	if len(q.h) == 0 {
		return nil
	}
	f := frontier{h: q.h, at: []int{0}}
	for len(f.at) > 0 {
		i := heap.Pop(&f).(int)
		e := q.h[i]
		if e.ready.After(now) {
			continue // its subtree is ready later still
		}
		if ok(e.t) {
			return e.t
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(q.h) {
				heap.Push(&f, c)
			}
		}
	}
	return nil
}

// frontier is a min-heap of indices into h, by h's order.
type frontier struct {
	h  queueHeap
	at []int
}

func (f frontier) Len() int           { return len(f.at) }
func (f frontier) Less(i, j int) bool { return before(f.h[f.at[i]], f.h[f.at[j]]) }
func (f frontier) Swap(i, j int)      { f.at[i], f.at[j] = f.at[j], f.at[i] }
func (f *frontier) Push(x any)        { f.at = append(f.at, x.(int)) }
func (f *frontier) Pop() any {
	n := len(f.at) - 1
	x := f.at[n]
	f.at = f.at[:n]
	return x
}
