// Package memstore is the in-memory Store: fast, for tests and for
// `asmp serve --db :memory:`. Nothing survives the process.
package memstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Store keeps everything in memory behind one lock per concern. Runs are
// kept in structures the garbage collector does not trace per run (see
// runRec and arena); the rest in maps. The zero value is not usable; call
// New.
type Store struct {
	mu       sync.RWMutex
	recs     slab[runRec]
	byHash   map[uint64]int32 // hash of a run id -> slot
	overflow map[string]int32 // run id -> slot, for ids whose hash was taken
	seed     maphash.Seed
	hashFn   func(string) uint64 // replaces the hash in tests
	ar       arena
	idx      runIndex
	groupN   map[uint64]int32 // entries per index group
	scratch  []byte           // an encoding buffer, under mu
	tasks    map[string]*store.Task
	runTasks map[string][]string // run id -> its tasks' ids (DeleteRun)
	queue    taskQueue           // the open tasks (pending or running), in claim order
	tm       timers              // pending timers
	sched    schedules
	wh       webhooks // subscriptions and the outbox
	ledger   []store.LedgerRecord
	byInv    map[string]int64   // inv_ID -> seq
	byKey    map[string][]int64 // key -> seqs, oldest first
	replay   map[string][]string
	lmu      sync.Mutex         // serialises ledger appends
	counts   map[countKey]int64 // runs by workflow and stored status, kept by every change
	names    names              // workflow ids, versions, states and statuses of runs
	defs     definitions
	scopes   map[string][]string      // inv_ID -> the dispatcher's scopes, under mu
	cks      []store.LedgerCheckpoint // by tree size, ascending
	vsize    int64                    // LedgerVerified
}

type countKey struct{ workflow, status int32 }

// count moves one run of workflow wf from status from to status to (-1
// for none), under mu.
func (s *Store) count(wf, from, to int32) {
	if from == to {
		return
	}
	if from >= 0 {
		if s.counts[countKey{wf, from}]--; s.counts[countKey{wf, from}] == 0 {
			delete(s.counts, countKey{wf, from})
		}
	}
	if to >= 0 {
		s.counts[countKey{wf, to}]++
	}
}

// appendRun encodes r's current value without what the record knows
// (workflow, version): its status first, then state, error, version,
// times, milestones and data — the data as a flag 2 ("the latest
// event's, which is whole") when shared is set.
func appendRun(b []byte, r *store.Run, shared bool) []byte {
	for _, s := range [...]string{r.Status, r.State, r.Error} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, r.Version)
	for _, t := range [...]time.Time{r.CreatedAt, r.UpdatedAt} {
		ev := newEvent(store.Event{Time: t}, true)
		b = appendTime(b, ev.unix, ev.full)
	}
	b = appendStrings(b, r.Milestones)
	switch {
	case shared:
		return append(b, 2)
	case r.Data == nil:
		return append(b, 0)
	}
	b = append(b, 1)
	return appendBytes(b, r.Data)
}

// event is a store.Event without what its run's entry already knows: the
// run id (the entry's key) and the seq (its index + 1: seqs are 1, 2, 3, …).
// Its time is kept as Unix nanoseconds when that gives back exactly the
// same time.Time (UTC, no monotonic reading: what the engine stores), else
// in full.
type event struct {
	unix   int64
	full   *time.Time // the time when unix cannot reproduce it exactly
	kind   string
	action string
	from   string
	to     string
	actor  string
	wfv    string
	reason string
	// snap is the run after the event; in an event decoded from the log
	// that is not whole, snap has no data nor milestones.
	snap    store.Snapshot
	offered []string
	whole   bool   // kept whole (see store.Event); the latest event keeps its full snap either way
	patch   []byte // the data's merge patch, for a delta
	added   []string
}

func newEvent(ev store.Event, whole bool) event {
	e := event{kind: ev.Kind, action: ev.Action, from: ev.From, to: ev.To, actor: ev.Actor, wfv: ev.WorkflowVersion, reason: ev.Reason,
		snap: ev.Snapshot, offered: ev.Offered, whole: whole}
	if !whole {
		e.patch, e.added = ev.Patch, ev.Added
	}
	if n := ev.Time.UnixNano(); time.Unix(0, n).UTC() == ev.Time {
		e.unix = n
	} else {
		t := ev.Time
		e.full = &t
	}
	return e
}

