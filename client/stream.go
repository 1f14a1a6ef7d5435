package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// Stream follows the run's NDJSON stream (GET /runs/{id}/stream). The
// iterator yields the run's current frame first (or, with LastEventID, every
// frame after that event), then a frame per change, progress reports of
// background tasks, heartbeats, and the server's end lines; it returns after
// yielding a frame with a terminal status (completed or failed).
//
// When the connection drops, or the server ends the stream with a
// "shutdown" or "slow_consumer" line, the iterator reconnects with
// Last-Event-ID set to the id of the last frame it yielded, sent back as
// the server wrote it (an opaque token), so no frame is lost. Ids are not
// assumed to grow across connections (the reference servers number the
// lines of every connection from "0"): after a reconnect, a frame whose id
// is above the last one's is new, and any other frame is skipped only when
// it shows the run as the last frame yielded did (the server's replay of
// the current frame), so a run that changed while disconnected is always
// seen. It gives up after opts.MaxRetries attempts in a
// row that deliver nothing, waiting opts.Backoff (doubling) in between, and
// then yields an error wrapping ErrStreamEnded. Errors the server answers
// (404 unknown run, 400 bad Last-Event-ID, 401/403) are yielded as *Error
// without retrying. Cancelling ctx ends the stream; the iterator then
// yields ctx's error. Stop early by breaking out of the loop.
func (c *Client) Stream(ctx context.Context, runID string, opts *StreamOptions) iter.Seq2[StreamItem, error] {
	o := opts.WithDefaults()
	return func(yield func(StreamItem, error) bool) {
		p, err := c.runPath(runID, "stream")
		if err != nil {
			yield(StreamItem{}, err)
			return
		}
		st := &streamState{last: o.LastEventID, resume: o.LastEventID > 0}
		if st.resume {
			st.lastRaw, st.numeric = strconv.FormatInt(o.LastEventID, 10), true
		}
		failures := 0
		for {
			got, err := c.streamOnce(ctx, p, st, o.IdleTimeout, yield)
			if st.stop {
				return
			}
			if ctx.Err() != nil {
				yield(StreamItem{}, fmt.Errorf("stream of run %s: %w", runID, ctx.Err()))
				return
			}
			var ae *Error
			if errors.As(err, &ae) && !retryable(ae.Status) {
				yield(StreamItem{}, err)
				return
			}
			if got {
				failures = 0
			} else {
				failures++
			}
			if failures > o.MaxRetries {
				if err == nil {
					err = errors.New("the connection closed without data")
				}
				yield(StreamItem{}, fmt.Errorf("%w: run %s after %d reconnects: %w", ErrStreamEnded, runID, o.MaxRetries, err))
				return
			}
			if !sleepBackoff(ctx, o, failures) {
				yield(StreamItem{}, fmt.Errorf("stream of run %s: %w", runID, ctx.Err()))
				return
			}
		}
	}
}

// streamState is what survives reconnects.
type streamState struct {
	last    int64  // id of the last frame yielded
	lastRaw string // that id as the server wrote it (sent as Last-Event-ID)
	numeric bool   // lastRaw is a number
	resume  bool   // reconnect with Last-Event-ID: lastRaw
	stop    bool   // the consumer stopped, or the run ended, or a fatal end line
	// lastFrame is the last frame yielded, encoded without its id: what
	// a replay after a reconnect is recognised by.
	lastFrame []byte
	// replay is set while a resumed connection has yielded no frame yet:
	// its first frames may repeat the last one yielded.
	replay bool
}

// repeats reports whether a frame read while st.replay is the server's
// replay of the last frame yielded: not when its id is a number above the
// last one's (a server whose ids grow, like asmp's), else when it shows
// the run as the last frame did.
func (st *streamState) repeats(f *protocol.StreamFrame, id eventID, enc []byte) bool {
	if st.numeric && id.numeric && f.ID > st.last {
		return false
	}
	return st.lastFrame != nil && bytes.Equal(enc, st.lastFrame)
}

func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

