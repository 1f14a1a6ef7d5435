package engine

import (
	"context"
	"iter"
	"strconv"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// FollowRequest is a request to follow a run (GET /runs/{run_id}/stream,
// client.Backend's Stream): what Follow needs of the transport.
type FollowRequest struct {
	RunID string
	// Scope is the scoping workflow of the API ("" = the root).
	Scope string
	// Base is the API base URL of the frames' hrefs.
	Base string
	// After, with Resume, is the id of the last event the client has: the
	// follow replays every later event instead of starting with the
	// current frame. A resume point ahead of the run is EInvalid.
	After  int64
	Resume bool
	// From, when set, is the run as a transition just left it (the NDJSON
	// answer of a transition): the follow starts with its frame and goes
	// on live from its version. Sub must then be set, taken before the
	// transition, so no event is missed.
	From *Run
	// Sub, when set, is a subscription to the run taken earlier; the
	// follow ends it. nil: Follow subscribes.
	Sub *Subscription
	// Until ends the follow after a frame whose status it holds (nil =
	// a terminal status).
	Until func(status string) bool
	// Heartbeat, when set, makes the follow yield a heartbeat at each
	// tick while it waits.
	Heartbeat <-chan time.Time
	// Stop, when closed, ends the follow with a "shutdown" end.
	Stop <-chan struct{}
}

// FollowKind says where a followed frame comes from.
type FollowKind int

// Kinds of followed frames.
const (
	// FrameCurrent is the run's current frame (a follow's first).
	FrameCurrent FollowKind = iota
	// FrameReplayed is a frame rebuilt from the stored event log (a
	// resume, or a gap filled).
	FrameReplayed
	// FrameLive is the frame of an event as it was published: every
	// follower of the run gets the same Event, so what it derives from it
	// (an encoding) may be shared.
	FrameLive
)

// FollowFrame is a frame of a followed run.
type FollowFrame struct {
	Kind FollowKind
	// Def is the definition the frame is drawn with: the run's version
	// at that event.
	Def *workflow.Definition
	// Event is the published event of a FrameLive frame (nil otherwise);
	// it must not be modified.
	Event *store.Event
	e     *Engine
	base  string
	frame protocol.Frame
	built bool
}

// Frame returns the frame (built on first use for a live event).
func (f *FollowFrame) Frame() (protocol.Frame, error) {
	if !f.built {
		fr, err := f.e.EventFrame(f.Def, f.Event, f.base)
		if err != nil {
			return protocol.Frame{}, err
		}
		f.frame, f.built = fr, true
	}
	return f.frame, nil
}

// Ends of a follow before the run's end.
const (
	EndShutdown     = "shutdown"      // Stop was closed
	EndSlowConsumer = "slow_consumer" // the follower fell too far behind and was cut off
	EndClosed       = "closed"        // the subscription was closed (not for slowness)
	EndError        = "error"         // reading the run or its events failed
)

// FollowEnd says why a follow ended before the run did (or Until held).
type FollowEnd struct {
	Reason string // EndShutdown, EndSlowConsumer, EndClosed, EndError
	// Hint is what the client should do (empty for EndClosed).
	Hint string
	// Err is the error of an EndError end.
	Err error
}

// FollowItem is one thing a follow yields. ID is the id of the last event
// the follower has been given (a frame's own). Exactly one of Frame,
// Progress, Heartbeat and End is set.
type FollowItem struct {
	ID        int64
	Frame     *FollowFrame
	Progress  *protocol.Progress
	Heartbeat bool
	End       *FollowEnd
}

// Follower is one follow of a run, opened by Follow.
type Follower struct {
	e    *Engine
	req  FollowRequest
	sub  *Subscription
	run  *Run // its own copy: its definition follows the run's versions
	last int64
}

// Follow opens the follow of a run: subscribe first, then read, so an
// event committed in between is seen twice (and skipped by id), never
// missed; catch up from the event log when resuming; then live events,
// filling gaps (events committed by another process) from the log and
// following the run's versions. Errors here come before anything is
// sent: the run is not found in scope (Lookup), or the resume point is
// ahead of the run. Items yields the rest; the caller must range over
// Items or Close the follower.
func (e *Engine) Follow(ctx context.Context, req FollowRequest) (*Follower, error) {
	if req.Until == nil {
		req.Until = protocol.Terminal
	}
	f := &Follower{e: e, req: req, sub: req.Sub}
	if req.From != nil {
		own := *req.From
		f.run, f.last = &own, own.Version
		if f.sub == nil {
			f.sub = e.hub.Subscribe(own.ID) // later than the transition: what came between is caught up as a gap
		}
		return f, nil
	}
	run, err := e.Lookup(ctx, req.RunID, req.Scope)
	if err != nil {
		if f.sub != nil {
			f.sub.Close()
		}
		return nil, err
	}
	if req.Resume && req.After > run.Version {
		if f.sub != nil {
			f.sub.Close()
		}
		return nil, protocol.Errorf(protocol.EInvalid, "Last-Event-ID %d is ahead of the run (its last event is %d); reconnect without it.", req.After, run.Version)
	}
	if f.sub == nil {
		f.sub = e.hub.Subscribe(run.ID)
	}
	f.run, f.last = run, req.After
	return f, nil
}

// Close ends the follow's subscription (Items does when it ends).
func (f *Follower) Close() { f.sub.Close() }

// Items yields the follow: the first frame (the current one, From's, or
// the replayed events after the resume point), then a frame per event and
// the task's progress reports, until a frame whose status Until holds,
// the subscription ends, Stop is closed or ctx is done (then it just
// ends). An end other than the run's is an End item.
func (f *Follower) Items(ctx context.Context) iter.Seq[FollowItem] {
	return func(yield func(FollowItem) bool) {
		defer f.sub.Close()
		e, run := f.e, f.run
		switch {
		case f.req.From != nil:
			if !f.yieldCurrent(run, yield) {
				return
			}
		case f.req.Resume:
			if done := f.catchUp(ctx, yield); done {
				return
			}
			// Resumed at (or past) the run's terminal event: nothing is left to send.
			if cur, err := e.GetRun(ctx, run.ID); err == nil && protocol.Terminal(cur.Status()) && f.last >= cur.Version {
				return
			}
		default:
			// Read again (the run may have moved since Follow looked it
			// up), with its pending timers: the current frame names them.
			cur, err := e.GetRun(ctx, run.ID)
			if err == nil {
				err = e.loadTimers(ctx, cur)
			}
			if err != nil {
				yield(f.end(EndError, protocol.ErrorHint(err), err))
				return
			}
			f.last = cur.Version
			if !f.yieldCurrent(cur, yield) {
				return
			}
		}
		f.live(ctx, yield)
	}
}

// yieldCurrent yields r's current frame and reports whether to go on.
func (f *Follower) yieldCurrent(r *Run, yield func(FollowItem) bool) bool {
	fr := &FollowFrame{Kind: FrameCurrent, Def: r.Def, e: f.e, base: f.req.Base, frame: f.e.Frame(r, f.req.Base), built: true}
	return yield(FollowItem{ID: r.Version, Frame: fr}) && !f.req.Until(r.Status())
}

func (f *Follower) end(reason, hint string, err error) FollowItem {
	return FollowItem{ID: f.last, End: &FollowEnd{Reason: reason, Hint: hint, Err: err}}
}

// catchUpPage is how many events a follow reads from the log at a time.
const catchUpPage = 100

// catchUp yields every stored event after f.last. It reports whether the
// follow is over (Until held, the consumer stopped, or an error was
// yielded). It reads the log a page at a time (catchUpPage events, and at
// most store.MaxPageBytes of records), yielding each frame before the
// next: it never holds more than one page.
func (f *Follower) catchUp(ctx context.Context, yield func(FollowItem) bool) bool {
	e, run := f.e, f.run
	replay := e.NewReplay(run.Def, f.req.Base)
	for {
		evs, err := e.Events(ctx, run.ID, f.last, catchUpPage)
		if err != nil {
			yield(f.end(EndError, protocol.ErrorHint(err), err))
			return true
		}
		if len(evs) == 0 {
			return false
		}
		for i := range evs {
			ev := &evs[i]
			e.FollowVersion(ctx, run, ev)
			replay.Follow(run.Def)
			fr, err := replay.Frame(ev)
			if err != nil {
				yield(f.end(EndError, protocol.ErrorHint(err), err))
				return true
			}
			f.last = ev.Seq
			if !yield(FollowItem{ID: ev.Seq, Frame: &FollowFrame{Kind: FrameReplayed, Def: run.Def, e: e, base: f.req.Base, frame: fr, built: true}}) {
				return true
			}
			if f.req.Until(StatusAfter(run.Def, ev)) {
				return true
			}
		}
	}
}

// resumeHint is the hint of an end the client recovers from by resuming.
func resumeHint(what string, last int64) string {
	return what + " Reconnect with Last-Event-ID: " + strconv.FormatInt(last, 10) + " to resume without a gap."
}

// live yields published messages until Until holds for a frame, the
// consumer stops, the subscription ends, Stop is closed or ctx is done.
func (f *Follower) live(ctx context.Context, yield func(FollowItem) bool) {
	e, run := f.e, f.run
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.req.Stop:
			yield(f.end(EndShutdown, resumeHint("The server is shutting down.", f.last), nil))
			return
		case <-f.req.Heartbeat:
			if !yield(FollowItem{ID: f.last, Heartbeat: true}) {
				return
			}
		case m, ok := <-f.sub.C:
			if !ok {
				if f.sub.Dropped() {
					yield(f.end(EndSlowConsumer, resumeHint("This stream fell too far behind and was cut off.", f.last), nil))
				} else {
					yield(f.end(EndClosed, "", nil))
				}
				return
			}
			if m.Progress != nil {
				p := *m.Progress
				if p.ID < f.last {
					p.ID = f.last
				}
				if !yield(FollowItem{ID: p.ID, Progress: &p}) {
					return
				}
				continue
			}
			ev := m.Event
			if ev == nil || ev.Seq <= f.last {
				continue // already sent (replayed from the store)
			}
			if ev.Seq > f.last+1 {
				// A gap (events committed by another process): fill it from the store.
				if f.catchUp(ctx, yield) {
					return
				}
				if ev.Seq <= f.last {
					continue
				}
			}
			e.FollowVersion(ctx, run, ev)
			f.last = ev.Seq
			if !yield(FollowItem{ID: ev.Seq, Frame: &FollowFrame{Kind: FrameLive, Def: run.Def, Event: ev, e: e, base: f.req.Base}}) {
				return
			}
			if f.req.Until(StatusAfter(run.Def, ev)) {
				return
			}
		}
	}
}
