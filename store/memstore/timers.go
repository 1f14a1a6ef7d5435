package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// timers keeps the pending timers under the store's mu, in structures the
// garbage collector does not trace per timer (as the runs): records
// (timerRec, pointer-free) in a slab; each run's timers in a list from its
// own record (runRec.timers, then timerRec.next), so that a commit finds
// its run's timers without a lookup in a store-wide map, and one whose run
// has none does no timer work; and two heaps of small values, one ordered
// by the time a timer becomes claimable (its due time, or the end of its
// lease: ClaimDueTimers and NextTimerDue pop and peek it, at the cost of
// the due ones) and one by due time (a list of the runs due before a time
// walks only the timers due before it). A timer's names (workflow, state,
// action, owner) are ids in the store's table of interned strings; its run
// id is its run's; its data is kept only when it is not {} (data).
type timers struct {
	recs  slab[timerRec]
	ready timerHeap
	due   timerHeap
	data  map[int32]json.RawMessage // slot -> data, when not {}
	n     int                       // pending timers
}

// timerRec is one pending timer and its places in the heaps.
type timerRec struct {
	run                      int32 // the run's slot
	next                     int32 // the run's next timer, slot+1 (0: none)
	wf, state, action, owner int32 // names
	version                  int64
	dueSec, readySec         int64 // ready: DueAt, or LeaseUntil while leased
	leaseSec                 int64
	dueNsec, readyNsec       int32
	leaseNsec                int32
	at                       [2]int32 // index in ready (0) and due (1)
}

func newTimers() timers {
	return timers{recs: newSlab[timerRec](12), ready: timerHeap{which: 0}, due: timerHeap{which: 1}, data: map[int32]json.RawMessage{}}
}

// heapArity is the number of children of a node of a timerHeap: a 4-ary
// heap of a million timers is 10 levels high, not 20, so a timer whose
// due time moves (a transition re-arming a timer that falls due soon,
// among a million far ones) walks half as many levels, each reading
// children that share a cache line.
const heapArity = 4

// timerHeap is a 4-ary min-heap (heapArity) of timers by (key, id), each record
// knowing its index (at[which]) so that it can be removed or moved in
// O(log n). The keys are kept in the entries, so comparisons read the
// heap's own array, not the records (ids are built only on ties).
type timerHeap struct {
	which int // 0: by ready time, 1: by due time
	a     []heapEnt
}

type heapEnt struct {
	sec  int64
	nsec int32
	t    int32 // the timer's slot
}

// Store methods below run under mu.

func (s *Store) trec(t int32) *timerRec { return s.tm.recs.at(t) }

func (s *Store) key(h *timerHeap, t int32) (int64, int32) {
	r := s.trec(t)
	if h.which == 0 {
		return r.readySec, r.readyNsec
	}
	return r.dueSec, r.dueNsec
}

func (s *Store) less(h *timerHeap, i, j int) bool {
	a, b := &h.a[i], &h.a[j]
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.nsec != b.nsec {
		return a.nsec < b.nsec
	}
	return s.idLess(a.t, b.t)
}

// idLess reports whether the id of timer a sorts before that of timer b,
// building both in buffers on the stack: ties on due time are common
// (timers due at the same whole second, runs entering a state with the
// same delay at once), and a tie must not cost two allocations.
func (s *Store) idLess(a, b int32) bool {
	var ab, bb [128]byte
	return string(s.appendTimerID(ab[:0], a)) < string(s.appendTimerID(bb[:0], b))
}

// appendTimerID appends the id of the timer in slot t to b (see
// store.TimerID).
func (s *Store) appendTimerID(b []byte, t int32) []byte {
	r := s.trec(t)
	b = append(b, s.idOf(r.run)...)
	b = append(b, '/')
	b = strconv.AppendInt(b, r.version, 10)
	b = append(b, '/')
	return append(b, s.names.strs[r.action]...)
}

func (s *Store) swap(h *timerHeap, i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	s.trec(h.a[i].t).at[h.which], s.trec(h.a[j].t).at[h.which] = int32(i), int32(j)
}

func (s *Store) up(h *timerHeap, i int) {
	for i > 0 {
		p := (i - 1) / heapArity
		if !s.less(h, i, p) {
			return
		}
		s.swap(h, i, p)
		i = p
	}
}

func (s *Store) down(h *timerHeap, i int) {
	for {
		m := i
		for c, end := heapArity*i+1, min(heapArity*i+1+heapArity, len(h.a)); c < end; c++ {
			if s.less(h, c, m) {
				m = c
			}
		}
		if m == i {
			return
		}
		s.swap(h, i, m)
		i = m
	}
}

