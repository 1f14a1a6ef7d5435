package sqlite

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/storetest"
)

// stored reads run id's row from the file, past the kept runs.
func stored(t *testing.T, s *Store, id string) (version int64, state, workflowVersion string) {
	t.Helper()
	if err := s.rdb.QueryRow(`SELECT version, state, workflow_version FROM runs WHERE id = ?`, id).Scan(&version, &state, &workflowVersion); err != nil {
		t.Fatal(err)
	}
	return version, state, workflowVersion
}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "commit.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// createKept creates run id pinned to version and reads it, so that the
// store keeps it (with its rowid).
func createKept(t *testing.T, s *Store, id, version string) store.Run {
	t.Helper()
	c := storetest.NewRun(id)
	c.Run.WorkflowVersion, c.Event.WorkflowVersion = version, version
	if err := s.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s.runs.rowid(id) == 0 {
		t.Fatalf("run %s was read but its rowid is not kept", id)
	}
	return r
}

// Commits of a kept run (found by its rowid) write the file, not only the
// kept value: a transition, and a migration to another workflow version,
// which the commit by rowid does not write.
func TestCommitsOfAKeptRunReachTheFile(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	r := createKept(t, s, "kept", "sha256:aa")
	next := storetest.Next(r, "go", "B", `{"n":1}`)
	if err := s.CommitRun(t.Context(), 1, next).Wait(); err != nil {
		t.Fatal(err)
	}
	if v, state, wv := stored(t, s, "kept"); v != 2 || state != "B" || wv != "sha256:aa" {
		t.Fatalf("stored after a transition: version %d, state %s, pinned to %s", v, state, wv)
	}
	mig := storetest.Next(next.Run, "sha256:aa", "B2", `{"n":1}`)
	mig.Run.WorkflowVersion, mig.Event.WorkflowVersion, mig.Event.Kind = "sha256:bb", "sha256:bb", store.EventMigrated
	if err := s.CommitRun(t.Context(), 2, mig).Wait(); err != nil {
		t.Fatal(err)
	}
	if v, state, wv := stored(t, s, "kept"); v != 3 || state != "B2" || wv != "sha256:bb" {
		t.Fatalf("stored after a migration: version %d, state %s, pinned to %s; want 3, B2, sha256:bb", v, state, wv)
	}
	if err := s.CommitRun(t.Context(), 2, storetest.Next(next.Run, "go", "C", `{}`)).Wait(); err == nil {
		t.Fatal("a commit expecting a stale version succeeded")
	}
	if v, _, _ := stored(t, s, "kept"); v != 3 {
		t.Fatalf("a refused commit wrote version %d", v)
	}
}

// A kept rowid is only a hint: a commit checks that the row there is the
// run's, and never writes another run's row.
func TestCommitChecksTheKeptRowid(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	a := createKept(t, s, "a", "sha256:aa")
	createKept(t, s, "b", "sha256:aa")
	s.runs.mu.Lock()
	kept := s.runs.runs["a"]
	kept.rowid = s.runs.runs["b"].rowid
	s.runs.runs["a"] = kept
	s.runs.mu.Unlock()
	if err := s.CommitRun(t.Context(), 1, storetest.Next(a, "go", "B", `{}`)).Wait(); err != nil {
		t.Fatal(err)
	}
	if v, state, _ := stored(t, s, "b"); v != 1 || state != "START" {
		t.Fatalf("a commit of run a wrote run b's row: version %d, state %s", v, state)
	}
	if v, state, _ := stored(t, s, "a"); v != 2 || state != "B" {
		t.Fatalf("run a after its commit: version %d, state %s", v, state)
	}
}

// A read made the moment a commit is durable, before the writer answers
// it (another read may already have seen the commit's events in the
// file), gets the committed run, not the value kept from before.
func TestReadRightAfterCOMMITGetsTheCommittedRun(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "window.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var armed atomic.Bool
	seen := make(chan int64, 1)
	OnCommit(s, func(int, time.Duration) {
		if armed.Load() {
			r, err := s.GetRun(context.Background(), "w")
			if err != nil {
				t.Error(err)
			}
			seen <- r.Version
		}
	})
	r := createKept(t, s, "w", "")
	armed.Store(true)
	if err := s.CommitRun(t.Context(), 1, storetest.Next(r, "go", "B", `{}`)).Wait(); err != nil {
		t.Fatal(err)
	}
	if v := <-seen; v != 2 {
		t.Fatalf("a read right after COMMIT got version %d, want 2", v)
	}
	if r, _ := s.GetRun(t.Context(), "w"); r.Version != 2 || s.runs.rowid("w") == 0 {
		t.Fatalf("after the commit: version %d, rowid kept %v; want 2, kept", r.Version, s.runs.rowid("w") != 0)
	}
}
