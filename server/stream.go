package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
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

// stream serves GET /runs/{run_id}/stream: it writes what the engine's
// follow of the run yields (engine.Follow) as NDJSON lines.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := requireRunID(r)
	if err != nil {
		return err
	}
	after, resume, err := lastEventID(r)
	if err != nil {
		if _, lerr := s.e.LookupStored(r.Context(), id, c.wf); lerr != nil {
			return lerr // an unknown run is a 404 first
		}
		return err
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	fl, err := s.e.Follow(r.Context(), engine.FollowRequest{RunID: id, Scope: c.wf, Base: c.base,
		After: after, Resume: resume, Heartbeat: hb.C, Stop: s.done})
	if err != nil {
		return err
	}
	release, err := s.acquireStream(r)
	if err != nil {
		fl.Close()
		return err
	}
	defer release()
	sw := newStreamWriter(w, http.StatusOK)
	s.writeFollow(r.Context(), sw, fl, id, c.base)
	return nil
}

// writeFollow writes the items of fl as stream lines until it ends or a
// write fails: the current frame and heartbeats and progress encoded here,
// replayed frames into one reused buffer, live events through the shared
// encodings of s.lines.
func (s *Server) writeFollow(ctx context.Context, sw *streamWriter, fl *engine.Follower, runID, base string) {
	var buf []byte // one buffer for every replayed line: a backlog of large frames makes no garbage per frame
	for it := range fl.Items(ctx) {
		var ok bool
		switch {
		case it.End != nil:
			if it.End.Reason != engine.EndClosed {
				sw.json(streamEnd{ID: it.ID, End: it.End.Reason, Hint: it.End.Hint, RunID: runID})
			}
			return
		case it.Heartbeat:
			ok = sw.json(protocol.Heartbeat{ID: it.ID, Heartbeat: true})
		case it.Progress != nil:
			ok = sw.json(*it.Progress)
		case it.Frame.Kind == engine.FrameLive:
			b, err := s.lines.Line(s.e, it.Frame.Def, it.Frame.Event, base)
			ok = err == nil && sw.line(b)
		case it.Frame.Kind == engine.FrameReplayed:
			f, _ := it.Frame.Frame()
			b, err := encoded.AppendFrameLine(buf[:0], it.ID, f)
			ok = err == nil && sw.line(b)
			if cap(b) <= maxKeptLine {
				buf = b
			}
		default:
			f, _ := it.Frame.Frame()
			ok = sw.json(protocol.StreamFrame{ID: it.ID, Frame: f})
		}
		if !ok {
			return
		}
		sw.last = it.ID
	}
}

// maxKeptLine bounds the line buffer a replay keeps between frames.
const maxKeptLine = 8 << 20

// transitionStream applies a transition for a client that accepts NDJSON:
// if the run ends up processing, it answers 202 and streams frames on the
// same connection until the run leaves processing; otherwise it answers
// with the frame as usual.
func (s *Server) transitionStream(w http.ResponseWriter, r *http.Request, c *call, req engine.TransitionRequest) error {
	var release func()
	var sub *engine.Subscription
	defer func() {
		if release != nil {
			release()
		}
	}()
	req.Before = func() error {
		var err error
		if release, err = s.acquireStream(r); err != nil {
			return err
		}
		sub = s.e.Hub().Subscribe(req.RunID)
		return nil
	}
	next, err := s.e.Submit(r.Context(), req)
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		return err
	}
	if next.Status() != protocol.StatusProcessing {
		sub.Close()
		writeFrame(w, http.StatusOK, s.e.Frame(next, c.base), next.ETag())
		return nil
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	fl, err := s.e.Follow(r.Context(), engine.FollowRequest{RunID: req.RunID, Scope: c.wf, Base: c.base, From: next, Sub: sub,
		Until: func(status string) bool { return status != protocol.StatusProcessing }, Heartbeat: hb.C, Stop: s.done})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", next.ETag())
	sw := newStreamWriter(w, http.StatusAccepted)
	s.writeFollow(r.Context(), sw, fl, req.RunID, c.base)
	return nil
}
