package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
)

// BaseURL is the base URL of the frames a *Client builds: their hrefs look
// like local://asmp/runs/{run_id}/transitions/{action}, and TransitionHref
// follows them.
const BaseURL = "local://asmp"

// Actor is the actor a *Client records on the runs it drives.
const Actor = "local"

// Client drives workflows in-process through an *engine.Engine, with no
// server: the embedded counterpart of *client.Client. It behaves as the
// HTTP API does (same frames, same errors with the same statuses and hints,
// inputs and results passed through JSON), so code and tests written
// against client.Backend run unchanged: it translates, and the engine's
// use cases (Lookup, Submit, Follow) decide. Background tasks run only
// while the engine's workers run (engine.StartWorkers).
type Client struct {
	e        *engine.Engine
	base     string
	actor    string
	scopes   []string
	maxDepth int
}

var _ client.Backend = (*Client)(nil)

// Options qualify a Client. The zero value (or nil) means BaseURL, Actor
// and every scope.
type Options struct {
	// Base is the base URL of the frames' hrefs (BaseURL when ""), which
	// TransitionHref follows. The /mcp endpoint of a server gives the
	// server's own base, so frames look as over HTTP.
	Base string
	// Actor is recorded on the runs the client drives (Actor when "").
	Actor string
	// Scopes are passed to row-bound tools as the caller's (nil = all).
	Scopes []string
	// MaxDepth bounds the nesting of inputs, as a server's MaxDepth does
	// (0 = protocol's default).
	MaxDepth int
}

// New returns a client.Backend that drives eng's workflows in-process.
func New(eng *engine.Engine) *Client { return NewWith(eng, nil) }

// NewWith is New with options.
func NewWith(eng *engine.Engine, o *Options) *Client {
	c := &Client{e: eng, base: BaseURL, actor: Actor}
	if o != nil {
		if o.Base != "" {
			c.base = strings.TrimRight(o.Base, "/")
		}
		if o.Actor != "" {
			c.actor = o.Actor
		}
		c.scopes, c.maxDepth = o.Scopes, o.MaxDepth
	}
	return c
}

// Engine returns the engine the backend drives.
func (l *Client) Engine() *engine.Engine { return l.e }

// BaseURL returns the base URL of the frames the client builds.
func (l *Client) BaseURL() string { return l.base }

func (l *Client) runFrame(r *engine.Run) *client.RunFrame {
	return &client.RunFrame{Frame: jsonFrame(l.e.Frame(r, l.base)), ETag: r.ETag()}
}

// jsonFrame makes f's data look as it does after a trip through JSON.
func jsonFrame(f protocol.Frame) protocol.Frame {
	if f.Data != nil {
		if v, err := roundTrip(f.Data); err == nil {
			f.Data, _ = v.(map[string]any)
		}
	}
	return f
}

// jsonInput passes input through JSON as the server would receive it.
func jsonInput(input map[string]any, maxDepth int) (map[string]any, error) {
	if input == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, &client.Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "The input cannot be sent as JSON: " + err.Error()}
	}
	m, err := protocol.DecodeObject(b, maxDepth)
	if err != nil {
		return nil, fromProtocol(err)
	}
	return m, nil
}

// Discover returns the discovery frame.
func (l *Client) Discover(ctx context.Context) (*client.RunFrame, error) {
	return &client.RunFrame{Frame: l.e.Discovery(l.base, "")}, nil
}

// Workflows returns the served workflows, each with its stored versions.
func (l *Client) Workflows(ctx context.Context) ([]client.WorkflowInfo, error) {
	cat := l.e.Catalog(l.base, "")
	for i := range cat {
		vs, err := l.e.Versions(ctx, l.base, cat[i].WorkflowID)
		if err != nil {
			return nil, fromProtocol(err)
		}
		cat[i].Versions = vs
	}
	return cat, nil
}

// StartRun creates a run.
func (l *Client) StartRun(ctx context.Context, workflowID string, data map[string]any) (*client.RunFrame, error) {
	if data != nil {
		var err error
		if data, err = jsonInput(data, l.maxDepth); err != nil {
			return nil, err
		}
	}
	r, err := l.e.StartRun(ctx, workflowID, data, engine.StartOptions{Actor: l.actor})
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(r), nil
}

// Frame returns the run's current frame.
func (l *Client) Frame(ctx context.Context, runID string) (*client.RunFrame, error) {
	r, err := l.e.Lookup(ctx, runID, "")
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(r), nil
}

// CLI returns the run's CLI object.
func (l *Client) CLI(ctx context.Context, runID string) (protocol.CLI, error) {
	r, err := l.e.Lookup(ctx, runID, "")
	if err != nil {
		return protocol.CLI{}, fromProtocol(err)
	}
	return l.e.CLI(r), nil
}

// Transition fires action on the run.
func (l *Client) Transition(ctx context.Context, runID, action string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	return l.transition(ctx, "", runID, action, input, opts)
}

// transition submits a transition request to the engine (engine.Submit),
// in the API scoped to scope ("" = the root).
func (l *Client) transition(ctx context.Context, scope, runID, action string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	req := engine.TransitionRequest{RunID: runID, Action: action, Actor: l.actor, Scope: scope, MaxDepth: l.maxDepth}
	if opts != nil {
		req.IfMatch = opts.IfMatch
	}
	if input == nil {
		input = map[string]any{}
	}
	req.Body, req.BodyErr = json.Marshal(input)
	if req.BodyErr != nil {
		req.BodyErr = protocol.Errorf(protocol.EInvalid, "The input cannot be sent as JSON: %s", req.BodyErr.Error())
	}
	next, err := l.e.Submit(ctx, req)
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(next), nil
}

