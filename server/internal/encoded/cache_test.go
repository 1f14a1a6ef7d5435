package encoded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server/internal/encoded"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

func decodeFrame(t *testing.T, f *encoded.Answer) protocol.Frame {
	t.Helper()
	if !bytes.HasSuffix(f.Body, []byte("\n")) {
		t.Fatalf("encoded frame lacks its newline: %q", f.Body)
	}
	var fr protocol.Frame
	if err := json.Unmarshal(f.Body, &fr); err != nil {
		t.Fatal(err)
	}
	return fr
}

// An encoded frame is the frame of the run as it is now, for the base URL
// asked: a transition or another base never gets a stale one.
func TestFrameFollowsVersionAndBase(t *testing.T) {
	ctx := context.Background()
	e, err := engine.New(memstore.New(), []*workflow.Definition{examples.ConfigWizard()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := encoded.New(e)
	const a, b = "http://a.example", "http://b.example"
	f1, err := c.Frame(ctx, r.ID, "", a)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.Frame(ctx, r.ID, "", a); again != f1 {
		t.Error("an unchanged run's frame was encoded again instead of reused")
	}
	if fr := decodeFrame(t, f1); fr.State != "INITIAL" || f1.ETag != `"1"` || !strings.HasPrefix(fr.Links["self"].Href, a+"/runs/") {
		t.Fatalf("first frame: %+v etag %s", fr, f1.ETag)
	}
	if fb, _ := c.Frame(ctx, r.ID, "", b); !strings.HasPrefix(decodeFrame(t, fb).Links["self"].Href, b+"/runs/") {
		t.Fatalf("frame for another base URL kept the first base: %s", fb.Body)
	}
	if _, err := e.Transition(ctx, r.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	f2, err := c.Frame(ctx, r.ID, "", a)
	if err != nil {
		t.Fatal(err)
	}
	if fr := decodeFrame(t, f2); fr.State != "CONFIGURE" || f2.ETag != `"2"` {
		t.Fatalf("after a transition: state %s etag %s", fr.State, f2.ETag)
	}
	if _, err := c.Frame(ctx, "no-such-run", "", a); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("unknown run: %v", err)
	}
	// The CLI object likewise.
	c1, err := c.CLI(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.CLI(ctx, r.ID, ""); again != c1 {
		t.Error("an unchanged run's CLI object was encoded again instead of reused")
	}
	if _, err := e.Transition(ctx, r.ID, "save", map[string]any{"value": "v"}, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	c2, err := c.CLI(ctx, r.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c2.ETag != `"3"` || bytes.Equal(c1.Body, c2.Body) {
		t.Fatalf("CLI object after a transition: etag %s, body %s", c2.ETag, c2.Body)
	}
	if _, err := c.CLI(ctx, "no-such-run", ""); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("unknown run: %v", err)
	}
}

// A state whose transitions have a Go guard may offer other actions with
// the same data: its frames are built every time, never reused.
func TestFrameOfImpureStateIsRebuilt(t *testing.T) {
	ctx := context.Background()
	var open atomic.Bool
	w := workflow.New("gate-v1", "GATE")
	w.State("GATE").Hint("Wait for the gate.")
	w.State("THROUGH").Hint("Through.")
	w.Transition("GATE", "pass", "THROUGH").Guard(func(map[string]any) (bool, string) { return open.Load(), "closed" })
	e, err := engine.New(memstore.New(), []*workflow.Definition{w.MustBuild()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := encoded.New(e)
	actions := func() (frame, cli int) {
		f, err := c.Frame(ctx, r.ID, "", "http://x")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := c.CLI(ctx, r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var obj protocol.CLI
		if err := json.Unmarshal(cl.Body, &obj); err != nil {
			t.Fatal(err)
		}
		return len(decodeFrame(t, f).NextStates), len(obj.Options)
	}
	if n, m := actions(); n != 0 || m != 0 {
		t.Fatalf("closed gate offers %d actions in the frame, %d options in the CLI", n, m)
	}
	open.Store(true)
	if n, m := actions(); n != 1 || m != 1 {
		t.Fatalf("open gate offers %d actions in the frame, %d options in the CLI; want 1 and 1 (a stale answer was served)", n, m)
	}
}

// A run's id may be given to a new run once the old one is deleted: after
// Forget, the new run's answers are its own even at the same version.
func TestForgetDropsADeletedRunsAnswers(t *testing.T) {
	ctx := context.Background()
	w := workflow.New("once-v1", "DONE")
	w.State("DONE").Hint("Nothing to do.")
	e, err := engine.New(memstore.New(), []*workflow.Definition{w.MustBuild()}, &engine.Options{NewRunID: func() string { return "r1" }})
	if err != nil {
		t.Fatal(err)
	}
	c := encoded.New(e)
	answers := func() (protocol.Frame, *encoded.Answer) {
		t.Helper()
		f, err := c.Frame(ctx, "r1", "", "http://x")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := c.CLI(ctx, "r1", "")
		if err != nil {
			t.Fatal(err)
		}
		return decodeFrame(t, f), cl
	}
	if _, err := e.StartRun(ctx, "", map[string]any{"n": 1}, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	f, cli1 := answers()
	if f.Data["n"] != 1.0 {
		t.Fatalf("first run's frame: %+v", f)
	}
	if n, err := e.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	if _, err := c.Frame(ctx, "r1", "", "http://x"); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("a deleted run's frame is served: %v", err)
	}
	c.Forget("r1")
	if _, err := e.StartRun(ctx, "", map[string]any{"n": 2}, engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	f, cli2 := answers()
	if f.Data["n"] != 2.0 {
		t.Fatalf("the new run r1 got the deleted run's frame: %+v", f)
	}
	if cli2 == cli1 {
		t.Fatal("the new run r1 got the deleted run's CLI object")
	}
}
