package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// pageStore records the limits Events is called with.
type pageStore struct {
	store.Store
	mu     sync.Mutex
	limits []int
	calls  atomic.Int64
}

func (p *pageStore) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	p.calls.Add(1)
	p.mu.Lock()
	p.limits = append(p.limits, limit)
	p.mu.Unlock()
	return p.Store.Events(ctx, runID, after, limit)
}

// tickRun starts a run of guardedLoop and ticks it n times.
func tickRun(t *testing.T, e *env, n int) string {
	t.Helper()
	id := e.do("POST", "/runs", map[string]any{}).json(t)["run_id"].(string)
	for i := 1; i <= n; i++ {
		frame(t, e.fire(id, "tick", map[string]any{"n": i}), 200)
	}
	return id
}

type eventPage struct {
	Events []struct {
		ID int64 `json:"id"`
	} `json:"events"`
	NextCursor *string `json:"next_cursor"`
}

// GET /runs/{id}/events pages: 100 events by default, limit and cursor
// (after=SEQ too), next_cursor null at the end; bad values get 400.
func TestEventsPaged(t *testing.T) {
	var open atomic.Bool
	e := start(t, setup{defs: []*workflow.Definition{guardedLoop(&open)}})
	id := tickRun(t, e, 249) // 250 events
	var first eventPage
	r := e.do("GET", "/runs/"+id+"/events", nil)
	json.Unmarshal(r.body, &first)
	if len(first.Events) != 100 || first.NextCursor == nil {
		t.Fatalf("default page: %d events, next %v", len(first.Events), first.NextCursor)
	}
	var seqs []int64
	cursor := ""
	for page := 0; page < 10; page++ {
		var p eventPage
		r := e.do("GET", "/runs/"+id+"/events?limit=70&cursor="+url.QueryEscape(cursor), nil)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		json.Unmarshal(r.body, &p)
		if len(p.Events) > 70 {
			t.Fatalf("a page of %d events for limit 70", len(p.Events))
		}
		for _, ev := range p.Events {
			seqs = append(seqs, ev.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if len(seqs) != 250 || seqs[0] != 1 || seqs[249] != 250 {
		t.Fatalf("paged %d events (%v … )", len(seqs), seqs[:min(3, len(seqs))])
	}
	var tail eventPage
	json.Unmarshal(e.do("GET", "/runs/"+id+"/events?after=240", nil).body, &tail)
	if len(tail.Events) != 10 || tail.Events[0].ID != 241 || tail.NextCursor != nil {
		t.Fatalf("after=240: %+v", tail)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=ten", "cursor=%21%21", "cursor=" + url.QueryEscape(*first.NextCursor) + "&after=3", "after=-1"} {
		r := e.do("GET", "/runs/"+id+"/events?"+q, nil)
		if r.status != 400 || r.hint(t) == "" {
			t.Errorf("%s: %d %s, want 400 with a hint", q, r.status, r.body)
		}
	}
}

// A stream resumed from 0 reads its backlog a page at a time, never the
// whole log at once, and still sends every event.
func TestStreamBacklogPaged(t *testing.T) {
	var open atomic.Bool
	ps := &pageStore{Store: memstore.New()}
	e := start(t, setup{defs: []*workflow.Definition{guardedLoop(&open)}, newStor: func(*testing.T) store.Store { return ps }})
	id := tickRun(t, e, 299)
	frame(t, e.fire(id, "stop", nil), 200) // 301 events, the last terminal
	ps.calls.Store(0)
	ps.mu.Lock()
	ps.limits = nil
	ps.mu.Unlock()
	sc := e.openStream("/runs/"+id+"/stream", "Last-Event-ID", "0")
	for seq := 1; seq <= 301; seq++ {
		if m := sc.next(t, 5*time.Second); m["id"] != float64(seq) {
			t.Fatalf("line %d has id %v", seq, m["id"])
		}
	}
	sc.ended(t, 5*time.Second)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.limits) < 4 {
		t.Fatalf("the backlog of 301 events was read in %d calls: %v", len(ps.limits), ps.limits)
	}
	for _, l := range ps.limits {
		if l <= 0 || l > 100 {
			t.Fatalf("the backlog was read with limit %d: %v", l, ps.limits)
		}
	}
}

// /metrics counts runs by workflow and status as they are created, change
// and are pruned.
func TestMetricsRunCountsFollowChanges(t *testing.T) {
	e := start(t, setup{})
	count := func(labels string) string {
		t.Helper()
		for _, l := range strings.Split(string(e.do("GET", "/metrics", nil).body), "\n") {
			if strings.HasPrefix(l, "asmp_runs{"+labels+"}") {
				return strings.TrimPrefix(l, "asmp_runs{"+labels+"} ")
			}
		}
		return "absent"
	}
	wizard := `status="derived",workflow="config-wizard-v1"`
	done := e.startRun("").RunID
	e.startRun("")
	if got := count(wizard); got != "2" {
		t.Fatalf("after two runs: %s", got)
	}
	for _, a := range []struct {
		action string
		body   any
	}{{"start", nil}, {"save", map[string]any{"value": "v"}}, {"confirm", nil}} {
		frame(t, e.fire(done, a.action, a.body), 200)
	}
	if n, err := e.eng.Prune(context.Background(), time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	if got := count(wizard); got != "1" {
		t.Fatalf("after pruning the completed run: %s", got)
	}
}
