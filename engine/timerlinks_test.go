package engine_test

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/spec"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

const linkBase = "http://asmp.test"

// timerLinkDue returns the frame's timer:ACTION links as action → due_at,
// checking each against the transition's href and the frame's schema.
func timerLinkDue(t *testing.T, f protocol.Frame) map[string]string {
	t.Helper()
	b, err := f.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(spec.StateFrame, b); err != nil {
		t.Fatalf("frame does not validate: %v\n%s", err, b)
	}
	out := map[string]string{}
	for k, l := range f.Links {
		action, ok := strings.CutPrefix(k, engine.TimerLinkPrefix)
		if !ok {
			continue
		}
		if want := linkBase + "/runs/" + f.RunID + "/transitions/" + action; l.Href != want || l.Method != "POST" {
			t.Fatalf("%s = %+v, want POST %s", k, l, want)
		}
		out[action] = l.DueAt
	}
	return out
}

// countingStore counts the reads of runs' timers.
type countingStore struct {
	store.Store
	timerReads atomic.Int32
}

func (s *countingStore) RunTimers(ctx context.Context, runID string) ([]store.Timer, error) {
	s.timerReads.Add(1)
	return s.Store.RunTimers(ctx, runID)
}

// A run's frame names its pending timers. They are read from the store
// once for a run read in a state with timers, never for one in a state
// without, and a transition's answer knows them from its commit.
func TestFrameTimersReadOnlyInTimerStates(t *testing.T) {
	st := &countingStore{Store: memstore.New()}
	fc := clock.NewFake(timerT0)
	r := newTimerRig(t, st, fc)
	ctx := context.Background()
	run := r.start(t, nil)
	if got := timerLinkDue(t, r.eng.Frame(run, linkBase)); got["escalate"] != "2026-05-01T09:10:00Z" || len(got) != 1 {
		t.Fatalf("created frame timers %v", got)
	}
	if n := st.timerReads.Load(); n != 0 {
		t.Fatalf("creating the run read its timers %d times; the commit has them", n)
	}
	looked, err := r.eng.Lookup(ctx, run.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := timerLinkDue(t, r.eng.Frame(looked, linkBase)); got["escalate"] != "2026-05-01T09:10:00Z" {
		t.Fatalf("looked-up frame timers %v", got)
	}
	if n := st.timerReads.Load(); n != 1 {
		t.Fatalf("a lookup in REVIEW read the timers %d times, want 1", n)
	}
	fc.Advance(time.Minute)
	touched, err := r.eng.Submit(ctx, engine.TransitionRequest{RunID: run.ID, Action: "touch"})
	if err != nil {
		t.Fatal(err)
	}
	if got := timerLinkDue(t, r.eng.Frame(touched, linkBase)); got["escalate"] != "2026-05-01T09:11:00Z" {
		t.Fatalf("frame after touch: timers %v", got)
	}
	done, err := r.eng.Submit(ctx, engine.TransitionRequest{RunID: run.ID, Action: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	if got := timerLinkDue(t, r.eng.Frame(done, linkBase)); len(got) != 0 {
		t.Fatalf("frame after approve: timers %v", got)
	}
	before := st.timerReads.Load()
	for range 3 {
		looked, err := r.eng.Lookup(ctx, run.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := timerLinkDue(t, r.eng.Frame(looked, linkBase)); len(got) != 0 {
			t.Fatalf("DONE frame: timers %v", got)
		}
	}
	if n := st.timerReads.Load() - before; n != 0 {
		t.Fatalf("reading a run in DONE (no timers) read its timers %d times", n)
	}
}

// The frames of a run's events (its stream, a replay) name the timers the
// event's entry into its state set, due from the event's time.
func TestEventFrameTimerLinks(t *testing.T) {
	fc := clock.NewFake(timerT0)
	r := newTimerRig(t, memstore.New(), fc)
	ctx := context.Background()
	run := r.start(t, map[string]any{"due_at": timerT0.Add(time.Hour).Format(time.RFC3339)})
	fc.Advance(2 * time.Minute)
	if _, err := r.eng.Transition(ctx, run.ID, "touch", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Transition(ctx, run.ID, "approve", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := r.events(t, run.ID)
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	want := []map[string]string{
		{"escalate": "2026-05-01T09:10:00Z", "expire": "2026-05-01T10:00:00Z"},
		{"escalate": "2026-05-01T09:12:00Z", "expire": "2026-05-01T10:00:00Z"},
		{},
	}
	first, err := r.eng.EventFrame(run.Def, &evs[0], linkBase)
	if err != nil {
		t.Fatal(err)
	}
	if got := timerLinkDue(t, first); !maps.Equal(got, want[0]) {
		t.Fatalf("frame of the created event: timers %v, want %v", got, want[0])
	}
	replay := r.eng.NewReplay(run.Def, linkBase)
	for i := range evs {
		f, err := replay.Frame(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := timerLinkDue(t, f); !maps.Equal(got, want[i]) {
			t.Fatalf("replayed frame %d (%s): timers %v, want %v", i+1, evs[i].Kind, got, want[i])
		}
	}
}

// The first frame of a follow (a stream opened without Last-Event-ID) is
// the run's current frame, so it names the run's pending timers, as GET
// of the run does.
func TestFollowFirstFrameNamesTimers(t *testing.T) {
	fc := clock.NewFake(timerT0)
	r := newTimerRig(t, memstore.New(), fc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := r.start(t, map[string]any{"due_at": timerT0.Add(time.Hour).Format(time.RFC3339)})
	fl, err := r.eng.Follow(ctx, engine.FollowRequest{RunID: run.ID, Base: linkBase})
	if err != nil {
		t.Fatal(err)
	}
	for it := range fl.Items(ctx) {
		if it.Frame == nil {
			t.Fatalf("first item %+v, want a frame", it)
		}
		f, err := it.Frame.Frame()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"escalate": "2026-05-01T09:10:00Z", "expire": "2026-05-01T10:00:00Z"}
		if got := timerLinkDue(t, f); !maps.Equal(got, want) {
			t.Fatalf("first frame of the follow: timers %v, want %v", got, want)
		}
		break
	}
}