func (e *event) time() time.Time {
	if e.full != nil {
		return *e.full
	}
	return time.Unix(0, e.unix).UTC()
}

// public returns the event in its stored form (see store.EventFold): a
// delta without data and milestones.
func (e *event) public(runID string, seq int64) store.Event {
	ev := store.Event{RunID: runID, Seq: seq, Time: e.time(), Kind: e.kind, Action: e.action, From: e.from, To: e.to, Actor: e.actor,
		WorkflowVersion: e.wfv, Reason: e.reason, Offered: e.offered, Snapshot: e.snap}
	if !e.whole {
		ev.Patch, ev.Added = e.patch, e.added
		ev.Data, ev.Milestones = nil, nil
	}
	return ev
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	s := &Store{
		recs:     newSlab[runRec](9),
		byHash:   map[uint64]int32{},
		seed:     maphash.MakeSeed(),
		ar:       newArena(),
		groupN:   map[uint64]int32{},
		tasks:    map[string]*store.Task{},
		runTasks: map[string][]string{},
		byInv:    map[string]int64{},
		byKey:    map[string][]int64{},
		replay:   map[string][]string{},
		scopes:   map[string][]string{},
		counts:   map[countKey]int64{},
		names:    newNames(),
		tm:       newTimers(),
		wh:       newWebhooks(),
	}
	s.idx = newRunIndex(s.idOf)
	return s
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, c store.Commit) error {
	if err := check(&c); err != nil {
		return err
	}
	if c.Run.Version != 1 {
		return fmt.Errorf("memstore: a new run must have version 1, not %d", c.Run.Version)
	}
	if err := store.PrepareTimers(&c, true); err != nil {
		return err
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lookup(c.Run.ID); ok {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, store.ErrExists)
	}
	if err := s.checkOutbox(&c); err != nil {
		return err
	}
	s.newRun(&c)
	slot, _ := s.lookup(c.Run.ID)
	e := s.rec(slot)
	s.count(e.wf, -1, e.status)
	s.applyTasks(c)
	s.applyTimers(slot, &c, true)
	s.applyOutbox(&c)
	s.compact(len(c.Run.Data) + len(c.Event.Data))
	return nil
}

func check(c *store.Commit) error {
	if c.Event.Data == nil {
		c.Event.Data = json.RawMessage(`{}`) // as the other stores keep it
	}
	if c.Event.Seq != c.Run.Version || c.Event.RunID != c.Run.ID {
		return fmt.Errorf("memstore: event (%s, %d) does not match run (%s, %d)", c.Event.RunID, c.Event.Seq, c.Run.ID, c.Run.Version)
	}
	return nil
}

func (s *Store) applyTasks(c store.Commit) {
	if c.Complete != "" {
		if t, ok := s.tasks[c.Complete]; ok && t.Status != store.TaskDone {
			t.Status = store.TaskDone
			t.Owner = ""
			t.UpdatedAt = c.Event.Time
			s.queue.remove(t.ID)
		}
	}
	if c.Enqueue != nil {
		t := *c.Enqueue
		t.Status = store.TaskPending
		s.tasks[t.ID] = &t
		s.runTasks[t.RunID] = append(s.runTasks[t.RunID], t.ID)
		s.queue.add(&t)
	}
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	slot, ok := s.lookup(id)
	if !ok {
		return store.Run{}, fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	return s.current(slot, id), nil
}

// CommitRun implements store.RunStore. The commit is applied before
// CommitRun returns: the Pending is settled.
func (s *Store) CommitRun(ctx context.Context, expected int64, c store.Commit) store.Pending {
	return store.Settled(s.commitRun(expected, c))
}

func (s *Store) commitRun(expected int64, c store.Commit) error {
	if err := check(&c); err != nil {
		return err
	}
	if c.Run.Version != expected+1 {
		return fmt.Errorf("memstore: new version %d is not expected+1 (%d)", c.Run.Version, expected+1)
	}
	if err := store.PrepareTimers(&c, false); err != nil {
		return err
	}
	if err := store.PrepareOutbox(&c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.lookup(c.Run.ID)
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, store.ErrNotFound)
	}
	e := s.rec(slot)
	if v := e.version; v != expected {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", c.Run.ID, v, expected, store.ErrConflict)
	}
	if err := s.checkOutbox(&c); err != nil {
		return err
	}
	was := e.status
	if err := s.appendEvent(slot, newEvent(c.Event, store.WholeDue(&c.Event, e.patchBytes))); err != nil {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, err)
	}
	old := s.keys(slot)
	s.setCurrent(slot, &c.Run)
	s.reindex(slot, old)
	s.count(e.wf, was, e.status)
	s.applyTasks(c)
	s.applyTimers(slot, &c, false)
	s.applyOutbox(&c)
	s.compact(len(c.Run.Data) + len(c.Event.Data) + len(c.Event.Patch))
	return nil
}

