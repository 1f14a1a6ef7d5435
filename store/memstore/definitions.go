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
	type key struct{ v, st, status int32 }
	counts := map[key]int64{}
	s.mu.RLock()
	defer s.mu.RUnlock()
	wf, ok := s.names.find(workflowID)
	for slot := range s.recs.n {
		if e := s.rec(slot); ok && e.live && e.wf == wf {
			counts[key{e.ver, e.state, e.status}]++
		}
	}
	out := make([]store.PinCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, store.PinCount{Version: s.names.strs[k.v], State: s.names.strs[k.st], Status: s.names.strs[k.status], Runs: n})
	}
	return out, nil
}

// PinnedRuns implements store.DefinitionStore.
func (s *Store) PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]store.Run, error) {
	s.mu.RLock()
	out := []store.Run{}
	wf, okWf := s.names.find(workflowID)
	ver, okVer := s.names.find(version)
	for slot := range s.recs.n {
		if e := s.rec(slot); okWf && okVer && e.live && e.wf == wf && e.ver == ver && string(s.idOf(slot)) > after {
			out = append(out, s.currentAt(slot))
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
	wf, ok := s.names.find(workflowID)
	ver := s.names.id(version)
	for slot := range s.recs.n {
		if e := s.rec(slot); ok && e.live && e.wf == wf && e.ver == 0 {
			e.ver = ver
			n++
		}
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
