package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/server/internal/encoded"
)

// lastEventID reads Last-Event-ID (or X-Last-Event-ID, or ?last_event_id=):
// an integer, bare or quoted. ok is false when the client sent none.
func lastEventID(r *http.Request) (id int64, ok bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.Header.Get("X-Last-Event-ID")
	}
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, false, nil
	}
	// The reference servers' ids are JSON strings ("id": "3"); a client
	// may send one back quoted.
	n, perr := strconv.ParseInt(strings.Trim(strings.TrimSpace(v), `"`), 10, 64)
	if perr != nil || n < 0 {
		return 0, false, protocol.Errorf(protocol.EInvalid, "Last-Event-ID must be the id of the last stream line you received (an integer), not %q.", v)
	}
	return n, true, nil
}

// streamWriter writes NDJSON lines and flushes each.
type streamWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	last int64 // id of the last event line written
	err  error
}

func newStreamWriter(w http.ResponseWriter, status int) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // streams outlive the server's write timeout
	w.WriteHeader(status)
	sw := &streamWriter{w: w, rc: rc}
	_ = rc.Flush()
	return sw
}

func (sw *streamWriter) line(b []byte) bool {
	if sw.err != nil {
		return false
	}
	if _, err := sw.w.Write(b); err != nil {
		sw.err = err
		return false
	}
	if err := sw.rc.Flush(); err != nil {
		sw.err = err
		return false
	}
	return true
}

func (sw *streamWriter) json(v any) bool {
	bp := linePool.Get().(*[]byte)
	defer linePool.Put(bp)
	b, err := httpx.AppendJSON((*bp)[:0], v)
	if err != nil {
		sw.err = err
		return false
	}
	*bp = append(b, '\n')
	return sw.line(*bp)
}

// linePool holds buffers for the lines a stream encodes itself (the first
// frame, heartbeats, progress), so that an idle stream keeps none.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// streamEnd is the final line of a stream that ends before the run does.
type streamEnd struct {
	ID    int64  `json:"id"`
	End   string `json:"end"`
	Hint  string `json:"hint"`
	RunID string `json:"run_id"`
}

// stream serves GET /runs/{run_id}/stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *call) error {
	run, err := s.loadRun(r, c)
	if err != nil {
		return err
	}
	after, resume, err := lastEventID(r)
	if err != nil {
		return err
	}
	if resume && after > run.Version {
		return protocol.Errorf(protocol.EInvalid, "Last-Event-ID %d is ahead of the run (its last event is %d); reconnect without it.", after, run.Version)
	}
	release, err := s.acquireStream(r)
	if err != nil {
		return err
	}
	defer release()
	// Subscribe first, then read: an event committed in between is seen
	// twice (and skipped by id), never missed.
	sub := s.e.Hub().Subscribe(run.ID)
	defer sub.Close()
	own := *run // catchUp follows the run's versions event by event
	run = &own
	sw := newStreamWriter(w, http.StatusOK)
	if resume {
		sw.last = after
		if done := s.catchUp(r.Context(), sw, run, c.base); done || sw.err != nil {
			return nil
		}
		// Resumed at (or past) the run's terminal event: nothing is left to send.
		if cur, err := s.e.GetRun(r.Context(), run.ID); err == nil && protocol.Terminal(cur.Status()) && sw.last >= cur.Version {
			return nil
		}
	} else {
		cur, err := s.e.GetRun(r.Context(), run.ID)
		if err != nil {
			sw.json(streamEnd{End: "error", Hint: protocol.ErrorHint(err), RunID: run.ID})
			return nil
		}
		sw.json(protocol.StreamFrame{ID: cur.Version, Frame: s.e.Frame(cur, c.base)})
		sw.last = cur.Version
		if protocol.Terminal(cur.Status()) {
			return nil
		}
	}
	s.follow(r, sw, sub, run, c.base, func(status string) bool { return protocol.Terminal(status) })
	return nil
}