// Events implements store.RunStore.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	slot, ok := s.lookup(runID)
	if !ok {
		return nil, fmt.Errorf("memstore: run %s: %w", runID, store.ErrNotFound)
	}
	e := s.rec(slot)
	if after < 0 {
		after = 0
	}
	n := int64(e.n)
	if after >= n {
		return []store.Event{}, nil
	}
	fold := store.NewEventFold(after, limit)
	for i := s.wholeBefore(e, int(after)); i < int(n); i++ { // seq k is at index k-1
		ev, err := s.eventAt(e, i)
		if err != nil {
			return nil, fmt.Errorf("memstore: run %s event %d: %w", runID, i+1, err)
		}
		more, err := fold.Add(ev.public(runID, int64(i)+1))
		if err != nil {
			return nil, fmt.Errorf("memstore: %w", err)
		}
		if !more {
			break
		}
	}
	return fold.Events(), nil
}

// StaleRuns implements store.RunStore: a walk of the index's group of
// all runs, oldest first, from the cursor to before.
func (s *Store) StaleRuns(ctx context.Context, before time.Time, after store.RunCursor, limit int) ([]store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []store.Run
	at := s.idx.seek(&probe{ikey: ikey{group: groupAll}, groupOnly: true})
	if !after.IsZero() {
		sec, nsec := timeKey(after.UpdatedAt)
		p := probe{ikey: ikey{group: groupAll, sec: sec, nsec: nsec, slot: -1}, id: []byte(after.ID)}
		at = s.idx.seek(&p)
		if s.idx.valid(at) && s.idx.cmp(s.idx.key(at), &p) == 0 {
			at = s.idx.next(at) // the cursor's run itself
		}
	}
	bsec, bnsec := timeKey(before)
	end := probe{ikey: ikey{group: groupAll, sec: bsec, nsec: bnsec, slot: -1}}
	for ; s.idx.valid(at) && (limit <= 0 || len(out) < limit); at = s.idx.next(at) {
		k := s.idx.key(at)
		if k.group != groupAll || k.sec > end.sec || k.sec == end.sec && k.nsec >= end.nsec {
			break
		}
		out = append(out, s.currentAt(k.slot))
	}
	return out, nil
}

// ListRuns implements store.RunStore: a walk, newest first, of the
// smallest index group the filter selects within, from its cursor,
// checking the rest of the filter on each run's record.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !f.DueBefore.IsZero() {
		return s.listDue(f), nil
	}
	out := []store.Run{}
	want := [3]int32{-1, -1, -1} // workflow, state, status
	for i, name := range [...]*string{&f.WorkflowID, &f.State, f.Override} {
		if name == nil || (i < 2 && *name == "") {
			continue
		}
		id, ok := s.names.find(*name)
		if !ok {
			return out, nil // no run ever had it
		}
		want[i] = id
	}
	g := s.listGroup(want)
	var at pos
	if f.Before.IsZero() {
		at = s.idx.prev(s.idx.seek(&probe{ikey: ikey{group: g + 1}, groupOnly: true}))
	} else {
		sec, nsec := timeKey(f.Before.UpdatedAt)
		at = s.idx.prev(s.idx.seek(&probe{ikey: ikey{group: g, sec: sec, nsec: nsec, slot: -1}, id: []byte(f.Before.ID)}))
	}
	asec, ansec := timeKey(f.ChangedFrom())
	for ; s.idx.valid(at) && (f.Limit <= 0 || len(out) < f.Limit); at = s.idx.prev(at) {
		k := s.idx.key(at)
		if k.group != g {
			break
		}
		if !f.UpdatedAfter.IsZero() && (k.sec < asec || k.sec == asec && k.nsec < ansec) {
			break
		}
		e := s.rec(k.slot)
		if want[0] >= 0 && e.wf != want[0] || want[1] >= 0 && e.state != want[1] || want[2] >= 0 && e.status != want[2] {
			continue
		}
		out = append(out, s.currentAt(k.slot))
	}
	return out, nil
}