func (s *Store) push(h *timerHeap, t int32) {
	s.trec(t).at[h.which] = int32(len(h.a))
	sec, nsec := s.key(h, t)
	h.a = append(h.a, heapEnt{sec: sec, nsec: nsec, t: t})
	s.up(h, len(h.a)-1)
}

func (s *Store) remove(h *timerHeap, t int32) {
	i, n := int(s.trec(t).at[h.which]), len(h.a)-1
	if i != n {
		s.swap(h, i, n)
	}
	h.a = h.a[:n]
	if i != n {
		s.down(h, i)
		s.up(h, i)
	}
}

// fix restores the order after t's key changed.
func (s *Store) fix(h *timerHeap, t int32) {
	i := int(s.trec(t).at[h.which])
	h.a[i].sec, h.a[i].nsec = s.key(h, t)
	s.down(h, i)
	s.up(h, int(s.trec(t).at[h.which]))
}

// before calls fn for every timer whose key is before t, in no order,
// visiting only those and their children (a heap's children are never
// before their parent).
func (s *Store) before(h *timerHeap, t time.Time, fn func(int32)) {
	sec, nsec := timeKey(t)
	var walk func(i int)
	walk = func(i int) {
		if i >= len(h.a) {
			return
		}
		e := h.a[i]
		if e.sec > sec || e.sec == sec && e.nsec >= nsec {
			return
		}
		fn(e.t)
		for c := heapArity*i + 1; c <= heapArity*i+heapArity; c++ {
			walk(c)
		}
	}
	walk(0)
}

// timer returns the timer in slot t.
func (s *Store) timer(t int32) store.Timer {
	r := s.trec(t)
	out := store.Timer{RunID: string(s.idOf(r.run)), WorkflowID: s.names.strs[r.wf], State: s.names.strs[r.state],
		Version: r.version, Action: s.names.strs[r.action], DueAt: time.Unix(r.dueSec, int64(r.dueNsec)).UTC(),
		Data: json.RawMessage(`{}`), Owner: s.names.strs[r.owner]}
	out.ID = store.TimerID(out.RunID, out.Version, out.Action)
	if d, ok := s.tm.data[t]; ok {
		out.Data = d
	}
	if r.owner != 0 {
		out.LeaseUntil = time.Unix(r.leaseSec, int64(r.leaseNsec)).UTC()
	}
	return out
}

// timerID returns the id of the timer in slot t.
func (s *Store) timerID(t int32) string {
	r := s.trec(t)
	return store.TimerID(string(s.idOf(r.run)), r.version, s.names.strs[r.action])
}

// isTimer reports whether the timer in slot t, of a run whose id is the
// first n bytes of id, has that id, without building it.
func (s *Store) isTimer(t int32, id string, n int) bool {
	r := s.trec(t)
	var b [24]byte
	v := strconv.AppendInt(b[:0], r.version, 10)
	rest := id[n:]
	return len(rest) > len(v)+1 && rest[0] == '/' && rest[1:1+len(v)] == string(v) &&
		rest[1+len(v):] == "/"+s.names.strs[r.action]
}

