package encoded

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// wizardEvents returns an engine and the events of a config wizard run
// moved to CONFIGURE and saved.
func wizardEvents(tb testing.TB) (*engine.Engine, *workflow.Definition, []store.Event) {
	tb.Helper()
	ctx := context.Background()
	e, err := engine.New(memstore.New(), []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, a := range []struct {
		action string
		input  map[string]any
	}{{"start", nil}, {"save", map[string]any{"value": "v"}}} {
		if _, err := e.Transition(ctx, r.ID, a.action, a.input, engine.TransitionOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	// One event per page: the first event of a page carries its data, as
	// a published event does.
	var evs []store.Event
	for seq := int64(0); seq < 3; seq++ {
		page, err := e.Events(ctx, r.ID, seq, 1)
		if err != nil || len(page) != 1 {
			tb.Fatal(page, err)
		}
		evs = append(evs, page[0])
	}
	return e, r.Def, evs
}

// A stream line is the frame the run showed right after the event, with
// the event's id and a newline.
func TestEventLineIsTheFrameAfterTheEvent(t *testing.T) {
	e, def, evs := wizardEvents(t)
	for _, ev := range evs {
		b, err := EventLine(e, def, &ev, "http://a.example")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("line is not one JSON object and a newline: %q", b)
		}
		var f struct {
			ID int64 `json:"id"`
			protocol.Frame
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		if f.ID != ev.Seq || f.State != ev.To || !strings.HasPrefix(f.Links["self"].Href, "http://a.example/runs/") {
			t.Fatalf("line of event %d (to %s): %s", ev.Seq, ev.To, b)
		}
	}
}

// The subscribers of one publication (the same *store.Event) share one
// encoding per base URL; another base, or another event, gets its own.
func TestLinesAreSharedPerPublicationAndBase(t *testing.T) {
	e, def, evs := wizardEvents(t)
	var l Lines
	ev := &evs[len(evs)-1]
	a1, err := l.Line(e, def, ev, "http://a.example")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := l.Line(e, def, ev, "http://a.example")
	if &a1[0] != &a2[0] {
		t.Error("a second subscriber of the same event and base got a new encoding")
	}
	want, _ := EventLine(e, def, ev, "http://a.example")
	if string(a1) != string(want) {
		t.Fatalf("shared line %s, want %s", a1, want)
	}
	if b, _ := l.Line(e, def, ev, "http://b.example"); !strings.Contains(string(b), `"http://b.example/runs/`) {
		t.Fatalf("a line for another base kept the first base: %s", b)
	}
	other := *ev // the same event read again (a catch-up, another publication)
	if o, _ := l.Line(e, def, &other, "http://a.example"); &o[0] == &a1[0] || string(o) != string(a1) {
		t.Error("another publication of the event did not get its own, equal, encoding")
	}
	first, _ := EventLine(e, def, &evs[0], "http://a.example")
	if prev, _ := l.Line(e, def, &evs[0], "http://a.example"); string(prev) != string(first) {
		t.Fatalf("an earlier event got %s, want %s", prev, first)
	}
}

// Lines never holds more than maxLineEvents events or maxLineBytes bytes,
// and its counts match what it holds.
func TestLinesAreBounded(t *testing.T) {
	e, def, evs := wizardEvents(t)
	var l Lines
	for range 3 * maxLineEvents {
		ev := evs[len(evs)-1]
		if _, err := l.Line(e, def, &ev, "http://a.example"); err != nil {
			t.Fatal(err)
		}
	}
	held, sum := 0, int64(0)
	l.m.Range(func(_, v any) bool {
		held++
		sum += v.(*lineSet).size
		return true
	})
	if held > maxLineEvents || int64(held) != l.n.Load() || sum != l.bytes.Load() {
		t.Fatalf("holds %d events of %d bytes, counts %d and %d; bound %d", held, sum, l.n.Load(), l.bytes.Load(), maxLineEvents)
	}
	if held == 0 {
		t.Fatal("Lines forgot everything")
	}

	// Bytes: events with large data fill the byte budget long before the
	// count (their lines would add as much again).
	var b Lines
	big := evs[len(evs)-1]
	big.Data = json.RawMessage(`{"value":"` + strings.Repeat("x", 60<<10) + `"}`)
	for range 3 * maxLineBytes / len(big.Data) { // fewer than maxLineEvents
		ev := big
		b.set(&ev)
	}
	sum = 0
	b.m.Range(func(_, v any) bool { sum += v.(*lineSet).size; return true })
	if sum > maxLineBytes || sum != b.bytes.Load() || sum == 0 {
		t.Fatalf("holds %d bytes, counts %d; bound %d", sum, b.bytes.Load(), maxLineBytes)
	}
}

// BenchmarkEventLine encodes the stream line of a committed event, as one
// subscriber of a run does (Lines shares it among subscribers).
func BenchmarkEventLine(b *testing.B) {
	e, def, evs := wizardEvents(b)
	ev := evs[len(evs)-1]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EventLine(e, def, &ev, "http://127.0.0.1:8000"); err != nil {
			b.Fatal(err)
		}
	}
}
