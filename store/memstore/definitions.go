package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/asmp-dev/asmp/store"
)

// definitions keeps the stored workflow definitions by workflow id and
// version.
type definitions struct {
	mu         sync.Mutex
	byWf       map[string]map[string]*store.Definition
	migrations map[[2]string]store.Migration
}

func cloneDef(d *store.Definition) store.Definition {
	c := *d
	c.Body = append([]byte(nil), d.Body...)
	return c
}

// PutDefinition implements store.DefinitionStore.
func (s *Store) PutDefinition(ctx context.Context, d store.Definition) (store.Definition, error) {
	s.defs.mu.Lock()
	defer s.defs.mu.Unlock()
	if s.defs.byWf == nil {
		s.defs.byWf = map[string]map[string]*store.Definition{}
	}
	vs := s.defs.byWf[d.WorkflowID]
	if vs == nil {
		vs = map[string]*store.Definition{}
		s.defs.byWf[d.WorkflowID] = vs
	}
	if old, ok := vs[d.Version]; ok {
		return cloneDef(old), nil
	}
	c := cloneDef(&d)
	vs[d.Version] = &c
	return cloneDef(&c), nil
}

// GetDefinition implements store.DefinitionStore.
func (s *Store) GetDefinition(ctx context.Context, workflowID, version string) (store.Definition, error) {
	s.defs.mu.Lock()
	defer s.defs.mu.Unlock()
	d, ok := s.defs.byWf[workflowID][version]
	if !ok {
		return store.Definition{}, fmt.Errorf("memstore: definition %s %s: %w", workflowID, version, store.ErrNotFound)
	}
	return cloneDef(d), nil
}

// Definitions implements store.DefinitionStore.
func (s *Store) Definitions(ctx context.Context, workflowID string) ([]store.Definition, error) {
	s.defs.mu.Lock()
	out := []store.Definition{}
	for _, d := range s.defs.byWf[workflowID] {
		out = append(out, cloneDef(d))
	}
	s.defs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].FirstServed.Equal(out[j].FirstServed) {
			return out[i].FirstServed.After(out[j].FirstServed)
		}
		return out[i].Version > out[j].Version
	})
	return out, nil
}

// PinCounts implements store.DefinitionStore.
func (s *Store) PinCounts(ctx context.Context, workflowID string) ([]store.PinCount, error) {
	type key struct{ v, st, status string }
	counts := map[key]int64{}
	s.mu.RLock()
	for id, e := range s.runs {
		if e.wf != workflowID {
			continue
		}
		r := e.current(id, s.names)
		counts[key{r.WorkflowVersion, r.State, r.Status}]++
	}
	s.mu.RUnlock()
	out := make([]store.PinCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, store.PinCount{Version: k.v, State: k.st, Status: k.status, Runs: n})
	}
	return out, nil
}

// PinnedRuns implements store.DefinitionStore.
func (s *Store) PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]store.Run, error) {
	s.mu.RLock()
	out := []store.Run{}
	for id, e := range s.runs {
		if e.wf == workflowID && e.ver == version && id > after {
			out = append(out, e.current(id, s.names))
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// PinLegacyRuns implements store.DefinitionStore.
func (s *Store) PinLegacyRuns(ctx context.Context, workflowID, version string) (int64, error) {
	s.defs.mu.Lock()
	defer s.defs.mu.Unlock()
	d, ok := s.defs.byWf[workflowID][version]
	if !ok {
		return 0, fmt.Errorf("memstore: definition %s %s: %w", workflowID, version, store.ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, e := range s.runs {
		if e.wf != workflowID || e.ver != "" {
			continue
		}
		r := e.current(id, s.names)
		r.WorkflowVersion = version
		e.set(r, s)
		n++
	}
	d.LegacyRuns += n
	return n, nil
}

// PutMigration implements store.DefinitionStore.
func (s *Store) PutMigration(ctx context.Context, m store.Migration) error {
	s.defs.mu.Lock()
	defer s.defs.mu.Unlock()
	if s.defs.migrations == nil {
		s.defs.migrations = map[[2]string]store.Migration{}
	}
	s.defs.migrations[[2]string{m.WorkflowID, m.From}] = cloneMigration(m)
	return nil
}

// GetMigration implements store.DefinitionStore.
func (s *Store) GetMigration(ctx context.Context, workflowID, from string) (store.Migration, error) {
	s.defs.mu.Lock()
	defer s.defs.mu.Unlock()
	m, ok := s.defs.migrations[[2]string{workflowID, from}]
	if !ok {
		return store.Migration{}, fmt.Errorf("memstore: migration of %s from %s: %w", workflowID, from, store.ErrNotFound)
	}
	return cloneMigration(m), nil
}

func cloneMigration(m store.Migration) store.Migration {
	c := m
	c.States = maps.Clone(m.States)
	c.Runs = slices.Clone(m.Runs)
	return c
}