// findTimer returns the slot of the pending timer id (see store.TimerID:
// its run's id, "/", a version and "/" an action; a run id may hold "/",
// so each prefix before one is tried).
func (s *Store) findTimer(id string) (int32, bool) {
	for i := strings.IndexByte(id, '/'); i >= 0; {
		if slot, ok := s.lookup(id[:i]); ok {
			for t := s.rec(slot).timers - 1; t >= 0; t = s.trec(t).next - 1 {
				if s.isTimer(t, id, i) {
					return t, true
				}
			}
		}
		j := strings.IndexByte(id[i+1:], '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return 0, false
}

// replaceTimers makes ts the pending timers of the run in slot. The run's
// old timers' records are reused for the new ones, in place: each moves
// in the heaps from its old key to its new, which for a run going from a
// state with a timer to another is a short way (removing a timer and
// adding another walks the height of each heap twice, through records
// the cache has not seen when many timers are pending).
func (s *Store) replaceTimers(slot int32, ts []store.Timer) {
	e := s.rec(slot)
	p := &e.timers
	for i := range ts {
		tt := &ts[i]
		ds, dn := timeKey(tt.DueAt)
		rec := timerRec{run: slot, wf: s.names.id(tt.WorkflowID), state: s.names.id(tt.State),
			action: s.names.id(tt.Action), version: tt.Version, dueSec: ds, dueNsec: dn, readySec: ds, readyNsec: dn}
		var t int32
		if *p != 0 { // reuse the old timer's record
			t = *p - 1
			r := s.trec(t)
			rec.next, rec.at = r.next, r.at
			*r = rec
			delete(s.tm.data, t)
			s.fix(&s.tm.ready, t)
			s.fix(&s.tm.due, t)
		} else {
			t = s.tm.recs.alloc()
			*s.trec(t) = rec
			*p = t + 1
			s.push(&s.tm.ready, t)
			s.push(&s.tm.due, t)
			s.tm.n++
		}
		if len(tt.Data) > 0 && string(tt.Data) != "{}" {
			s.tm.data[t] = tt.Data
		}
		p = &s.trec(t).next
	}
	for t := *p - 1; t >= 0; { // the old timers left over
		next := s.trec(t).next - 1
		s.freeTimer(t)
		t = next
	}
	*p = 0
}

// dropTimers removes the timers of the run in slot.
func (s *Store) dropTimers(slot int32) {
	e := s.rec(slot)
	for t := e.timers - 1; t >= 0; {
		next := s.trec(t).next - 1
		s.freeTimer(t)
		t = next
	}
	e.timers = 0
}

// freeTimer removes timer t from the heaps and frees its slot (not from
// its run's list).
func (s *Store) freeTimer(t int32) {
	s.remove(&s.tm.ready, t)
	s.remove(&s.tm.due, t)
	delete(s.tm.data, t)
	s.tm.recs.release(t)
	s.tm.n--
}

// dropTimer removes timer t.
func (s *Store) dropTimer(t int32) {
	e := s.rec(s.trec(t).run)
	for p := &e.timers; *p != 0; p = &s.trec(*p - 1).next {
		if *p-1 == t {
			*p = s.trec(t).next
			break
		}
	}
	s.freeTimer(t)
}

// applyTimers applies c's timer changes (after PrepareTimers) to the run
// in slot: nothing when the commit completes none and does not replace
// them.
func (s *Store) applyTimers(slot int32, c *store.Commit, create bool) {
	if s.rec(slot).timers != 0 {
		for _, id := range c.DoneTimers {
			if t, ok := s.findTimer(id); ok {
				s.dropTimer(t)
			}
		}
	}
	if c.ReplaceTimers || create {
		s.replaceTimers(slot, c.Timers)
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
	nsec, nnsec := timeKey(now)
	lsec, lnsec := timeKey(leaseUntil)
	o := s.names.id(owner)
	for len(out) < limit && len(s.tm.ready.a) > 0 {
		top := s.tm.ready.a[0]
		if top.sec > nsec || top.sec == nsec && top.nsec > nnsec {
			break
		}
		r := s.trec(top.t)
		r.owner, r.leaseSec, r.leaseNsec, r.readySec, r.readyNsec = o, lsec, lnsec, lsec, lnsec
		s.fix(&s.tm.ready, top.t)
		out = append(out, s.timer(top.t))
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
	top := s.tm.ready.a[0]
	return time.Unix(top.sec, int64(top.nsec)).UTC(), true, nil
}

// ReleaseTimer implements store.TimerStore.
func (s *Store) ReleaseTimer(ctx context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.findTimer(id)
	if !ok {
		return fmt.Errorf("memstore: timer %s: %w", id, store.ErrNotFound)
	}
	r := s.trec(t)
	if o, ok := s.names.find(owner); r.owner == 0 || !ok || r.owner != o {
		return fmt.Errorf("memstore: timer %s is not held by %s: %w", id, owner, store.ErrConflict)
	}
	r.owner, r.leaseSec, r.leaseNsec, r.readySec, r.readyNsec = 0, 0, 0, r.dueSec, r.dueNsec
	s.fix(&s.tm.ready, t)
	return nil
}

// CompleteTimer implements store.TimerStore.
func (s *Store) CompleteTimer(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.findTimer(id); ok {
		s.dropTimer(t)
	}
	return nil
}

// RunTimers implements store.TimerStore.
func (s *Store) RunTimers(ctx context.Context, runID string) ([]store.Timer, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []store.Timer{}
	if slot, ok := s.lookup(runID); ok {
		for t := s.rec(slot).timers - 1; t >= 0; t = s.trec(t).next - 1 {
			out = append(out, s.timer(t))
		}
	}
	store.SortTimers(out)
	return out, nil
}

// listDue is ListRuns for a filter with DueBefore: the runs of the timers
// due before it (a walk of those only, in the due heap), filtered, sorted
// and paged. Under mu (read).
func (s *Store) listDue(f store.RunFilter) []store.Run {
	seen := map[int32]bool{}
	var runs []store.Run
	s.before(&s.tm.due, f.DueBefore, func(t int32) {
		slot := s.trec(t).run
		if seen[slot] {
			return
		}
		seen[slot] = true
		run := s.currentAt(slot)
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
