// Package memstore is the in-memory Store: fast, for tests and for
// `asmp serve --db :memory:`. Nothing survives the process.
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Store keeps everything in maps behind one lock per concern. The zero value
// is not usable; call New.
type Store struct {
	mu     sync.RWMutex
	runs   map[string]*runEntry
	tasks  map[string]*store.Task
	queue  []string // task ids in creation order (pending or running)
	ledger []store.LedgerRecord
	byInv  map[string]int64   // inv_ID -> seq
	byKey  map[string][]int64 // key -> seqs, oldest first
	replay map[string][]string
	lmu    sync.Mutex               // serialises ledger appends
	cks    []store.LedgerCheckpoint // by tree size, ascending
	vsize  int64                    // LedgerVerified
}

// runEntry is one run: its event log and, only when it cannot be derived
// from the log, its current value. A run's value is nearly always exactly
// its last event's snapshot, seq and time plus its first event's time (the
// engine commits them so), and storing it again doubled the memory of a
// freshly created run. The run's id is its key in Store.runs.
type runEntry struct {
	wf  string
	log eventLog
	run *store.Run // the current value when derived() would differ from it
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
	snap   store.Snapshot
}

func newEvent(ev store.Event) event {
	e := event{kind: ev.Kind, action: ev.Action, from: ev.From, to: ev.To, actor: ev.Actor, snap: ev.Snapshot}
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

func (e *event) public(runID string, seq int64) store.Event {
	return store.Event{RunID: runID, Seq: seq, Time: e.time(), Kind: e.kind, Action: e.action, From: e.from, To: e.to, Actor: e.actor, Snapshot: e.snap}
}

// current returns the value of run id.
func (e *runEntry) current(id string) store.Run {
	if e.run != nil {
		return *e.run
	}
	return e.derived(id)
}

// derived is the value of run id as its event log tells it.
func (e *runEntry) derived(id string) store.Run {
	last := &e.log.last
	return store.Run{ID: id, WorkflowID: e.wf, Snapshot: last.snap, Version: int64(e.log.len()), CreatedAt: e.log.firstTime(), UpdatedAt: last.time()}
}

// set makes r the run's current value, kept explicitly only when the log
// does not already say exactly r.
func (e *runEntry) set(r store.Run) {
	if sameRun(r, e.derived(r.ID)) {
		e.run = nil
		return
	}
	explicit := r // only this copy escapes, not every r
	e.run = &explicit
}

func (e *runEntry) version() int64 {
	if e.run != nil {
		return e.run.Version
	}
	return int64(e.log.len())
}

func (e *runEntry) status() string {
	if e.run != nil {
		return e.run.Status
	}
	return e.log.last.snap.Status
}

// sameRun reports whether a and b are exactly equal: equal strings, times
// equal with ==, and byte and string slices with equal content and equal
// nil-ness.
func sameRun(a, b store.Run) bool {
	return a.ID == b.ID && a.WorkflowID == b.WorkflowID && a.Version == b.Version &&
		a.CreatedAt == b.CreatedAt && a.UpdatedAt == b.UpdatedAt &&
		a.State == b.State && a.Status == b.Status && a.Error == b.Error &&
		(a.Data == nil) == (b.Data == nil) && string(a.Data) == string(b.Data) &&
		(a.Milestones == nil) == (b.Milestones == nil) && slices.Equal(a.Milestones, b.Milestones)
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		runs:   map[string]*runEntry{},
		tasks:  map[string]*store.Task{},
		byInv:  map[string]int64{},
		byKey:  map[string][]int64{},
		replay: map[string][]string{},
	}
}

// CreateRun implements store.Store.
func (s *Store) CreateRun(ctx context.Context, c store.Commit) error {
	if err := check(c); err != nil {
		return err
	}
	if c.Run.Version != 1 {
		return fmt.Errorf("memstore: a new run must have version 1, not %d", c.Run.Version)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runs[c.Run.ID]; ok {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, store.ErrExists)
	}
	e := &runEntry{wf: c.Run.WorkflowID}
	_ = e.log.append(newEvent(c.Event)) // the first never fails
	e.set(c.Run)
	s.runs[c.Run.ID] = e
	s.applyTasks(c)
	return nil
}

func check(c store.Commit) error {
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
			s.dequeue(t.ID)
		}
	}
	if c.Enqueue != nil {
		t := *c.Enqueue
		t.Status = store.TaskPending
		s.tasks[t.ID] = &t
		s.queue = append(s.queue, t.ID)
	}
}

