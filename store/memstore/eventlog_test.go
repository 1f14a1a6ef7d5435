package memstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

func sampleEvents() []store.Event {
	paris := time.FixedZone("CET", 3600)
	return []store.Event{
		{Time: time.Unix(1700000000, 123).UTC(), Kind: "created", To: "A", Snapshot: store.Snapshot{State: "A", Data: json.RawMessage(`{}`)}},
		{Time: time.Unix(1700000001, 0).In(paris), Kind: "transition", Action: "go", From: "A", To: "B", Actor: "ann",
			Snapshot: store.Snapshot{State: "B", Status: "processing", Data: json.RawMessage(`{"v":"ünïcode"}`), Milestones: []string{"one", ""}, Error: "boom"}},
		{Time: time.Unix(1700000002, 0).UTC(), Kind: "transition", Snapshot: store.Snapshot{State: "C", Milestones: []string{}}},
		{Time: time.Time{}, Kind: "x"},
	}
}

// Every event comes back from the log exactly as it went in: times with
// their location, nil and empty data and milestones told apart.
func TestEventLogRoundTrip(t *testing.T) {
	t.Parallel()
	s := New()
	in := sampleEvents()
	s.newRun(&store.Commit{Run: store.Run{ID: "r", Version: 1}, Event: in[0]})
	slot, _ := s.lookup("r")
	for _, ev := range in[1:] {
		if err := s.appendEvent(slot, newEvent(ev, true)); err != nil {
			t.Fatal(err)
		}
	}
	e := s.rec(slot)
	if int(e.n) != len(in) {
		t.Fatalf("len %d, want %d", e.n, len(in))
	}
	for i, want := range in {
		ev, err := s.eventAt(e, i)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		got := ev.public(want.RunID, want.Seq)
		if !got.Time.Equal(want.Time) || got.Time.Location().String() != want.Time.Location().String() {
			t.Errorf("event %d time %v, want %v", i, got.Time, want.Time)
		}
		got.Time, want.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
}

// sameEvent compares events as the store returns them: the same instant,
// zone name and offset, and equal everything else.
func sameEvent(a, b event) bool {
	ta, tb := a.time(), b.time()
	na, oa := ta.Zone()
	nb, ob := tb.Zone()
	pa, pb := a.public("", 0), b.public("", 0)
	pa.Time, pb.Time = time.Time{}, time.Time{}
	return ta.Equal(tb) && na == nb && oa == ob && reflect.DeepEqual(pa, pb)
}

// FuzzDecodeEvent: any bytes decode to an event or an error, never a
// panic; and any event's encoding decodes back to it.
func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range sampleEvents() {
		e := newEvent(ev, true)
		f.Add(appendEvent(nil, &e), ev.Action, ev.Snapshot.State, string(ev.Snapshot.Data), int64(len(ev.Snapshot.Milestones)))
	}
	f.Fuzz(func(t *testing.T, raw []byte, action, state, data string, milestones int64) {
		if ev, rest, err := decodeEvent(raw); err == nil {
			again := appendEvent(nil, &ev)
			back, _, err := decodeEvent(again)
			if err != nil || !sameEvent(back, ev) {
				t.Fatalf("re-encoding %q: %v", raw[:len(raw)-len(rest)], err)
			}
		}
		e := event{unix: milestones, action: action, whole: true, snap: store.Snapshot{State: state, Data: json.RawMessage(data)}}
		for i := int64(0); i < milestones%4; i++ {
			e.snap.Milestones = append(e.snap.Milestones, state)
		}
		enc := appendEvent(nil, &e)
		back, rest, err := decodeEvent(enc)
		if err != nil || len(rest) != 0 {
			t.Fatalf("decoding an encoded event: %v, %d bytes left", err, len(rest))
		}
		if data == "" {
			e.snap.Data = json.RawMessage{} // non-nil empty data comes back non-nil empty
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", back, e)
		}
	})
}

// A run's current value comes back exactly as committed, whether or not
// it matches its latest event: times with their zone, nil and empty
// milestones, data shared with a whole event or kept apart.
func TestCurrentValueRoundTrip(t *testing.T) {
	t.Parallel()
	s := New()
	paris := time.FixedZone("CET", 3600)
	c := store.Commit{
		Run: store.Run{ID: "r", WorkflowID: "wf", Version: 1, CreatedAt: time.Unix(1700000000, 5).In(paris), UpdatedAt: time.Unix(1700000001, 0).UTC(),
			Snapshot: store.Snapshot{State: "A", Status: "processing", Data: json.RawMessage(`{"a":1}`), Milestones: []string{}, Error: "e"}},
		Event: store.Event{RunID: "r", Seq: 1, Time: time.Unix(1700000000, 5).UTC(), Kind: "created", Snapshot: store.Snapshot{State: "A", Data: json.RawMessage(`{"a":1}`)}},
	}
	if err := s.CreateRun(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	want := c.Run
	if !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location().String() != "CET" {
		t.Fatalf("created at %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetRun:\n got %#v\nwant %#v", got, want)
	}
	next := want
	next.Version, next.Data, next.Milestones, next.Status = 2, json.RawMessage(`{"a":2}`), nil, ""
	ev := store.Event{RunID: "r", Seq: 2, Kind: "transition", Patch: json.RawMessage(`{"a":2}`), Snapshot: next.Snapshot}
	if err := s.CommitRun(t.Context(), 1, store.Commit{Run: next, Event: ev}).Wait(); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.GetRun(t.Context(), "r"); !reflect.DeepEqual(got, next) {
		t.Fatalf("after a delta:\n got %#v\nwant %#v", got, next)
	}
}
