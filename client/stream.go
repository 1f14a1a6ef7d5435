package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
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
// Last-Event-ID set to the last frame it yielded, so every frame is yielded
// exactly once and in order. It gives up after opts.MaxRetries attempts in a
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
	last   int64 // id of the last frame yielded
	resume bool  // reconnect with Last-Event-ID: last
	stop   bool  // the consumer stopped, or the run ended, or a fatal end line
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
	if st.resume {
		h.Set("Last-Event-ID", strconv.FormatInt(st.last, 10))
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
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	for sc.Scan() {
		alive()
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		item, err := ParseStreamLine(line)
		if err != nil {
			return got, err // a garbled line: reconnect and resume
		}
		switch {
		case item.Frame != nil:
			if st.resume && item.Frame.ID <= st.last {
				continue // already yielded before a reconnect
			}
			got = true
			st.last, st.resume = item.Frame.ID, true
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
func ParseStreamLine(line []byte) (StreamItem, error) {
	var probe struct {
		Heartbeat *bool   `json:"heartbeat"`
		End       *string `json:"end"`
		Progress  *string `json:"progress"`
		State     *string `json:"state"`
	}
	if err := decodeJSON(line, &probe, "stream line"); err != nil {
		return StreamItem{}, err
	}
	var it StreamItem
	var err error
	switch {
	case probe.End != nil:
		it.End = &StreamEnd{}
		err = decodeJSON(line, it.End, "stream end line")
	case probe.Heartbeat != nil:
		it.Heartbeat = &protocol.Heartbeat{}
		err = decodeJSON(line, it.Heartbeat, "heartbeat line")
	case probe.Progress != nil:
		it.Progress = &protocol.Progress{}
		err = decodeJSON(line, it.Progress, "progress line")
	case probe.State != nil:
		it.Frame = &protocol.StreamFrame{}
		err = decodeJSON(line, it.Frame, "stream frame")
		if err == nil {
			normalizeFrame(&it.Frame.Frame)
		}
	}
	if err != nil {
		return StreamItem{}, err
	}
	return it, nil
}
