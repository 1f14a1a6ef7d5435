package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// timers keeps the pending timers under the store's mu: by id, by run,
// and in two heaps, one ordered by the time a timer becomes claimable
// (its due time, or the end of its lease: ClaimDueTimers and NextTimerDue
// pop and peek it, at the cost of the due ones) and one by due time (a
// list of the runs due before a time walks only the timers due before it).
type timers struct {
	byID  map[string]*timerRec
	byRun map[string][]*timerRec
	ready timerHeap
	due   timerHeap
}

// timerRec is one pending timer and its places in the heaps.
type timerRec struct {
	t     store.Timer
	ready time.Time // DueAt, or LeaseUntil while leased (the later)
	at    [2]int    // index in ready (0) and due (1)
}

func newTimers() timers {
	return timers{byID: map[string]*timerRec{}, byRun: map[string][]*timerRec{},
		ready: timerHeap{which: 0}, due: timerHeap{which: 1}}
}

// timerHeap is a binary min-heap of timer records by (key, id), each
// record knowing its index (at[which]) so that it can be removed or moved
// in O(log n). The keys are kept in the entries, so comparisons read the
// heap's own array, not the records (ids are read only on ties).
type timerHeap struct {
	which int // 0: by ready time, 1: by due time
	a     []heapEnt
}

type heapEnt struct {
	sec  int64
	nsec int32
	r    *timerRec
}

func (h *timerHeap) key(r *timerRec) time.Time {
	if h.which == 0 {
		return r.ready
	}
	return r.t.DueAt
}

func (h *timerHeap) ent(r *timerRec) heapEnt {
	k := h.key(r)
	return heapEnt{sec: k.Unix(), nsec: int32(k.Nanosecond()), r: r}
}

func (h *timerHeap) less(i, j int) bool {
	a, b := &h.a[i], &h.a[j]
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.nsec != b.nsec {
		return a.nsec < b.nsec
	}
	return a.r.t.ID < b.r.t.ID
}

func (h *timerHeap) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.a[i].r.at[h.which], h.a[j].r.at[h.which] = i, j
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(h.a) && h.less(l, m) {
			m = l
		}
		if r := l + 1; r < len(h.a) && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *timerHeap) push(r *timerRec) {
	r.at[h.which] = len(h.a)
	h.a = append(h.a, h.ent(r))
	h.up(len(h.a) - 1)
}

func (h *timerHeap) remove(r *timerRec) {
	i, n := r.at[h.which], len(h.a)-1
	if i != n {
		h.swap(i, n)
	}
	h.a[n] = heapEnt{}
	h.a = h.a[:n]
	if i != n {
		h.down(i)
		h.up(i)
	}
}

// fix restores the order after r's key changed.
func (h *timerHeap) fix(r *timerRec) {
	h.a[r.at[h.which]] = h.ent(r)
	h.down(r.at[h.which])
	h.up(r.at[h.which])
}

