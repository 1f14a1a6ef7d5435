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

// schedules keeps the stored schedules by ID under their own lock.
type schedules struct {
	mu   sync.Mutex
	byID map[string]*store.Schedule
}

func cloneSchedule(s *store.Schedule) store.Schedule {
	c := *s
	c.Data = append([]byte(nil), s.Data...)
	return c
}

func newSchedule(s store.Schedule) *store.Schedule {
	c := cloneSchedule(&s)
	if len(c.Data) == 0 {
		c.Data = []byte(`{}`)
	}
	c.CreatedAt = store.ScheduleTime(c.CreatedAt)
	c.LastTick = store.ScheduleTime(c.LastTick)
	return &c
}

// PutSchedule implements store.ScheduleStore.
func (s *Store) PutSchedule(ctx context.Context, sc store.Schedule) error {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	if s.sched.byID == nil {
		s.sched.byID = map[string]*store.Schedule{}
	}
	if _, ok := s.sched.byID[sc.ID]; ok {
		return fmt.Errorf("memstore: schedule %s: %w", sc.ID, store.ErrExists)
	}
	s.sched.byID[sc.ID] = newSchedule(sc)
	return nil
}

// PutFileSchedules implements store.ScheduleStore.
func (s *Store) PutFileSchedules(ctx context.Context, workflows []string, ss []store.Schedule) error {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	if s.sched.byID == nil {
		s.sched.byID = map[string]*store.Schedule{}
	}
	keep := map[string]bool{}
	for _, sc := range ss {
		if sc.Source != store.ScheduleFile || !slices.Contains(workflows, sc.WorkflowID) {
			return fmt.Errorf("memstore: schedule %s is not a file schedule of the workflows given", sc.ID)
		}
		keep[sc.ID] = true
	}
	for id, old := range s.sched.byID {
		if old.Source == store.ScheduleFile && slices.Contains(workflows, old.WorkflowID) && !keep[id] {
			delete(s.sched.byID, id)
		}
	}
	for _, sc := range ss {
		if old, ok := s.sched.byID[sc.ID]; ok {
			n := newSchedule(sc)
			n.CreatedAt, n.LastTick, n.LastFailure = old.CreatedAt, old.LastTick, old.LastFailure
			s.sched.byID[sc.ID] = n
			continue
		}
		s.sched.byID[sc.ID] = newSchedule(sc)
	}
	return nil
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	sc, ok := s.sched.byID[id]
	if !ok {
		return store.Schedule{}, fmt.Errorf("memstore: schedule %s: %w", id, store.ErrNotFound)
	}
	return cloneSchedule(sc), nil
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context, after string, limit int) ([]store.Schedule, error) {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	ids := make([]string, 0, len(s.sched.byID))
	for id := range s.sched.byID {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]store.Schedule, 0, len(ids))
	for _, id := range ids {
		out = append(out, cloneSchedule(s.sched.byID[id]))
	}
	return out, nil
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	sc, ok := s.sched.byID[id]
	switch {
	case !ok:
		return fmt.Errorf("memstore: schedule %s: %w", id, store.ErrNotFound)
	case sc.Source == store.ScheduleFile:
		return fmt.Errorf("memstore: schedule %s: %w", id, store.ErrFileSchedule)
	}
	delete(s.sched.byID, id)
	return nil
}

// AdvanceSchedule implements store.ScheduleStore.
func (s *Store) AdvanceSchedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	sc, ok := s.sched.byID[id]
	if !ok || !sc.LastTick.Equal(store.ScheduleTime(from)) {
		return false, nil
	}
	sc.LastTick = store.ScheduleTime(to)
	return true, nil
}

// FailSchedule implements store.ScheduleStore.
func (s *Store) FailSchedule(ctx context.Context, id string, f store.ScheduleFailure) error {
	s.sched.mu.Lock()
	defer s.sched.mu.Unlock()
	if sc, ok := s.sched.byID[id]; ok {
		sc.LastFailure = store.ScheduleFailure{Tick: store.ScheduleTime(f.Tick), Error: store.ScheduleError(f.Error)}
	}
	return nil
}
