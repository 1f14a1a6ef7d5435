package protocol

import (
	"testing"
	"time"
)

// A frame's timer links read back as its pending timers, soonest first;
// other links and unreadable due times are not timers.
func TestFrameTimers(t *testing.T) {
	f := Frame{Links: map[string]Link{
		"self":           {Href: "http://x/runs/1", Method: "GET"},
		"timer:expire":   {Href: "http://x/runs/1/transitions/expire", Method: "POST", DueAt: "2026-12-03T11:00:00Z"},
		"timer:escalate": {Href: "http://x/runs/1/transitions/escalate", Method: "POST", DueAt: "2026-12-03T10:30:00.5Z"},
		"timer:broken":   {Href: "http://x/runs/1/transitions/broken", Method: "POST", DueAt: "soon"},
		"timer:":         {DueAt: "2026-12-03T10:00:00Z"},
	}}
	got := f.Timers()
	if len(got) != 2 || got[0].Action != "escalate" || got[1].Action != "expire" ||
		got[0].Href != "http://x/runs/1/transitions/escalate" || !got[0].DueAt.Equal(time.Date(2026, 12, 3, 10, 30, 0, 5e8, time.UTC)) {
		t.Fatalf("Timers() = %+v", got)
	}
	if ts := (&Frame{}).Timers(); len(ts) != 0 {
		t.Fatalf("a frame without links has timers %+v", ts)
	}
}

func TestDescribeTimer(t *testing.T) {
	due := time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC)
	tm := FrameTimer{Action: "escalate", DueAt: due}
	for now, want := range map[time.Time]string{
		due.Add(-9*time.Minute - 58*time.Second):                   "escalate in 9m58s (at 2026-12-03T10:30:00Z)",
		due.Add(-2*time.Hour - 300*time.Millisecond):               "escalate in 2h0m0s (at 2026-12-03T10:30:00Z)",
		due.Add(-200 * time.Millisecond):                           "escalate due now (at 2026-12-03T10:30:00Z)",
		due.Add(3 * time.Second):                                   "escalate due 3s ago (at 2026-12-03T10:30:00Z)",
		due.In(time.FixedZone("CET", 3600)).Add(-90 * time.Second): "escalate in 1m30s (at 2026-12-03T10:30:00Z)",
	} {
		if got := DescribeTimer(tm, now); got != want {
			t.Errorf("DescribeTimer at %s = %q, want %q", now, got, want)
		}
	}
}
