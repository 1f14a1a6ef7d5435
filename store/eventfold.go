package store

import (
	"encoding/json"
	"fmt"
)

// EventFold turns events in their stored form (see Event) into the page
// Events returns. A backend feeds it, in seq order, the stored events from
// the last whole event at or before after+1 on, and stops when Add returns
// false. Stored form: a whole event has Data set and its full Milestones;
// a delta event has Data nil, Patch set, and Added (its Milestones are
// ignored).
type EventFold struct {
	after, limit int64
	doc          any // the data at the last event added, decoded; nil: raw
	raw          json.RawMessage
	ms           []string
	base         bool // a whole event was seen
	out          []Event
	bytes        int
}

// NewEventFold starts a page of events after seq after, of at most limit
// events (limit <= 0: bounded by bytes only).
func NewEventFold(after int64, limit int) *EventFold {
	return &EventFold{after: after, limit: int64(limit), out: []Event{}}
}

// Add takes the next stored event. It returns false once the page is full
// (the event that fills it is in the page).
func (f *EventFold) Add(e Event) (bool, error) {
	whole := e.Data != nil
	if whole {
		f.base = true
		f.ms = e.Milestones
	} else {
		if !f.base {
			return false, fmt.Errorf("store: event %d of run %s is a delta with no whole event before it", e.Seq, e.RunID)
		}
		if len(e.Added) > 0 {
			f.ms = append(f.ms[:len(f.ms):len(f.ms)], e.Added...)
		}
	}
	e.Milestones = f.ms
	first := len(f.out) == 0
	if e.Seq <= f.after || (first && !whole) {
		// The data is needed here: the base of the page, or its first event.
		if whole {
			f.raw, f.doc = e.Data, nil
		} else {
			if f.doc == nil {
				d, err := decodeExact(f.raw)
				if err != nil {
					return false, fmt.Errorf("store: event data of run %s: %w", e.RunID, err)
				}
				f.doc = d
			}
			p, err := decodeExact(e.Patch)
			if err != nil {
				return false, fmt.Errorf("store: event %d patch of run %s: %w", e.Seq, e.RunID, err)
			}
			f.doc = mergeInPlace(f.doc, p)
		}
	}
	if e.Seq <= f.after {
		return true, nil
	}
	if first && !whole {
		b, err := json.Marshal(f.doc)
		if err != nil {
			return false, fmt.Errorf("store: event data of run %s: %w", e.RunID, err)
		}
		e.Data = b
		f.doc = nil // no longer needed: the reader folds the rest
	}
	f.out = append(f.out, e)
	f.bytes += 128 + len(e.Data) + len(e.Patch) + len(e.Error) + len(e.Reason)
	return !(f.limit > 0 && int64(len(f.out)) >= f.limit) && f.bytes < MaxPageBytes, nil
}

// Events returns the page (an empty, non-nil slice when nothing was added
// after the fold's after).
func (f *EventFold) Events() []Event { return f.out }

// mergeInPlace is MergeValue for a target the caller owns: it changes
// target's objects in place instead of copying them.
func mergeInPlace(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = make(map[string]any, len(p))
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergeInPlace(t[k], v)
	}
	return t
}
