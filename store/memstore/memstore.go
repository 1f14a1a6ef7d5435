// Package memstore is the in-memory Store: fast, for tests and for
// `asmp serve --db :memory:`. Nothing survives the process.
package memstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
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
	lmu    sync.Mutex         // serialises ledger appends
	counts map[countKey]int64 // runs by workflow and stored status, kept by every change
	names  map[string]string  // workflow ids, states and statuses: one string each for all runs
	defs   definitions
	scopes sync.Map                 // inv_ID -> the dispatcher's scopes ([]string)
	cks    []store.LedgerCheckpoint // by tree size, ascending
	vsize  int64                    // LedgerVerified
}

// intern returns the one copy of name (a workflow id, a state, a status),
// under mu held for writing. There are few of them, whatever the number
// of runs.
func (s *Store) intern(name string) string {
	if n, ok := s.names[name]; ok {
		return n
	}
	if len(s.names) < 1<<16 {
		s.names[name] = name
	}
	return name
}

type countKey struct{ workflow, status string }

// count moves one run of workflow wf from status from to status to ("-"
// for none), under mu.
func (s *Store) count(wf, from, to string) {
	if from == to {
		return
	}
	if from != "-" {
		if s.counts[countKey{wf, from}]--; s.counts[countKey{wf, from}] == 0 {
			delete(s.counts, countKey{wf, from})
		}
	}
	if to != "-" {
		s.counts[countKey{wf, to}]++
	}
}

// runEntry is one run: its event log and its current value, both encoded
// in byte slices (no pointers for the garbage collector to follow but the
// slices'), so that the collector's work does not grow with the fields of
// the runs stored. The run's id is its key in Store.runs.
type runEntry struct {
	wf      string // shared by every run of the workflow (Store.names)
	ver     string // the run's WorkflowVersion (shared, like wf)
	status  string // the stored status (one of a few, shared)
	version int64
	cur     []byte // the current value (appendRun)
	log     eventLog
}

// appendRun encodes r's current value without what the entry knows (id,
// workflow): its status first (read alone by status), then state, error,
// version, times, milestones and data — the data as a flag 2 ("the latest
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

// current returns the value of run id; names interns its state names.
func (e *runEntry) current(id string, names map[string]string) store.Run {
	r := store.Run{ID: id, WorkflowID: e.wf, Version: e.version, WorkflowVersion: e.ver}
	d := decoder{b: e.cur}
	r.Status = e.status
	d.bytes()
	state := d.bytes()
	if n, ok := names[string(state)]; ok {
		r.State = n
	} else {
		r.State = string(state)
	}
	r.Error = d.string()
	d.varint()
	for _, t := range [...]*time.Time{&r.CreatedAt, &r.UpdatedAt} {
		unix, full := d.time()
		*t = (&event{unix: unix, full: full}).time()
	}
	r.Milestones = d.strings()
	switch d.byte() {
	case 1:
		r.Data = d.bytes()
	case 2:
		r.Data, _ = e.log.lastData()
	}
	return r
}

// set makes r the run's current value.
func (e *runEntry) set(r store.Run, s *Store) {
	shared := false
	if data, ok := e.log.lastData(); ok && r.Data != nil && string(data) == string(r.Data) {
		shared = true // the latest event holds the same data: keep it once
	}
	n := 64 + len(r.State) + len(r.Status) + len(r.Error)
	if !shared {
		n += len(r.Data)
	}
	e.cur = appendRun(make([]byte, 0, n), &r, shared)
	e.version = r.Version
	e.ver = s.intern(r.WorkflowVersion)
	e.status = s.intern(r.Status)
	s.intern(r.State)
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
	return &Store{
		runs:   map[string]*runEntry{},
		tasks:  map[string]*store.Task{},
		byInv:  map[string]int64{},
		byKey:  map[string][]int64{},
		replay: map[string][]string{},
		counts: map[countKey]int64{},
		names:  map[string]string{},
	}
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, c store.Commit) error {
	if err := check(&c); err != nil {
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
	e := &runEntry{wf: s.intern(c.Run.WorkflowID)}
	_ = e.log.append(newEvent(c.Event, true)) // the first never fails
	e.set(c.Run, s)
	s.runs[c.Run.ID] = e
	s.count(e.wf, "-", c.Run.Status)
	s.applyTasks(c)
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

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.runs[id]
	if !ok {
		return store.Run{}, fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	return e.current(id, s.names), nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.runs[c.Run.ID]
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, store.ErrNotFound)
	}
	if v := e.version; v != expected {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", c.Run.ID, v, expected, store.ErrConflict)
	}
	was := e.status
	if err := e.log.append(newEvent(c.Event, store.WholeDue(&c.Event, e.log.patchBytes))); err != nil {
		return fmt.Errorf("memstore: run %s: %w", c.Run.ID, err)
	}
	s.count(e.wf, was, c.Run.Status)
	e.set(c.Run, s)
	s.applyTasks(c)
	return nil
}

// Events implements store.RunStore.
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
	fold := store.NewEventFold(after, limit)
	for i := e.log.wholeBefore(int(after)); i < int(n); i++ { // seq k is at index k-1
		ev, err := e.log.at(i)
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

// StaleRuns implements store.RunStore.
func (s *Store) StaleRuns(ctx context.Context, before time.Time, after store.RunCursor, limit int) ([]store.Run, error) {
	s.mu.RLock()
	var out []store.Run
	for id, e := range s.runs {
		r := e.current(id, s.names)
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

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	s.mu.RLock()
	out := []store.Run{}
	for id, e := range s.runs {
		r := e.current(id, s.names)
		if f.Matches(r) && (f.Before.IsZero() || store.NewerFirst(f.Before, store.CursorOf(r))) {
			out = append(out, r)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return store.NewerFirst(store.CursorOf(out[i]), store.CursorOf(out[j])) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// DeleteRun implements store.RunStore.
func (s *Store) DeleteRun(ctx context.Context, id string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.runs[id]
	if !ok {
		return fmt.Errorf("memstore: run %s: %w", id, store.ErrNotFound)
	}
	if v := e.version; v != version {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", id, v, version, store.ErrConflict)
	}
	s.count(e.wf, e.status, "-")
	delete(s.runs, id)
	for tid, t := range s.tasks {
		if t.RunID == id {
			delete(s.tasks, tid)
			s.dequeue(tid)
		}
	}
	return nil
}

// CountRuns implements store.RunStore: the counts every change keeps.
func (s *Store) CountRuns(ctx context.Context) ([]store.RunCount, error) {
	s.mu.RLock()
	out := make([]store.RunCount, 0, len(s.counts))
	for k, n := range s.counts {
		out = append(out, store.RunCount{WorkflowID: k.workflow, Status: k.status, N: n})
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
		s.dequeue(id)
	}
	return nil
}

// PendingTasks implements store.TaskStore.
func (s *Store) PendingTasks(ctx context.Context) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.queue)), nil
}

// AppendLedger implements store.LedgerStore.
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
func (s *Store) ReplayedBy(ctx context.Context, invID string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string{}, s.replay[invID]...), nil
}

// Close implements store.Store.
func (s *Store) Close() error { return nil }
