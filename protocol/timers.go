package protocol

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TimerLinkPrefix starts the _links key of a pending timer of the run's
// state (SPEC section 17): "timer:" and the action it fires.
const TimerLinkPrefix = "timer:"

// FrameTimer is a pending timer as a frame names it in _links.
type FrameTimer struct {
	Action string
	Href   string // the transition it fires (POST)
	DueAt  time.Time
}

// Timers returns the pending timers the frame names in _links
// ("timer:ACTION" links with a due_at), soonest first (ties by action). A
// link whose due_at is not an RFC 3339 time is left out.
func (f *Frame) Timers() []FrameTimer {
	var out []FrameTimer
	for k, l := range f.Links {
		action, ok := strings.CutPrefix(k, TimerLinkPrefix)
		if !ok || action == "" {
			continue
		}
		due, err := time.Parse(time.RFC3339Nano, l.DueAt)
		if err != nil {
			continue
		}
		out = append(out, FrameTimer{Action: action, Href: l.Href, DueAt: due})
	}
	slices.SortFunc(out, func(a, b FrameTimer) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Action, b.Action)
	})
	return out
}

// DescribeTimer says when a pending timer fires, for people, as seen at
// now: "escalate in 9m58s (at 2026-12-03T10:30:00Z)", the time left
// rounded to the second; "escalate due now (at …)" within a second of
// its due time, and "escalate due 3s ago (at …)" once it is overdue (the
// server fires it shortly). The due time is shown in UTC to the second.
func DescribeTimer(t FrameTimer, now time.Time) string {
	at := t.DueAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	left := t.DueAt.Sub(now).Round(time.Second)
	switch {
	case left > 0:
		return fmt.Sprintf("%s in %s (at %s)", t.Action, left, at)
	case left == 0:
		return fmt.Sprintf("%s due now (at %s)", t.Action, at)
	}
	return fmt.Sprintf("%s due %s ago (at %s)", t.Action, -left, at)
}
