package client

import (
	"context"
	"encoding/json"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
)

// Backend is what a client of runs needs: the operations the terminal UI
// and the agent commands use. *Client implements it over HTTP, package
// client/embedded in-process. Implementations are safe for concurrent use. Every error
// they return for a refused request is an *Error.
type Backend interface {
	// Discover returns the discovery frame: one start:<workflow_id> action
	// per served workflow. It creates no run.
	Discover(ctx context.Context) (*RunFrame, error)
	// Workflows returns the catalog of served workflows.
	Workflows(ctx context.Context) ([]WorkflowInfo, error)
	// StartRun creates a run of workflowID ("" = the server's default) with
	// initial data (nil = none) and returns its first frame.
	StartRun(ctx context.Context, workflowID string, data map[string]any) (*RunFrame, error)
	// Frame returns the run's current frame and version.
	Frame(ctx context.Context, runID string) (*RunFrame, error)
	// CLI returns the run's dynamic CLI object for its current state.
	CLI(ctx context.Context, runID string) (protocol.CLI, error)
	// Transition fires action with input (nil = {}) and returns the new
	// frame. 403 when the action is not offered now or a guard refuses, 400
	// when input does not match what it expects, 409 when opts.IfMatch is
	// stale.
	Transition(ctx context.Context, runID, action string, input map[string]any, opts *TransitionOptions) (*RunFrame, error)
	// TransitionHref POSTs input to an href of a frame (a next_states href,
	// or a discovery start href) and returns the frame it answers.
	TransitionHref(ctx context.Context, href string, input map[string]any, opts *TransitionOptions) (*RunFrame, error)
	// InvokeTool calls a tool bound to the run's current state and returns
	// its result (decoded JSON: numbers are int64 or float64).
	InvokeTool(ctx context.Context, runID, tool string, input map[string]any) (any, error)
	// Resource reads a resource bound to the run's current state.
	Resource(ctx context.Context, runID, path string) (*Content, error)
	// Events returns the run's history.
	Events(ctx context.Context, runID string) (*EventLog, error)
	// Stream follows the run: its current frame, then every change, until
	// a terminal frame. See (*Client).Stream for the contract.
	Stream(ctx context.Context, runID string, opts *StreamOptions) iter.Seq2[StreamItem, error]
}

// RunFrame is a State Frame together with the run version it shows.
type RunFrame struct {
	protocol.Frame
	// ETag is the run's version as the server sent it (a quoted entity tag
	// such as "3"); pass it as TransitionOptions.IfMatch to act only on
	// this frame. "" for the discovery frame.
	ETag string `json:"-"`
}

// Version returns the run version of ETag (0 when there is none).
func (f *RunFrame) Version() int64 { return ParseETag(f.ETag) }

// Streamed returns the RunFrame of a frame read from the stream after the
// frame f was shown. A stream id above f's version is the run's new
// version (asmp's stream ids are its versions) and becomes the ETag; any
// other id says nothing of the version (the reference servers number each
// connection's lines from "0"), and the frame has no ETag, so a transition
// from it sends no If-Match.
func (f *RunFrame) Streamed(sf *protocol.StreamFrame) *RunFrame {
	etag := ""
	if f == nil || sf.ID > f.Version() {
		etag = strconv.Quote(strconv.FormatInt(sf.ID, 10))
	}
	return &RunFrame{Frame: sf.Frame, ETag: etag}
}

