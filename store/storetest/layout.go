package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// Delta returns the commit that moves r to state, writing key = value into
// its data as a delta event (Patch set; Added the milestone it appends,
// when milestone is not ""), with the given offered actions.
func Delta(t testing.TB, r store.Run, state, key string, value any, milestone string, offered []string) store.Commit {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatal(err)
	}
	data[key] = value
	raw, _ := json.Marshal(data)
	patch, _ := json.Marshal(map[string]any{key: value})
	c := Next(r, "tick", state, string(raw))
	c.Run.Milestones = r.Milestones
	if milestone != "" {
		c.Run.Milestones = append(slices.Clip(r.Milestones), milestone)
		c.Event.Added = []string{milestone}
	}
	c.Event.Snapshot = c.Run.Snapshot
	c.Event.Patch = patch
	c.Event.Offered = offered
	return c
}

// foldData returns the data of every event of evs, folding the deltas.
func foldData(t *testing.T, evs []store.Event) []string {
	t.Helper()
	var cur any
	out := make([]string, len(evs))
	for i, e := range evs {
		if e.Data != nil {
			if err := json.Unmarshal(e.Data, &cur); err != nil {
				t.Fatalf("event %d data: %v", e.Seq, err)
			}
		} else {
			if i == 0 {
				t.Fatalf("the first event of a page (%d) has no data", e.Seq)
			}
			var p any
			if err := json.Unmarshal(e.Patch, &p); err != nil {
				t.Fatalf("event %d patch %q: %v", e.Seq, e.Patch, err)
			}
			cur = store.MergeValue(cur, p)
		}
		b, _ := json.Marshal(cur)
		out[i] = string(b)
	}
	return out
}

// testEventLayout: events committed as deltas read back, from any seq and
// in pages of any size, with the data, milestones, offered actions,
// workflow version and reason they were committed with; the first event of
// a page carries its data.
func testEventLayout(t *testing.T, s store.RunStore) {
	c := NewRun("layout")
	big := strings.Repeat("x", 3*store.MinWholeEvery) // so that ticks stay deltas for a while
	c.Run.Data = json.RawMessage(`{"big":"` + big + `"}`)
	c.Event.Snapshot = c.Run.Snapshot
	c.Event.Offered = []string{"tick", "stop"}
	c.Event.WorkflowVersion = "v1"
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	r := c.Run
	wantData := []string{string(c.Run.Data)}
	wantMs := [][]string{nil}
	wantOffered := [][]string{{"tick", "stop"}}
	const n = 400 // patches of ~30 bytes: some events come back whole (WholeDue)
	for i := 2; i <= n; i++ {
		ms := ""
		if i%7 == 0 {
			ms = fmt.Sprintf("m%d", i)
		}
		var offered []string
		if i%3 == 0 {
			offered = []string{}
		} else if i%3 == 1 {
			offered = []string{"tick"}
		}
		c := Delta(t, r, "LOOP", fmt.Sprintf("k%d", i%50), map[string]any{"i": i, "s": "v"}, ms, offered)
		if i == n {
			c.Event.Kind, c.Event.Reason, c.Run.Status = store.EventFailed, "the task broke", "failed"
			c.Event.Snapshot = c.Run.Snapshot
		}
		c.Event.WorkflowVersion = "v1"
		if err := s.CommitRun(ctx(), r.Version, c).Wait(); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		r = c.Run
		var norm any
		_ = json.Unmarshal(c.Run.Data, &norm)
		b, _ := json.Marshal(norm)
		wantData = append(wantData, string(b))
		wantMs = append(wantMs, c.Run.Milestones)
		wantOffered = append(wantOffered, offered)
	}
	for i := range wantData[:1] {
		var norm any
		_ = json.Unmarshal([]byte(wantData[i]), &norm)
		b, _ := json.Marshal(norm)
		wantData[i] = string(b)
	}
	for _, after := range []int64{0, 1, 2, 57, 199, 398, 399} {
		for _, limit := range []int{1, 3, 100, 0} {
			var all []store.Event
			for from := after; ; {
				evs, err := s.Events(ctx(), "layout", from, limit)
				if err != nil {
					t.Fatalf("Events(%d, %d): %v", from, limit, err)
				}
				if len(evs) == 0 {
					break
				}
				if limit > 0 && len(evs) > limit {
					t.Fatalf("Events(%d, %d) gave %d events", from, limit, len(evs))
				}
				if evs[0].Seq != from+1 {
					t.Fatalf("Events(%d, %d) starts at %d", from, limit, evs[0].Seq)
				}
				data := foldData(t, evs)
				for i, e := range evs {
					k := e.Seq - 1
					if data[i] != wantData[k] {
						t.Fatalf("Events(%d, %d): event %d data\n %.200s\nwant\n %.200s", from, limit, e.Seq, data[i], wantData[k])
					}
					if !slices.Equal(e.Milestones, wantMs[k]) {
						t.Fatalf("Events(%d, %d): event %d milestones %v, want %v", from, limit, e.Seq, e.Milestones, wantMs[k])
					}
					if !reflect.DeepEqual(e.Offered, wantOffered[k]) {
						t.Fatalf("Events(%d, %d): event %d offered %#v, want %#v", from, limit, e.Seq, e.Offered, wantOffered[k])
					}
					if e.WorkflowVersion != "v1" {
						t.Fatalf("event %d workflow version %q", e.Seq, e.WorkflowVersion)
					}
				}
				all = append(all, evs...)
				from = evs[len(evs)-1].Seq
			}
			if int64(len(all)) != n-after {
				t.Fatalf("Events from %d by %d: %d events, want %d", after, limit, len(all), n-after)
			}
			last := all[len(all)-1]
			if last.Reason != "the task broke" || last.Kind != store.EventFailed || last.Status != "failed" {
				t.Fatalf("last event %+v", last)
			}
		}
	}
}

// testEventsPageBytes: a page of large events ends early, bounded in bytes
// (store.MaxPageBytes), and reading on after it gives the rest.
func testEventsPageBytes(t *testing.T, s store.RunStore) {
	c := NewRun("heavy")
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	r := c.Run
	big := strings.Repeat("y", 3<<20)
	for i := 0; i < 8; i++ { // whole events of 3 MiB each
		c := Next(r, "grow", "S", fmt.Sprintf(`{"v":%q,"i":%d}`, big, i))
		if err := s.CommitRun(ctx(), r.Version, c).Wait(); err != nil {
			t.Fatal(err)
		}
		r = c.Run
	}
	evs, err := s.Events(ctx(), "heavy", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, e := range evs {
		size += len(e.Data)
	}
	if len(evs) == 0 || len(evs) >= 9 || size > store.MaxPageBytes+len(big)+64 {
		t.Fatalf("a page of %d events, %d bytes: not bounded by %d bytes", len(evs), size, store.MaxPageBytes)
	}
	rest, err := s.Events(ctx(), "heavy", evs[len(evs)-1].Seq, 100)
	if err != nil || len(rest) == 0 || rest[len(rest)-1].Seq > 9 {
		t.Fatalf("the rest after a short page: %d events, %v", len(rest), err)
	}
}
