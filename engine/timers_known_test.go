package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// know keeps a run's value read from the store for the transition planned
// on it, unless the engine has a commit of the run queued or knows a value
// as new, the data is too large to keep, or maxKnown values are kept.
func TestKnowKeepsAReadValueOnlyWhereNothingNewerIs(t *testing.T) {
	wb := workflow.New("w-v1", "A")
	wb.State("A")
	e, err := New(memstore.New(), []*workflow.Definition{wb.MustBuild()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := func(id string, version int64, data string) *Run {
		r := &Run{Run: store.Run{ID: id, Version: version}}
		r.Snapshot.Data = []byte(data)
		return r
	}
	queued := &pendingCommit{next: run("queued", 1, `{}`), done: make(chan struct{})}
	newer := &pendingCommit{next: run("newer", 3, `{}`), done: closedDone}
	older := &pendingCommit{next: run("older", 1, `{}`), done: closedDone}
	e.pending["queued"], e.pending["newer"], e.pending["older"] = queued, newer, older
	for _, r := range []*Run{run("queued", 2, `{}`), run("newer", 2, `{}`), run("older", 2, `{}`), run("fresh", 2, `{}`),
		run("large", 2, `{"x":"`+strings.Repeat("x", maxKnownData)+`"}`)} {
		e.know(r)
	}
	if e.pending["queued"] != queued {
		t.Error("a read value replaced a queued commit")
	}
	if e.pending["newer"] != newer {
		t.Error("a read value replaced a newer known one")
	}
	if p := e.pending["older"]; p == older || p.next.Version != 2 {
		t.Error("a read value did not replace an older known one")
	}
	if p := e.pending["fresh"]; p == nil || p.next.Version != 2 || !resolved(p) {
		t.Error("a read value of a run the engine did not know was not kept, as durable")
	}
	if _, ok := e.pending["large"]; ok {
		t.Error("a value larger than maxKnownData was kept")
	}
	for i := len(e.pending); i < maxKnown; i++ {
		e.pending[fmt.Sprint("filler-", i)] = older
	}
	e.know(run("one-too-many", 2, `{}`))
	if _, ok := e.pending["one-too-many"]; ok || len(e.pending) > maxKnown {
		t.Errorf("%d values kept, more than maxKnown (%d)", len(e.pending), maxKnown)
	}
}
