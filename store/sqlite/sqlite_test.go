package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/sqlite"
	"github.com/asmp-dev/asmp/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "test.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "re.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewRun("keep")
	if err := s.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitRun(t.Context(), 1, storetest.Next(c.Run, "go", "NEXT", `{"v":"x"}`)).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(context.Background(), path, nil) // migrations must be idempotent
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.GetRun(t.Context(), "keep")
	if err != nil || r.Version != 2 || r.State != "NEXT" || string(r.Data) != `{"v":"x"}` {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
}

// One process per database: a second Open of an open database fails with
// ErrInUse, and succeeds once the first is closed.
func TestOpenIsExclusive(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "one.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := sqlite.Open(context.Background(), path, nil); !errors.Is(err, sqlite.ErrInUse) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s.Close()
}

func TestLedgerCheckpointsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunLedgerCheckpoints(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "test.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
