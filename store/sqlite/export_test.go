package sqlite

import (
	"testing"
	"time"

	msqlite "modernc.org/sqlite"
)

// PageStatus is what the writer's connection counted so far: pages found
// in its page cache, pages read from the file, pages written.
type PageStatus struct{ Hit, Miss, Write int64 }

// WriterStatus reads the writer connection's page counters (call it while
// no write is in flight).
func WriterStatus(tb testing.TB, s *Store) PageStatus {
	tb.Helper()
	var p PageStatus
	err := s.wconn.Raw(func(dc any) error {
		st := dc.(msqlite.DBStatus)
		for _, c := range []struct {
			op msqlite.DBStatusOp
			n  *int64
		}{{msqlite.DBStatusCacheHit, &p.Hit}, {msqlite.DBStatusCacheMiss, &p.Miss}, {msqlite.DBStatusCacheWrite, &p.Write}} {
			v, _, err := st.Status(c.op, false)
			if err != nil {
				return err
			}
			*c.n = int64(v)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// OnCommit makes s report each group's size and COMMIT time to fn; call
// it before the first write.
func OnCommit(s *Store, fn func(n int, commit time.Duration)) { s.onCommit = fn }

// Pragma runs a PRAGMA on the writer's connection (before the first write).
func Pragma(tb testing.TB, s *Store, pragma string) {
	tb.Helper()
	if _, err := s.wconn.ExecContext(tb.Context(), "PRAGMA "+pragma); err != nil {
		tb.Fatal(err)
	}
}