// listGroup returns the smallest index group holding every run with
// the wanted workflow, state and status ids (-1: any).
func (s *Store) listGroup(want [3]int32) uint64 {
	wf, state, status := want[0], want[1], want[2]
	best := groupAll
	consider := func(g uint64) {
		if s.groupN[g] < s.groupN[best] {
			best = g
		}
	}
	if wf >= 0 {
		consider(groupOf(groupWorkflow, wf, 0))
	}
	if state >= 0 {
		consider(groupOf(groupState, state, 0))
	}
	if status >= 0 {
		consider(groupOf(groupStatus, status, 0))
	}
	if wf >= 0 && state >= 0 {
		consider(groupOf(groupWorkflowState, wf, state))
	}
	return best
}

// DeleteRun implements store.RunStore.
func (s *Store) DeleteRun(ctx context.Context, id string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.lookup(id)
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	e := s.rec(slot)
	if v := e.version; v != version {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", id, v, version, store.ErrConflict)
	}
	s.count(e.wf, e.status, -1)
	s.dropTimers(slot)
	s.dropRun(slot, id)
	for _, tid := range s.runTasks[id] {
		delete(s.tasks, tid)
		s.queue.remove(tid)
	}
	delete(s.runTasks, id)
	s.compact(0)
	return nil
}

// CountRuns implements store.RunStore: the counts every change keeps.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	s.mu.RLock()
	out := make([]store.RunCount, 0, len(s.counts))
	for k, n := range s.counts {
		out = append(out, store.RunCount{WorkflowID: s.names.strs[k.workflow], Status: s.names.strs[k.status], N: n})
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b store.RunCount) int {
		if a.WorkflowID != b.WorkflowID {
			return strings.Compare(a.WorkflowID, b.WorkflowID)
		}
		return strings.Compare(a.Status, b.Status)
	})
	return out, nil
}

// ClaimTask implements store.TaskStore.
func (s *Store) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (store.Task, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.queue.first(now, func(t *store.Task) bool {
		if t.Status == store.TaskRunning && !now.After(t.LeaseUntil) {
			return false // a lease ending now is not over
		}
		if workflows != nil {
			slot, ok := s.lookup(t.RunID)
			if !ok || !slices.Contains(workflows, s.names.strs[s.rec(slot).wf]) {
				return false
			}
		}
		return true
	})
	if t == nil {
		return store.Task{}, false, nil
	}
	t.Status = store.TaskRunning
	t.Owner = owner
	t.LeaseUntil = now.Add(lease)
	t.Attempts++
	t.UpdatedAt = now
	s.queue.move(t.ID, t.LeaseUntil)
	return *t, true, nil
}

// ExtendTask implements store.TaskStore.
func (s *Store) ExtendTask(ctx context.Context, id, owner string, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("memstore: task %s: %w", id, store.ErrNotFound)
	}
	if t.Status != store.TaskRunning || t.Owner != owner {
		return fmt.Errorf("memstore: task %s is not held by %s: %w", id, owner, store.ErrConflict)
	}
	t.LeaseUntil = until
	s.queue.move(id, until)
	return nil
}

// ReleaseTask implements store.TaskStore.
func (s *Store) ReleaseTask(ctx context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("memstore: task %s: %w", id, store.ErrNotFound)
	}
	if t.Status != store.TaskRunning || t.Owner != owner {
		return fmt.Errorf("memstore: task %s is not held by %s: %w", id, owner, store.ErrConflict)
	}
	t.Status = store.TaskPending
	t.Owner = ""
	t.LeaseUntil = time.Time{}
	s.queue.move(id, time.Time{}) // claimable at once
	return nil
}