// catchUp writes every stored event after sw.last. It reports whether the
// run reached a terminal status (the stream is over). It reads the log a
// page at a time (catchUpPage events, and at most store.MaxPageBytes of
// records), encoding and sending each frame before the next: it never
// holds more than one page.
func (s *Server) catchUp(ctx context.Context, sw *streamWriter, run *engine.Run, base string) bool {
	replay := s.e.NewReplay(run.Def, base)
	var buf []byte // one buffer for every line: a backlog of large frames makes no garbage per frame
	for {
		evs, err := s.e.Events(ctx, run.ID, sw.last, catchUpPage)
		if err != nil {
			sw.json(streamEnd{ID: sw.last, End: "error", Hint: protocol.ErrorHint(err), RunID: run.ID})
			return true
		}
		if len(evs) == 0 {
			return false
		}
		for i := range evs {
			ev := &evs[i]
			s.e.FollowVersion(ctx, run, ev)
			replay.Follow(run.Def)
			f, err := replay.Frame(ev)
			if err != nil {
				sw.json(streamEnd{ID: sw.last, End: "error", Hint: protocol.ErrorHint(err), RunID: run.ID})
				return true
			}
			b, err := encoded.AppendFrameLine(buf[:0], ev.Seq, f)
			if err != nil || !sw.line(b) {
				return true
			}
			if cap(b) <= maxKeptLine {
				buf = b
			}
			sw.last = ev.Seq
			if protocol.Terminal(engine.StatusAfter(run.Def, ev)) {
				return true
			}
		}
	}
}

// catchUpPage is how many events a resumed stream reads at a time.
const catchUpPage = 100

// maxKeptLine bounds the line buffer a replay keeps between frames.
const maxKeptLine = 8 << 20

// follow relays live messages until stop(status) holds for a written
// frame, the client goes away, the subscriber is dropped, or the server
// shuts down.
func (s *Server) follow(r *http.Request, sw *streamWriter, sub *engine.Subscription, run *engine.Run, base string, stop func(status string) bool) {
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	own := *run // the definition follows the run's migrations: not shared
	run = &own
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			sw.json(streamEnd{ID: sw.last, End: "shutdown", RunID: run.ID,
				Hint: "The server is shutting down. Reconnect with Last-Event-ID: " + strconv.FormatInt(sw.last, 10) + " to resume without a gap."})
			return
		case <-hb.C:
			if !sw.json(protocol.Heartbeat{ID: sw.last, Heartbeat: true}) {
				return
			}
		case m, ok := <-sub.C:
			if !ok {
				if sub.Dropped() {
					sw.json(streamEnd{ID: sw.last, End: "slow_consumer", RunID: run.ID,
						Hint: "This stream fell too far behind and was cut off. Reconnect with Last-Event-ID: " + strconv.FormatInt(sw.last, 10) + " to resume without a gap."})
				}
				return
			}
			if m.Progress != nil {
				p := *m.Progress
				if p.ID < sw.last {
					p.ID = sw.last
				}
				if !sw.json(p) {
					return
				}
				continue
			}
			ev := m.Event
			if ev.Seq <= sw.last {
				continue // already sent (replayed from the store)
			}
			if ev.Seq > sw.last+1 {
				// A gap (events committed by another process): fill it from the store.
				if s.catchUp(r.Context(), sw, run, base) || sw.err != nil {
					return
				}
				if ev.Seq <= sw.last {
					continue
				}
			}
			s.e.FollowVersion(r.Context(), run, ev)
			b, err := s.lines.Line(s.e, run.Def, ev, base)
			if err != nil || !sw.line(b) {
				return
			}
			sw.last = ev.Seq
			if stop(engine.StatusAfter(run.Def, ev)) {
				return
			}
		}
	}
}

// transitionStream applies a transition for a client that accepts NDJSON:
// if the run ends up processing, it answers 202 and streams frames on the
// same connection until the run leaves processing; otherwise it answers
// with the frame as usual.
func (s *Server) transitionStream(w http.ResponseWriter, r *http.Request, c *call, runID, action string, input map[string]any, opts engine.TransitionOptions) error {
	release, err := s.acquireStream(r)
	if err != nil {
		return err
	}
	defer release()
	sub := s.e.Hub().Subscribe(runID)
	defer sub.Close()
	next, err := s.e.Transition(r.Context(), runID, action, input, opts)
	if err != nil {
		return err
	}
	if next.Status() != protocol.StatusProcessing {
		writeFrame(w, http.StatusOK, s.e.Frame(next, c.base), next.ETag())
		return nil
	}
	w.Header().Set("ETag", next.ETag())
	sw := newStreamWriter(w, http.StatusAccepted)
	sw.json(protocol.StreamFrame{ID: next.Version, Frame: s.e.Frame(next, c.base)})
	sw.last = next.Version
	s.follow(r, sw, sub, next, c.base, func(status string) bool { return status != protocol.StatusProcessing })
	return nil
}
