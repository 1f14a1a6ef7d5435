// Package memstore is the in-memory Store: fast, for tests and for
// `asmp serve --db :memory:`. Nothing survives the process.
package memstore

import (
	"context"
	"fmt"
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
	lmu    sync.Mutex // serialises ledger appends
}

type runEntry struct {
	run    store.Run
	events []store.Event
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
	s.runs[c.Run.ID] = &runEntry{run: c.Run, events: []store.Event{c.Event}}
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
	return e.run, nil
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
	if e.run.Version != expected {
		return fmt.Errorf("memstore: run %s at version %d, expected %d: %w", c.Run.ID, e.run.Version, expected, store.ErrConflict)
	}
	e.run = c.Run
	e.events = append(e.events, c.Event)
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
	if after >= int64(len(e.events)) {
		return []store.Event{}, nil
	}
	evs := e.events[after:] // seq n is at index n-1
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	return append([]store.Event(nil), evs...), nil
}

// CountRuns implements store.Store.
func (s *Store) CountRuns(ctx context.Context) (map[string]int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]int64{}
	for _, e := range s.runs {
		out[e.run.Status]++
	}
	return out, nil
}

// ClaimTask implements store.Store.
func (s *Store) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration) (store.Task, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.queue {
		t := s.tasks[id]
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
		return store.LedgerRecord{}, err
	}
	if rec.Seq != prev.Seq || rec.Key != key {
		return store.LedgerRecord{}, fmt.Errorf("memstore: built record has seq %d key %q, want %d %q", rec.Seq, rec.Key, prev.Seq, key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byInv[rec.InvID]; dup {
		return store.LedgerRecord{}, fmt.Errorf("memstore: record %s: %w", rec.InvID, store.ErrExists)
	}
	s.ledger = append(s.ledger, rec)
	s.byInv[rec.InvID] = rec.Seq
	s.byKey[key] = append(s.byKey[key], rec.Seq)
	if rec.ReplayOf != "" {
		s.replay[rec.ReplayOf] = append(s.replay[rec.ReplayOf], rec.InvID)
	}
	return rec, nil
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
