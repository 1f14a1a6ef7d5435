package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// BenchmarkListRuns reads one page of 50 runs (GET /runs) from stores of
// 10 and of 100,000 runs, unfiltered and with each filter, and the page
// after it: with an index per filter the figures do not grow with the
// number of runs. Performance is not asserted here.
func BenchmarkListRuns(b *testing.B) {
	ctx := context.Background()
	processing := "processing"
	for _, n := range []int{10, 100_000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			s, err := Open(ctx, filepath.Join(b.TempDir(), "list.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fillRuns(b, s, n)
			newest, err := s.ListRuns(ctx, store.RunFilter{Limit: 50})
			if err != nil || len(newest) == 0 {
				b.Fatal(newest, err)
			}
			next := store.CursorOf(newest[len(newest)-1])
			for _, tc := range []struct {
				name string
				f    store.RunFilter
			}{
				{"unfiltered", store.RunFilter{}},
				{"next-page", store.RunFilter{Before: next}},
				{"workflow", store.RunFilter{WorkflowID: "wf-1"}},
				{"state", store.RunFilter{State: "S2"}},
				{"status", store.RunFilter{Override: &processing}},
				{"workflow+state", store.RunFilter{WorkflowID: "wf-1", State: "S2"}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					f := tc.f
					f.Limit = 50
					b.ReportAllocs()
					for b.Loop() {
						if _, err := s.ListRuns(ctx, f); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// fillRuns stores n runs over 4 workflows and 5 states, a tenth of them
// processing, in one transaction.
func fillRuns(b *testing.B, s *Store, n int) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := s.queue(context.Background(), func(tx wtx) error {
		for i := range n {
			status := ""
			if i%10 == 0 {
				status = "processing"
			}
			at := nanos(t0.Add(time.Duration(i) * time.Millisecond))
			if _, err := tx.Exec(`INSERT INTO runs (id, workflow_id, state, status, data, milestones, error, version, created_at, updated_at)
				VALUES (?, ?, ?, ?, '{}', '[]', '', 1, ?, ?)`,
				fmt.Sprintf("run-%08d", i), fmt.Sprintf("wf-%d", i%4), fmt.Sprintf("S%d", i%5), status, at, at); err != nil {
				return err
			}
		}
		return nil
	}, nil).Wait()
	if err != nil {
		b.Fatal(err)
	}
}
