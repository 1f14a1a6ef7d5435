package server_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	bk "github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

var timerT0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// reviewFlow: REVIEW escalates after 10 minutes (while data.level < 3)
// and expires at data.due_at; touch re-enters REVIEW, approve leaves it.
func reviewFlow(t *testing.T) *workflow.Definition {
	t.Helper()
	b := workflow.New("review-v1", "REVIEW")
	b.State("REVIEW").
		Timer(workflow.Timer{After: 10 * time.Minute, Action: "escalate", Data: map[string]any{"reason": "nobody reviewed in 10m"}}).
		At("data.due_at", "expire")
	b.State("ESCALATED")
	b.State("EXPIRED")
	b.State("DONE")
	b.Transition("REVIEW", "approve", "DONE")
	b.Transition("REVIEW", "touch", "REVIEW")
	b.Transition("REVIEW", "escalate", "ESCALATED").Expect("reason", "string").
		GuardExpr("(data.level ?? 0) < 3", "The run is at the top escalation level already.")
	b.Transition("REVIEW", "expire", "EXPIRED")
	b.Transition("ESCALATED", "approve", "DONE")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func startTimers(t *testing.T, b bk.Backend, fc *clock.Fake) *env {
	t.Helper()
	p := b.New(t)
	return start(t, setup{defs: []*workflow.Definition{reviewFlow(t)}, clock: fc,
		newStor: func(t *testing.T) store.Store { return p.Open(t) }})
}

// timerLinks returns the frame's "timer:ACTION" links by action.
func timerLinks(f protocol.Frame) map[string]protocol.Link {
	out := map[string]protocol.Link{}
	for k, l := range f.Links {
		if a, ok := strings.CutPrefix(k, "timer:"); ok {
			out[a] = l
		}
	}
	return out
}

// wantTimers checks f names exactly the timers want (action → due_at),
// each with method POST and its transition's href: the next_states
// entry's when the action is offered.
func wantTimers(t *testing.T, e *env, what string, f protocol.Frame, want map[string]string) {
	t.Helper()
	got := timerLinks(f)
	if len(got) != len(want) {
		t.Fatalf("%s: timer links %v, want %v", what, got, want)
	}
	for action, due := range want {
		l, ok := got[action]
		href := e.url + "/runs/" + f.RunID + "/transitions/" + action
		if !ok || l.DueAt != due || l.Method != "POST" || l.Href != href {
			t.Fatalf("%s: timer:%s = %+v, want POST %s due at %s", what, action, l, href, due)
		}
		if n, offered := f.Action(action); offered && n.Href != l.Href {
			t.Fatalf("%s: timer:%s href %s, next_states has %s", what, action, l.Href, n.Href)
		}
	}
}

// A frame names each pending timer of the run's state in _links, with the
// transition's href and its due time, and validates against the schema;
// the links follow the run: re-armed by re-entering the state, gone when
// it leaves.
func TestFrameTimerLinks(t *testing.T) {
	bk.Each(t, func(t *testing.T, b bk.Backend) {
		fc := clock.NewFake(timerT0)
		e := startTimers(t, b, fc)
		deadline := timerT0.Add(90 * time.Minute).Format(time.RFC3339)
		f := frame(t, e.do("POST", "/runs", map[string]any{"data": map[string]any{"due_at": deadline}}), 201)
		want := map[string]string{"escalate": "2026-12-03T10:10:00Z", "expire": "2026-12-03T11:30:00Z"}
		wantTimers(t, e, "created", f, want)
		if _, ok := f.Action("escalate"); !ok {
			t.Fatalf("escalate not offered: %v", f.Actions())
		}
		for range 2 { // the second read is the cached answer
			wantTimers(t, e, "GET", frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200), want)
		}

		fc.Advance(5 * time.Minute)
		f = frame(t, e.fire(f.RunID, "touch", nil), 200)
		want["escalate"] = "2026-12-03T10:15:00Z" // re-armed from now
		wantTimers(t, e, "after touch", f, want)
		wantTimers(t, e, "GET after touch", frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200), want)

		f = frame(t, e.fire(f.RunID, "approve", nil), 200)
		wantTimers(t, e, "after approve", f, nil)
		wantTimers(t, e, "GET after approve", frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200), nil)

		// A timer whose action is not offered now (its guard refuses) is
		// still named, with the href of its transition.
		f = frame(t, e.do("POST", "/runs", map[string]any{"data": map[string]any{"level": 3}}), 201)
		if _, ok := f.Action("escalate"); ok {
			t.Fatalf("escalate offered at level 3: %v", f.Actions())
		}
		wantTimers(t, e, "guarded", f, map[string]string{"escalate": "2026-12-03T10:15:00Z"})
		wantTimers(t, e, "GET guarded", frame(t, e.do("GET", "/runs/"+f.RunID, nil), 200), map[string]string{"escalate": "2026-12-03T10:15:00Z"})
	})
}

// GET /runs?due_before=T lists the runs with a pending timer due before T.
func TestListRunsDueBefore(t *testing.T) {
	bk.Each(t, func(t *testing.T, b bk.Backend) {
		fc := clock.NewFake(timerT0)
		e := startTimers(t, b, fc)
		early := frame(t, e.do("POST", "/runs", nil), 201).RunID // escalate at 10:10
		done := frame(t, e.do("POST", "/runs", nil), 201).RunID
		frame(t, e.fire(done, "approve", nil), 200) // no timers any more
		fc.Advance(5 * time.Minute)
		late := frame(t, e.do("POST", "/runs", nil), 201).RunID // escalate at 10:15
		for q, want := range map[string][]string{
			"2026-12-03T10:10:00Z":      {},            // due at, not before
			"2026-12-03T10:10:00.001Z":  {early},       // just after
			"2026-12-03t10:10:00.001z":  {early},       // RFC 3339 allows a lower-case t and z
			"2026-12-03T11:12:00+01:00": {early},       // 10:12 UTC
			"2026-12-03T10:20:00Z":      {late, early}, // newest first
			"9999-01-01T00:00:00Z":      {late, early}, // beyond what a store keeps
			"1000-01-01T00:00:00Z":      {},
		} {
			if got := e.list("?due_before=" + url.QueryEscape(q)).ids(); !slices.Equal(got, want) {
				t.Errorf("due_before=%s: %v, want %v (early %s, late %s)", q, got, want, early, late)
			}
		}
		if got := e.list("?state=REVIEW&limit=1&due_before=2026-12-03T10:20:00Z"); !slices.Equal(got.ids(), []string{late}) || got.NextCursor == nil {
			t.Fatalf("first page of 1: %v", got.ids())
		} else if next := e.list("?state=REVIEW&limit=1&due_before=2026-12-03T10:20:00Z&cursor=" + url.QueryEscape(*got.NextCursor)); !slices.Equal(next.ids(), []string{early}) {
			t.Fatalf("second page: %v", next.ids())
		}
	})
}
