package server_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// listCounting records the Limit of every ListRuns the server asks for.
type listCounting struct {
	store.Store
	mu     sync.Mutex
	limits []int
}

func (s *listCounting) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	s.mu.Lock()
	s.limits = append(s.limits, f.Limit)
	s.mu.Unlock()
	return s.Store.ListRuns(ctx, f)
}

// A page of GET /runs is read from the store in chunks (64 runs at the
// default bound on a run's data: four page bounds of the largest runs),
// never a whole page of 500 runs with their data at once; the pages are
// the same.
func TestListRunsReadsInChunks(t *testing.T) {
	st := &listCounting{Store: memstore.New()}
	e := start(t, setup{newStor: func(*testing.T) store.Store { return st }})
	var ids []string
	for range 150 {
		ids = append(ids, e.startRun("config-wizard-v1").RunID)
	}
	slices.Reverse(ids) // newest first
	st.mu.Lock()
	st.limits = nil
	st.mu.Unlock()
	p := e.list("?limit=140")
	if got := p.ids(); !slices.Equal(got, ids[:140]) {
		t.Fatalf("page of %d runs, want the newest 140", len(got))
	}
	st.mu.Lock()
	limits := slices.Clone(st.limits)
	st.mu.Unlock()
	if len(limits) < 3 || slices.Max(limits) > 64 {
		t.Fatalf("the store was asked for %v runs at a time, want chunks of at most 64", limits)
	}
	if p.NextCursor == nil {
		t.Fatal("no next_cursor")
	}
	if rest := e.list("?limit=140&cursor=" + *p.NextCursor).ids(); !slices.Equal(rest, ids[140:]) {
		t.Fatalf("the next page has %d runs, want the 10 oldest", len(rest))
	}
}