func (s *Store) dequeue(id string) {
	for i, q := range s.queue {
		if q == id {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.runs[id]
	if !ok {
		return store.Run{}, fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	return e.current(id), nil
}

// CommitRun implements store.Store.
func (s *Store) CommitRun(ctx context.Context, expected int64, c store.Commit) error {
	if err := check(c); err != nil {
		return err
	}
	if c.Run.Version != expected+1 {
		return fmt.Errorf("memstore: new version %d is not expected+1 (%d)", c.Run.Version, expected+1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.runs[c.Run.ID]
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, store.ErrNotFound)
	}
	if v := e.version(); v != expected {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", c.Run.ID, v, expected, store.ErrConflict)
	}
	if err := e.log.append(newEvent(c.Event)); err != nil {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, err)
	}
	e.set(c.Run)
	s.applyTasks(c)
	return nil
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.runs[runID]
	if !ok {
		return nil, fmt.Errorf("memstore: run %s: %w", runID, store.ErrNotFound)
	}
	if after < 0 {
		after = 0
	}
	n := int64(e.log.len())
	if after >= n {
		return []store.Event{}, nil
	}
	count := n - after // seq k is at index k-1
	if limit > 0 && count > int64(limit) {
		count = int64(limit)
	}
	out := make([]store.Event, count)
	for i := range out {
		seq := after + int64(i) + 1
		ev, err := e.log.at(int(seq - 1))
		if err != nil {
			return nil, fmt.Errorf("memstore: run %s event %d: %w", runID, seq, err)
		}
		out[i] = ev.public(runID, seq)
	}
	return out, nil
}

// StaleRuns implements store.Store.
func (s *Store) StaleRuns(ctx context.Context, before time.Time, after store.RunCursor, limit int) ([]store.Run, error) {
	s.mu.RLock()
	var out []store.Run
	for id, e := range s.runs {
		r := e.current(id)
		if !r.UpdatedAt.Before(before) {
			continue
		}
		if !after.UpdatedAt.IsZero() || after.ID != "" {
			if r.UpdatedAt.Before(after.UpdatedAt) || r.UpdatedAt.Equal(after.UpdatedAt) && r.ID <= after.ID {
				continue
			}
		}
		out = append(out, r)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.Before(out[j].UpdatedAt)
		}
		return out[i].ID < out[j].ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeleteRun implements store.Store.
func (s *Store) DeleteRun(ctx context.Context, id string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.runs[id]
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	if v := e.version(); v != version {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", id, v, version, store.ErrConflict)
	}
	delete(s.runs, id)
	for tid, t := range s.tasks {
		if t.RunID == id {
			delete(s.tasks, tid)
			s.dequeue(tid)
		}
	}
	return nil
}

// CountRuns implements store.Store.
func (s *Store) CountRuns(ctx context.Context) (map[string]int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]int64{}
	for _, e := range s.runs {
		out[e.status()]++
	}
	return out, nil
}

// ClaimTask implements store.Store.
func (s *Store) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (store.Task, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.queue {
		t := s.tasks[id]
		if workflows != nil {
			e, ok := s.runs[t.RunID]
			if !ok || !slices.Contains(workflows, e.wf) {
				continue
			}
		}
		if t.Status == store.TaskPending || (t.Status == store.TaskRunning && now.After(t.LeaseUntil)) {
			t.Status = store.TaskRunning
			t.Owner = owner
			t.LeaseUntil = now.Add(lease)
			t.Attempts++
			t.UpdatedAt = now
			return *t, true, nil
		}
	}
	return store.Task{}, false, nil
}

// ExtendTask implements store.Store.
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
	return nil
}

// ReleaseTask implements store.Store.
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
	return nil
}

// FinishTask implements store.Store.
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
		s.dequeue(id)
	}
	return nil
}

// PendingTasks implements store.Store.
func (s *Store) PendingTasks(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.queue)), nil
}

// AppendLedger implements store.Store.
func (s *Store) AppendLedger(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error)) (store.LedgerRecord, error) {
	rec, _, err := s.AppendLedgerSigned(ctx, key, build, nil)
	return rec, err
}

// AppendLedgerSigned implements store.Store.
func (s *Store) AppendLedgerSigned(ctx context.Context, key string, build func(store.LedgerPrev) (store.LedgerRecord, error), sign store.LedgerSigner) (store.LedgerRecord, store.LedgerCheckpoint, error) {
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
	s.ledger = append(s.ledger, rec)
	s.byInv[rec.InvID] = rec.Seq
	s.byKey[key] = append(s.byKey[key], rec.Seq)
	if rec.ReplayOf != "" {
		s.replay[rec.ReplayOf] = append(s.replay[rec.ReplayOf], rec.InvID)
	}
	return rec, ck, nil
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
	out := append([]store.LedgerCheckpoint{}, s.cks[i:]...)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
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

// LedgerRecord implements store.Store.
func (s *Store) LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seq, ok := s.byInv[invID]
	if !ok {
		return store.LedgerRecord{}, fmt.Errorf("memstore: record %s: %w", invID, store.ErrNotFound)
	}
	return s.ledger[seq-1], nil
}

// LedgerHistory implements store.Store.
func (s *Store) LedgerHistory(ctx context.Context, key string) ([]store.LedgerRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seqs := s.byKey[key]
	if len(seqs) == 0 {
		return nil, fmt.Errorf("memstore: key %s: %w", key, store.ErrNotFound)
	}
	out := make([]store.LedgerRecord, len(seqs))
	for i, q := range seqs {
		out[i] = s.ledger[q-1]
	}
	return out, nil
}

// LedgerRange implements store.Store.
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

// LedgerSize implements store.Store.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.ledger)), nil
}

// LedgerLatest implements store.Store.
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
	out := make([]store.LedgerRecord, len(keys))
	for i, k := range keys {
		seqs := s.byKey[k]
		out[i] = s.ledger[seqs[len(seqs)-1]-1]
	}
	return out, nil
}

// ReplayedBy implements store.Store.
func (s *Store) ReplayedBy(ctx context.Context, invID string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string{}, s.replay[invID]...), nil
}

// Close implements store.Store.
func (s *Store) Close() error { return nil }