// FinishTask implements store.TaskStore.
func (s *Store) FinishTask(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("memstore: task %s: %w", id, store.ErrNotFound)
	}
	if t.Status != store.TaskDone {
		t.Status = store.TaskDone
		t.Owner = ""
		s.queue.remove(id)
	}
	return nil
}

// PendingTasks implements store.TaskStore.
func (s *Store) PendingTasks(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(s.queue.len()), nil
}

// AppendUnsigned appends a record without a checkpoint, as releases
// before signed checkpoints did. It is not part of store.LedgerStore
// (whose only append is AppendLedgerSigned); it builds the ledgers of
// earlier releases in tests of their upgrade.
func (s *Store) AppendUnsigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error)) (store.LedgerRecord, error) {
	rec, _, err := s.appendLedger(key, build, nil)
	return rec, err
}

// AppendLedgerSigned implements store.Store.
func (s *Store) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	if sign == nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, errors.New("memstore: a ledger append needs a signer")
	}
	rec, ck, err := s.appendLedger(key, build, sign)
	if err != nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, err
	}
	return rec, ck, nil
}

func (s *Store) appendLedger(key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.mu.RLock()
	prev := store.LedgerPrev{Seq: int64(len(s.ledger)) + 1}
	if seqs := s.byKey[key]; len(seqs) > 0 {
		r := s.ledger[seqs[len(seqs)-1]-1]
		prev.Latest = &r
	}
	s.mu.RUnlock()
	rec, err := build(prev)
	if err != nil {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, err
	}
	built := rec
	rec.DispatcherScopes = nil // kept beside the record, in s.scopes
	if rec.Seq != prev.Seq || rec.Key != key {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, fmt.Errorf("memstore: built record has seq %d key %q, want %d %q", rec.Seq, rec.Key, prev.Seq, key)
	}
	var ck store.LedgerCheckpoint
	if sign != nil {
		s.mu.RLock()
		var prev *store.LedgerCheckpoint
		after := int64(0)
		if n := len(s.cks); n > 0 {
			p := s.cks[n-1]
			prev, after = &p, p.TreeSize
		}
		added := append(append([]store.LedgerRecord(nil), s.ledger[min(after, int64(len(s.ledger))):]...), rec)
		s.mu.RUnlock()
		if ck, err = sign(prev, added); err != nil {
			return store.LedgerRecord{}, store.LedgerCheckpoint{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byInv[rec.InvID]; dup {
		return store.LedgerRecord{}, store.LedgerCheckpoint{}, fmt.Errorf("memstore: record %s: %w", rec.InvID, store.ErrExists)
	}
	if sign != nil {
		s.cks = append(s.cks, ck)
	}
	if built.DispatcherScopes != nil {
		s.scopes[rec.InvID] = slices.Clone(built.DispatcherScopes)
	}
	s.ledger = append(s.ledger, rec)
	s.byInv[rec.InvID] = rec.Seq
	s.byKey[key] = append(s.byKey[key], rec.Seq)
	if rec.ReplayOf != "" {
		s.replay[rec.ReplayOf] = append(s.replay[rec.ReplayOf], rec.InvID)
	}
	return built, ck, nil
}

// LatestLedgerCheckpoint implements store.Store.
func (s *Store) LatestLedgerCheckpoint(ctx context.Context) (store.LedgerCheckpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.cks) == 0 {
		return store.LedgerCheckpoint{}, fmt.Errorf("memstore: checkpoint: %w", store.ErrNotFound)
	}
	return s.cks[len(s.cks)-1], nil
}

// LedgerCheckpoints implements store.Store.
func (s *Store) LedgerCheckpoints(ctx context.Context, after int64, limit int) ([]store.LedgerCheckpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(len(s.cks), func(i int) bool { return s.cks[i].TreeSize > after })
	end := len(s.cks)
	if limit > 0 && i+limit < end {
		end = i + limit // copy only the page
	}
	return append([]store.LedgerCheckpoint{}, s.cks[i:end]...), nil
}

// PutLedgerCheckpoint implements store.Store.
func (s *Store) PutLedgerCheckpoint(ctx context.Context, ck store.LedgerCheckpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.cks), func(i int) bool { return s.cks[i].TreeSize >= ck.TreeSize })
	if i < len(s.cks) && s.cks[i].TreeSize == ck.TreeSize {
		return fmt.Errorf("memstore: checkpoint of tree size %d: %w", ck.TreeSize, store.ErrExists)
	}
	s.cks = slices.Insert(s.cks, i, ck)
	return nil
}