func sleepBackoff(ctx context.Context, o StreamOptions, failures int) bool {
	d := o.Backoff
	for i := 1; i < failures && d < o.MaxBackoff; i++ {
		d *= 2
	}
	if failures == 0 {
		d = o.Backoff / 2 // a resumable end or a drop after progress: come back quickly
	}
	d = min(d, o.MaxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// streamOnce reads one connection. got reports whether it delivered
// anything new (a frame, progress or a heartbeat; an end line alone does not
// count, so a server that keeps ending streams at once exhausts the retries).
func (c *Client) streamOnce(ctx context.Context, p string, st *streamState, idle time.Duration, yield func(StreamItem, error) bool) (got bool, err error) {
	h := http.Header{"Accept": {"application/x-ndjson"}}
	if st.resume && st.lastRaw != "" {
		h.Set("Last-Event-ID", st.lastRaw)
	}
	// The connection's own context: cancelled when it stays silent too long.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	alive := func() {}
	if idle > 0 {
		t := time.AfterFunc(idle, cancel)
		defer t.Stop()
		alive = func() { t.Reset(idle) }
	}
	resp, err := c.send(cctx, http.MethodGet, p, nil, h)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		return false, httpError(http.MethodGet, p, resp.StatusCode, b)
	}
	st.replay = st.resume
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	for sc.Scan() {
		alive()
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		item, id, err := parseStreamLine(line)
		if err != nil {
			return got, err // a garbled line: reconnect and resume
		}
		switch {
		case item.Frame != nil:
			enc, err := json.Marshal(item.Frame.Frame)
			if err != nil {
				return got, fmt.Errorf("stream frame: %w", err)
			}
			if st.replay && st.repeats(item.Frame, id, enc) {
				continue // yielded before the reconnect
			}
			got = true
			st.replay = false
			st.last, st.lastRaw, st.numeric, st.resume, st.lastFrame = item.Frame.ID, id.raw, id.numeric, true, enc
			if !yield(item, nil) || protocol.Terminal(item.Frame.Status) {
				st.stop = true
				return got, nil
			}
		case item.End != nil:
			if !yield(item, nil) {
				st.stop = true
				return got, nil
			}
			if !item.End.Resumable() {
				st.stop = true
				yield(StreamItem{}, &Error{Status: http.StatusInternalServerError, Code: protocol.EInternal, Hint: item.End.Hint})
				return got, nil
			}
			return got, nil // reconnect
		case item.Progress != nil || item.Heartbeat != nil:
			got = true
			if !yield(item, nil) {
				st.stop = true
				return got, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return got, fmt.Errorf("the stream was silent for %s: %w", idle, err)
		}
		return got, fmt.Errorf("reading the stream: %w", err)
	}
	return got, io.ErrUnexpectedEOF
}

// ParseStreamLine decodes one NDJSON stream line. Lines of unknown shape
// give an empty item and no error, so newer servers can add line kinds.
// The line's "id" may be a number or a string (the reference servers send
// "0"): a string of digits is taken as that number; any other string gives
// ID 0 (the stream still resumes after it, sending it back as
// Last-Event-ID).
func ParseStreamLine(line []byte) (StreamItem, error) {
	it, _, err := parseStreamLine(line)
	return it, err
}

// eventID is a stream line's "id" as the server wrote it.
type eventID struct {
	n       int64
	raw     string // the id as text: digits, or the string the server sent
	numeric bool   // raw is an integer (n)
}

// UnmarshalJSON accepts a JSON number, a JSON string, or null.
func (e *eventID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("stream line id: %w", err)
		}
	}
	e.raw = s
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		e.n, e.numeric = n, true
		return nil
	}
	if len(b) > 0 && b[0] != '"' {
		return fmt.Errorf("stream line id %s is neither an integer nor a string", s)
	}
	return nil
}

func parseStreamLine(line []byte) (StreamItem, eventID, error) {
	var probe struct {
		Heartbeat *bool   `json:"heartbeat"`
		End       *string `json:"end"`
		Progress  *string `json:"progress"`
		State     *string `json:"state"`
	}
	if err := decodeJSON(line, &probe, "stream line"); err != nil {
		return StreamItem{}, eventID{}, err
	}
	// Each wrapper's own "id" (an eventID, which takes a string too) hides
	// the int64 id of the type it embeds.
	var it StreamItem
	var id eventID
	var err error
	switch {
	case probe.End != nil:
		w := struct {
			ID eventID `json:"id"`
			*StreamEnd
		}{StreamEnd: &StreamEnd{}}
		err = decodeJSON(line, &w, "stream end line")
		id, it.End = w.ID, w.StreamEnd
		it.End.ID = id.n
	case probe.Heartbeat != nil:
		w := struct {
			ID eventID `json:"id"`
			*protocol.Heartbeat
		}{Heartbeat: &protocol.Heartbeat{}}
		err = decodeJSON(line, &w, "heartbeat line")
		id, it.Heartbeat = w.ID, w.Heartbeat
		it.Heartbeat.ID = id.n
	case probe.Progress != nil:
		w := struct {
			ID eventID `json:"id"`
			*protocol.Progress
		}{Progress: &protocol.Progress{}}
		err = decodeJSON(line, &w, "progress line")
		id, it.Progress = w.ID, w.Progress
		it.Progress.ID = id.n
	case probe.State != nil:
		w := struct {
			ID eventID `json:"id"`
			*protocol.Frame
		}{Frame: &protocol.Frame{}}
		err = decodeJSON(line, &w, "stream frame")
		id = w.ID
		it.Frame = &protocol.StreamFrame{ID: id.n, Frame: *w.Frame}
		if err == nil {
			normalizeFrame(&it.Frame.Frame)
		}
	}
	if err != nil {
		return StreamItem{}, eventID{}, err
	}
	return it, id, nil
}