// TransitionHref follows an href of a frame this backend built: a
// transition href, or a start href of the discovery frame. It only reads
// the href; the engine decides (a run of another workflow under
// /w/{workflow_id}/ is not found there).
func (l *Client) TransitionHref(ctx context.Context, href string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	rest, ok := strings.CutPrefix(href, l.base)
	if !ok {
		return nil, fmt.Errorf("href %q is not a local href (they start with %s)", href, l.base)
	}
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, fmt.Errorf("href %q: %w", href, err)
		}
		segs[i] = u
	}
	wf := ""
	if len(segs) >= 2 && segs[0] == "w" {
		wf, segs = segs[1], segs[2:]
	}
	switch {
	case len(segs) == 1 && segs[0] == "runs":
		return l.StartRun(ctx, wf, input)
	case len(segs) == 4 && segs[0] == "runs" && segs[2] == "transitions":
		return l.transition(ctx, wf, segs[1], segs[3], input, opts)
	}
	return nil, &client.Error{Status: http.StatusNotFound, Code: protocol.ENotFound,
		Hint: fmt.Sprintf("No endpoint at POST %s. Follow a next_states href of a frame.", href)}
}

// InvokeTool calls a tool of the run's current state.
func (l *Client) InvokeTool(ctx context.Context, runID, tool string, input map[string]any) (any, error) {
	in, err := jsonInput(input, l.maxDepth)
	if err != nil {
		return nil, err
	}
	res, err := l.e.InvokeTool(ctx, runID, tool, in, engine.ToolOptions{Actor: l.actor, Scopes: l.scopes})
	if err != nil {
		return nil, fromProtocol(err)
	}
	v, err := roundTrip(res)
	if err != nil {
		return nil, fmt.Errorf("tool %s returned a result that is not JSON: %w", tool, err)
	}
	return v, nil
}

// Resource reads a resource of the run's current state.
func (l *Client) Resource(ctx context.Context, runID, path string) (*client.Content, error) {
	c, err := l.e.ReadResource(ctx, runID, strings.TrimLeft(path, "/"), engine.ResourceOptions{})
	if err != nil {
		return nil, fromProtocol(err)
	}
	return &client.Content{Body: c.Body, MimeType: c.MimeType}, nil
}

// Events returns the run's history.
func (l *Client) Events(ctx context.Context, runID string) (*client.EventLog, error) {
	r, err := l.e.Lookup(ctx, runID, "")
	if err != nil {
		return nil, fromProtocol(err)
	}
	// Page by page, as the HTTP client follows next_cursor.
	var log *client.EventLog
	for after := int64(0); ; {
		page, err := l.e.EventLog(ctx, r, after, 1000)
		if err != nil {
			return nil, fromProtocol(err)
		}
		if log == nil {
			log = page
		} else {
			log.Events = append(log.Events, page.Events...)
		}
		if len(page.Events) == 0 {
			return log, nil
		}
		after = page.Events[len(page.Events)-1].ID
	}
}

// Stream follows the run in-process, with the contract of
// (*client.Client).Stream: the current frame (or every frame after
// opts.LastEventID), then a frame per change and progress reports, until a
// terminal frame. It yields what the engine's follow of the run yields
// (engine.Follow); a subscriber that falls too far behind is cut off and
// resumes from the event log by itself. The embedded stream sends no
// heartbeats and no end lines.
func (l *Client) Stream(ctx context.Context, runID string, opts *client.StreamOptions) iter.Seq2[client.StreamItem, error] {
	o := opts.WithDefaults()
	return func(yield func(client.StreamItem, error) bool) {
		last, resume := o.LastEventID, o.LastEventID > 0
		failures := 0
		for {
			fl, err := l.e.Follow(ctx, engine.FollowRequest{RunID: runID, Base: l.base, After: last, Resume: resume})
			if err != nil {
				yield(client.StreamItem{}, fromProtocol(err))
				return
			}
			before := last
			var ended *engine.FollowEnd
			stopped := false
			for it := range fl.Items(ctx) {
				switch {
				case it.End != nil:
					ended = it.End
				case it.Progress != nil:
					stopped = !yield(client.StreamItem{Progress: it.Progress}, nil)
				case it.Frame != nil:
					f, err := it.Frame.Frame()
					if err != nil {
						yield(client.StreamItem{}, fromProtocol(err))
						return
					}
					last, resume = it.ID, true
					stopped = !yield(client.StreamItem{Frame: &protocol.StreamFrame{ID: it.ID, Frame: jsonFrame(f)}}, nil)
				}
				if stopped || ended != nil {
					break
				}
			}
			switch {
			case stopped:
				return
			case ended != nil && ended.Reason == engine.EndError:
				yield(client.StreamItem{}, fromProtocol(ended.Err))
				return
			case ended == nil:
				if err := ctx.Err(); err != nil {
					yield(client.StreamItem{}, fmt.Errorf("stream of run %s: %w", runID, err))
				}
				return // the run ended
			}
			// Cut off or closed: resubscribe and catch up.
			if last > before {
				failures = 0 // it delivered: a drop of a slow reader, not a failure
			}
			failures++
			if failures > o.MaxRetries {
				yield(client.StreamItem{}, fmt.Errorf("%w: run %s: the engine closed the subscription %d times", client.ErrStreamEnded, runID, failures))
				return
			}
			if !o.Wait(ctx, failures) {
				yield(client.StreamItem{}, fmt.Errorf("stream of run %s: %w", runID, ctx.Err()))
				return
			}
		}
	}
}