// LedgerUncanonical implements store.Store.
func (s *Store) LedgerUncanonical(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.ledger {
		if r.Canonical == nil {
			return r.Seq, nil
		}
	}
	return 0, nil
}

// SetLedgerCanonical implements store.Store.
func (s *Store) SetLedgerCanonical(ctx context.Context, canonical map[int64][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq, c := range canonical {
		if seq >= 1 && seq <= int64(len(s.ledger)) && s.ledger[seq-1].Canonical == nil {
			s.ledger[seq-1].Canonical = c
		}
	}
	return nil
}

// LedgerVerified implements store.Store.
func (s *Store) LedgerVerified(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vsize, nil
}

// SetLedgerVerified implements store.Store.
func (s *Store) SetLedgerVerified(ctx context.Context, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vsize = max(s.vsize, size)
	return nil
}

// LedgerRecord implements store.LedgerStore.
func (s *Store) LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seq, ok := s.byInv[invID]
	if !ok {
		return store.LedgerRecord{}, fmt.Errorf("memstore: record %s: %w", invID, store.ErrNotFound)
	}
	return s.ledger[seq-1], nil
}

// LedgerHistory implements store.LedgerStore.
func (s *Store) LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seqs := s.byKey[key]
	if len(seqs) == 0 {
		return nil, fmt.Errorf("memstore: key %s: %w", key, store.ErrNotFound)
	}
	i, _ := slices.BinarySearch(seqs, after+1)
	out := []store.LedgerRecord{}
	size := 0
	for _, q := range seqs[i:] {
		r := s.ledger[q-1]
		out = append(out, r)
		if size += len(r.Body); store.PageFull(size) || (limit > 0 && len(out) >= limit) {
			break
		}
	}
	return out, nil
}

// LedgerHead implements store.LedgerStore.
func (s *Store) LedgerHead(ctx context.Context, key string) (store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seqs := s.byKey[key]
	if len(seqs) == 0 {
		return store.LedgerRecord{}, fmt.Errorf("memstore: key %s: %w", key, store.ErrNotFound)
	}
	return s.ledger[seqs[len(seqs)-1]-1], nil
}

// LedgerRange implements store.LedgerStore.
func (s *Store) LedgerRange(ctx context.Context, from, to int64) ([]store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if from < 1 {
		from = 1
	}
	if to > int64(len(s.ledger))+1 {
		to = int64(len(s.ledger)) + 1
	}
	if from >= to {
		return []store.LedgerRecord{}, nil
	}
	return append([]store.LedgerRecord(nil), s.ledger[from-1:to-1]...), nil
}

// LedgerSize implements store.LedgerStore.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.ledger)), nil
}

// LedgerLatest implements store.LedgerStore.
func (s *Store) LedgerLatest(ctx context.Context, typ, after string, limit int) ([]store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var keys []string
	for k, seqs := range s.byKey {
		if k > after && s.ledger[seqs[len(seqs)-1]-1].Type == typ {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]store.LedgerRecord, 0, len(keys))
	size := 0
	for _, k := range keys {
		seqs := s.byKey[k]
		out = append(out, s.ledger[seqs[len(seqs)-1]-1])
		if size += len(out[len(out)-1].Body); store.PageFull(size) {
			break
		}
	}
	return out, nil
}

// ReplayedBy implements store.LedgerStore.
func (s *Store) ReplayedBy(ctx context.Context, invID string, limit int) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	by := s.replay[invID]
	if limit > 0 && len(by) > limit {
		by = by[:limit]
	}
	return append([]string{}, by...), nil
}

// Close implements store.Store.
func (s *Store) Close() error { return nil }

// Capabilities implements store.Store: the zero value, a store in memory
// private to its process.
func (s *Store) Capabilities() store.Capabilities { return store.Capabilities{} }