// before calls fn for every record whose key is before t, in no order,
// visiting only those and their children (a heap's children are never
// before their parent).
func (h *timerHeap) before(t time.Time, fn func(*timerRec)) {
	var walk func(i int)
	walk = func(i int) {
		if i >= len(h.a) || !h.key(h.a[i].r).Before(t) {
			return
		}
		fn(h.a[i].r)
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
}

// replace makes ts the pending timers of run.
func (tm *timers) replace(run string, ts []store.Timer) {
	tm.dropRun(run)
	for _, t := range ts {
		if old, ok := tm.byID[t.ID]; ok { // never, as ids carry the version
			tm.drop(old)
		}
		r := &timerRec{t: t, ready: t.DueAt}
		tm.byID[t.ID] = r
		tm.byRun[run] = append(tm.byRun[run], r)
		tm.ready.push(r)
		tm.due.push(r)
	}
}

// dropRun removes run's timers.
func (tm *timers) dropRun(run string) {
	for _, r := range tm.byRun[run] {
		delete(tm.byID, r.t.ID)
		tm.ready.remove(r)
		tm.due.remove(r)
	}
	delete(tm.byRun, run)
}

// drop removes one timer.
func (tm *timers) drop(r *timerRec) {
	delete(tm.byID, r.t.ID)
	tm.ready.remove(r)
	tm.due.remove(r)
	rs := slices.DeleteFunc(tm.byRun[r.t.RunID], func(o *timerRec) bool { return o == r })
	if len(rs) == 0 {
		delete(tm.byRun, r.t.RunID)
	} else {
		tm.byRun[r.t.RunID] = rs
	}
}

// doneTimers removes the named timers that are pending.
func (tm *timers) done(ids []string) {
	for _, id := range ids {
		if r, ok := tm.byID[id]; ok {
			tm.drop(r)
		}
	}
}

// applyTimers applies c's timer changes (after PrepareTimers), under mu.
func (s *Store) applyTimers(c *store.Commit, create bool) {
	s.tm.done(c.DoneTimers)
	if c.ReplaceTimers || create {
		s.tm.replace(c.Run.ID, c.Timers)
	}
}

// ClaimDueTimers implements store.TimerStore: it pops the ready heap.
func (s *Store) ClaimDueTimers(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]store.Timer, error) {
	if err := checkClaim(now, limit, leaseUntil); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Timer{}
	for len(out) < limit && len(s.tm.ready.a) > 0 {
		r := s.tm.ready.a[0].r
		if r.ready.After(now) {
			break
		}
		r.t.Owner, r.t.LeaseUntil, r.ready = owner, leaseUntil, leaseUntil
		s.tm.ready.fix(r)
		out = append(out, r.t)
	}
	store.SortTimers(out)
	return out, nil
}

func checkClaim(now time.Time, limit int, leaseUntil time.Time) error {
	if limit <= 0 {
		return fmt.Errorf("memstore: claim timers: limit %d, want > 0", limit)
	}
	if !leaseUntil.After(now) {
		return fmt.Errorf("memstore: claim timers: the lease ends (%s) at or before now (%s)", leaseUntil.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	return nil
}

// NextTimerDue implements store.TimerStore: the top of the ready heap.
func (s *Store) NextTimerDue(ctx context.Context) (time.Time, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.tm.ready.a) == 0 {
		return time.Time{}, false, nil
	}
	return s.tm.ready.a[0].r.ready, true, nil
}

// ReleaseTimer implements store.TimerStore.
func (s *Store) ReleaseTimer(ctx context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.tm.byID[id]
	if !ok {
		return fmt.Errorf("memstore: timer %s: %w", id, store.ErrNotFound)
	}
	if r.t.Owner == "" || r.t.Owner != owner {
		return fmt.Errorf("memstore: timer %s is not held by %s: %w", id, owner, store.ErrConflict)
	}
	r.t.Owner, r.t.LeaseUntil, r.ready = "", time.Time{}, r.t.DueAt
	s.tm.ready.fix(r)
	return nil
}

// CompleteTimer implements store.TimerStore.
func (s *Store) CompleteTimer(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tm.done([]string{id})
	return nil
}

// RunTimers implements store.TimerStore.
func (s *Store) RunTimers(ctx context.Context, runID string) ([]store.Timer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.Timer{}
	for _, r := range s.tm.byRun[runID] {
		out = append(out, r.t)
	}
	store.SortTimers(out)
	return out, nil
}

// listDue is ListRuns for a filter with DueBefore: the runs of the timers
// due before it (a walk of those only, in the due heap), filtered, sorted
// and paged. Under mu (read).
func (s *Store) listDue(f store.RunFilter) []store.Run {
	seen := map[string]bool{}
	var runs []store.Run
	s.tm.due.before(f.DueBefore, func(r *timerRec) {
		if seen[r.t.RunID] {
			return
		}
		seen[r.t.RunID] = true
		slot, ok := s.lookup(r.t.RunID)
		if !ok {
			return
		}
		run := s.current(slot, r.t.RunID)
		if f.Matches(run) && (f.Before.IsZero() || store.NewerFirst(f.Before, store.CursorOf(run))) {
			runs = append(runs, run)
		}
	})
	slices.SortFunc(runs, func(a, b store.Run) int {
		if store.NewerFirst(store.CursorOf(a), store.CursorOf(b)) {
			return -1
		}
		return 1
	})
	if f.Limit > 0 && len(runs) > f.Limit {
		runs = runs[:f.Limit]
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return runs
}
