package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// BenchmarkCommitWithOutbox measures what the webhook outbox costs a
// transition: it opens two stores, puts a subscription in one, and then
// commits, alternately on each store, a self-loop: on the first without
// an outbox, on the second with one delivery (a body of the size of a
// run.state_changed message) in the commit. Both are measured in one
// run, under the same load. It reports each store's nanoseconds per
// commit and ratio, the throughput with the outbox row over that without
// (1 when it costs nothing).
//
//	go test -run '^$' -bench CommitWithOutbox ./store/sqlite/
func BenchmarkCommitWithOutbox(b *testing.B, openBench func(*testing.B) store.Store) {
	ctx := context.Background()
	none, with := openBench(b), openBench(b)
	defer none.Close()
	defer with.Close()
	if err := with.PutSubscription(ctx, store.Subscription{ID: "bench", URL: "https://example.com/hook", Events: []string{"run.state_changed"},
		CreatedAt: benchT0, UpdatedAt: benchT0}); err != nil {
		b.Fatal(err)
	}
	body := json.RawMessage(`{"type":"run.state_changed","timestamp":"2026-01-01T00:00:00Z","data":{"run_id":"hot","workflow_id":"loop-v1",` +
		`"workflow_version":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","state":"LOOP","status":"active",` +
		`"from":"LOOP","action":"tick","actor":"bench","frame_href":"/runs/hot"}}`)
	runs := [2]store.Run{benchCreate(b, none, "hot"), benchCreate(b, with, "hot")}
	stores := [2]store.Store{none, with}
	var spent [2]time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			k := (k + i) % 2 // alternate which store goes first
			r := runs[k]
			c := tick(r)
			if k == 1 {
				id := fmt.Sprintf("d%09d", i)
				c.Outbox = []store.Delivery{{ID: id, SubscriptionID: "bench", MessageID: "msg_" + id, Type: "run.state_changed", Body: body}}
			}
			start := time.Now()
			if err := stores[k].CommitRun(ctx, r.Version, c).Wait(); err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(start)
			runs[k] = c.Run
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/commit-none")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/commit-outbox")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "ratio")
}
