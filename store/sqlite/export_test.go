package sqlite

import (
	"testing"

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
