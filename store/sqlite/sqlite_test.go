package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

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

// A process killed while it held timers and tasks under leases leaves
// them claimable at the next Open: the file lock proves it is gone, so a
// claimed timer fires and a running task runs again right after a restart,
// not when the dead process's leases end.
func TestReopenReleasesLeasesOfTheDeadProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lease.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := storetest.NewRun("held")
	c.Timers = []store.Timer{storetest.At("fire", now.Add(-time.Minute), "")}
	c.Enqueue = &store.Task{ID: "held/task", RunID: "held", State: "START", Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if ts, err := s.ClaimDueTimers(t.Context(), now, 10, "dead", now.Add(time.Hour)); err != nil || len(ts) != 1 {
		t.Fatalf("claim timers: %v, %v", ts, err)
	}
	if _, ok, err := s.ClaimTask(t.Context(), "dead", now, time.Hour, nil); err != nil || !ok {
		t.Fatalf("claim task: %v, %v", ok, err)
	}
	if ts, _ := s.ClaimDueTimers(t.Context(), now, 10, "other", now.Add(time.Hour)); len(ts) != 0 {
		t.Fatalf("claimed under a live lease: %+v", ts)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ts, err := s.ClaimDueTimers(t.Context(), now, 10, "next", now.Add(time.Hour)); err != nil || len(ts) != 1 || ts[0].Owner != "next" {
		t.Fatalf("after reopen, claim timers = %+v, %v; want the dead process's timer", ts, err)
	}
	if task, ok, err := s.ClaimTask(t.Context(), "next", now, time.Hour, nil); err != nil || !ok || task.ID != "held/task" {
		t.Fatalf("after reopen, claim task = %+v, %v, %v; want the dead process's task", task, ok, err)
	}
}