// ParseETag returns the run version an entity tag names (`"3"`, `W/"3"`
// and `3` all name 3), or 0 when it names none.
func ParseETag(etag string) int64 {
	v := strings.TrimPrefix(strings.TrimSpace(etag), "W/")
	n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// TransitionOptions qualify a transition. A nil *TransitionOptions means
// none.
type TransitionOptions struct {
	// IfMatch, when set, is the ETag of the frame the caller decided on
	// (RunFrame.ETag; `"3"`, `W/"3"` and `3` are accepted). If the run has
	// moved on, the transition fails with a 409 *Error (IsConflict).
	IfMatch string
}

// WorkflowInfo is one entry of the workflow catalog.
type WorkflowInfo = protocol.WorkflowInfo

// Content is a resource's body and media type.
type Content struct {
	Body     []byte
	MimeType string
}

// EventLog is a run's history (GET /runs/{run_id}/events).
type EventLog = protocol.EventLog

// Event is one entry of a run's history: its creation, a transition, or a
// task failure.
type Event = protocol.Event

// StreamOptions qualify Stream. A nil *StreamOptions means defaults.
type StreamOptions struct {
	// LastEventID, when > 0, resumes after that event: the stream replays
	// every later change instead of starting with the current frame.
	LastEventID int64
	// MaxRetries bounds the reconnects in a row that fail or deliver
	// nothing (0 = DefaultStreamRetries; < 0 = never reconnect).
	MaxRetries int
	// Backoff is the wait before the first reconnect; it doubles on every
	// further attempt up to MaxBackoff (0 = DefaultBackoff).
	Backoff time.Duration
	// MaxBackoff caps the wait between reconnects (0 = DefaultMaxBackoff).
	MaxBackoff time.Duration
	// IdleTimeout is how long a connection may stay silent (no frame,
	// progress or heartbeat line) before it is taken for dead and the
	// stream reconnects; servers send heartbeats well within it
	// (0 = DefaultIdleTimeout; < 0 = wait forever). An embedded backend has
	// no connection and ignores it.
	IdleTimeout time.Duration
}

// Stream defaults.
const (
	DefaultStreamRetries = 8
	DefaultBackoff       = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultIdleTimeout   = 90 * time.Second
)

// WithDefaults returns the options with every zero field set to its
// default (nil = all defaults), as Stream uses them.
func (o *StreamOptions) WithDefaults() StreamOptions {
	var s StreamOptions
	if o != nil {
		s = *o
	}
	if s.MaxRetries == 0 {
		s.MaxRetries = DefaultStreamRetries
	}
	if s.MaxRetries < 0 {
		s.MaxRetries = 0
	}
	if s.Backoff <= 0 {
		s.Backoff = DefaultBackoff
	}
	if s.MaxBackoff <= 0 {
		s.MaxBackoff = DefaultMaxBackoff
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = DefaultIdleTimeout
	}
	return s
}

// Wait sleeps before reconnect number failures of a stream: Backoff, doubled
// on every further failure up to MaxBackoff, and half of Backoff after a
// drop that had delivered (failures 0). It reports false when ctx ended
// first. o is expected to be the result of WithDefaults.
func (o StreamOptions) Wait(ctx context.Context, failures int) bool {
	return sleepBackoff(ctx, o, failures)
}

// StreamItem is one line of a run's stream. Exactly one of Frame, Progress,
// Heartbeat and End is set.
type StreamItem struct {
	// Frame is the run after a change (or, first, its current frame).
	Frame *protocol.StreamFrame
	// Progress is a report of the run's background task.
	Progress *protocol.Progress
	// Heartbeat is a keep-alive line of an idle stream.
	Heartbeat *protocol.Heartbeat
	// End is the server's last line when it cut the stream before the run
	// ended (shutdown, slow reader). The iterator reconnects after
	// "shutdown" and "slow_consumer" ends by itself; End is informational.
	End *StreamEnd
}

// ID returns the item's event id.
func (it StreamItem) ID() int64 {
	switch {
	case it.Frame != nil:
		return it.Frame.ID
	case it.Progress != nil:
		return it.Progress.ID
	case it.Heartbeat != nil:
		return it.Heartbeat.ID
	case it.End != nil:
		return it.End.ID
	}
	return 0
}

// MarshalJSON writes the item as the stream line it came from.
func (it StreamItem) MarshalJSON() ([]byte, error) {
	switch {
	case it.Frame != nil:
		return json.Marshal(it.Frame)
	case it.Progress != nil:
		return json.Marshal(it.Progress)
	case it.Heartbeat != nil:
		return json.Marshal(it.Heartbeat)
	case it.End != nil:
		return json.Marshal(it.End)
	}
	return []byte("{}"), nil
}

// StreamEnd is the final line of a stream that ends before the run does.
type StreamEnd struct {
	ID    int64  `json:"id"`
	End   string `json:"end"` // "shutdown", "slow_consumer", "error"
	Hint  string `json:"hint"`
	RunID string `json:"run_id,omitempty"`
}

// Resumable reports whether the stream can be resumed after this end line.
func (e *StreamEnd) Resumable() bool {
	return e.End == "shutdown" || e.End == "slow_consumer"
}
