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
// against client.Backend run unchanged. Background tasks run only while the
// engine's workers run (engine.StartWorkers).
type Client struct {
	e    *engine.Engine
	base string
}

var _ client.Backend = (*Client)(nil)

// New returns a client.Backend that drives eng's workflows in-process.
func New(eng *engine.Engine) *Client {
	return &Client{e: eng, base: BaseURL}
}

// Engine returns the engine the backend drives.
func (l *Client) Engine() *engine.Engine { return l.e }

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
func jsonInput(input map[string]any) (map[string]any, error) {
	if input == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, &client.Error{Status: http.StatusBadRequest, Code: protocol.EInvalid, Hint: "The input cannot be sent as JSON: " + err.Error()}
	}
	m, err := protocol.DecodeObject(b, 0)
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
		if data, err = jsonInput(data); err != nil {
			return nil, err
		}
	}
	r, err := l.e.StartRun(ctx, workflowID, data, engine.StartOptions{Actor: Actor})
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(r), nil
}

// Frame returns the run's current frame.
func (l *Client) Frame(ctx context.Context, runID string) (*client.RunFrame, error) {
	r, err := l.e.GetRun(ctx, runID)
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(r), nil
}

// CLI returns the run's CLI object.
func (l *Client) CLI(ctx context.Context, runID string) (protocol.CLI, error) {
	r, err := l.e.GetRun(ctx, runID)
	if err != nil {
		return protocol.CLI{}, fromProtocol(err)
	}
	return l.e.CLI(r), nil
}

// Transition fires action on the run.
func (l *Client) Transition(ctx context.Context, runID, action string, input map[string]any, opts *client.TransitionOptions) (*client.RunFrame, error) {
	var ifMatch int64
	if opts != nil && strings.TrimSpace(opts.IfMatch) != "" && strings.TrimSpace(opts.IfMatch) != "*" {
		ifMatch = client.ParseETag(opts.IfMatch)
		if ifMatch <= 0 {
			return nil, &client.Error{Status: http.StatusBadRequest, Code: protocol.EInvalid,
				Hint: fmt.Sprintf("If-Match must be the run's ETag, e.g. \"3\" (from the frame you acted on), not %q.", opts.IfMatch)}
		}
	}
	r, err := l.e.GetRun(ctx, runID)
	if err != nil {
		return nil, fromProtocol(err)
	}
	in, err := jsonInput(input)
	if err != nil {
		if oerr := l.e.CheckOffered(r, action); oerr != nil {
			return nil, fromProtocol(oerr)
		}
		return nil, err
	}
	next, err := l.e.Transition(ctx, runID, action, in, engine.TransitionOptions{IfMatch: ifMatch, Actor: Actor})
	if err != nil {
		return nil, fromProtocol(err)
	}
	return l.runFrame(next), nil
}

// TransitionHref follows an href of a frame this backend built: a
// transition href, or a start href of the discovery frame.
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
		if wf != "" {
			r, err := l.e.GetRun(ctx, segs[1])
			if err != nil {
				return nil, fromProtocol(err)
			}
			if r.WorkflowID != wf {
				return nil, &client.Error{Status: http.StatusNotFound, Code: protocol.ENotFound,
					Hint: fmt.Sprintf("Run not found: run %s does not belong to workflow %q.", segs[1], wf)}
			}
		}
		return l.Transition(ctx, segs[1], segs[3], input, opts)
	}
	return nil, &client.Error{Status: http.StatusNotFound, Code: protocol.ENotFound,
		Hint: fmt.Sprintf("No endpoint at POST %s. Follow a next_states href of a frame.", href)}
}

// InvokeTool calls a tool of the run's current state.
func (l *Client) InvokeTool(ctx context.Context, runID, tool string, input map[string]any) (any, error) {
	in, err := jsonInput(input)
	if err != nil {
		return nil, err
	}
	res, err := l.e.InvokeTool(ctx, runID, tool, in, engine.ToolOptions{Actor: Actor})
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
	r, err := l.e.GetRun(ctx, runID)
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
// terminal frame. A subscriber
// that falls too far behind catches up from the event log by itself. The
// embedded stream sends no heartbeats and no end lines.
func (l *Client) Stream(ctx context.Context, runID string, opts *client.StreamOptions) iter.Seq2[client.StreamItem, error] {
	o := opts.WithDefaults()
	return func(yield func(client.StreamItem, error) bool) {
		last, resume := o.LastEventID, o.LastEventID > 0
		failures := 0
		for {
			sub := l.e.Hub().Subscribe(runID)
			before := last
			done, err := l.follow(ctx, runID, sub, &last, &resume, yield)
			sub.Close()
			if done {
				return
			}
			if err != nil {
				yield(client.StreamItem{}, err)
				return
			}
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

// follow serves one subscription. done reports that the stream is over (the
// run ended, the consumer stopped, or an error was yielded).
func (l *Client) follow(ctx context.Context, runID string, sub *engine.Subscription, last *int64, resume *bool, yield func(client.StreamItem, error) bool) (done bool, err error) {
	r, err := l.e.GetRun(ctx, runID)
	if err != nil {
		return false, fromProtocol(err)
	}
	if *resume && *last > r.Version {
		return false, &client.Error{Status: http.StatusBadRequest, Code: protocol.EInvalid,
			Hint: fmt.Sprintf("Last-Event-ID %d is ahead of the run (its last event is %d); reconnect without it.", *last, r.Version)}
	}
	emit := func(f protocol.Frame, id int64) bool {
		*last, *resume = id, true
		return yield(client.StreamItem{Frame: &protocol.StreamFrame{ID: id, Frame: jsonFrame(f)}}, nil) && !protocol.Terminal(f.Status)
	}
	catchUp := func() (bool, error) {
		replay := l.e.NewReplay(r.Def, l.base)
		for {
			evs, err := l.e.Events(ctx, runID, *last, 100)
			if err != nil {
				return true, fromProtocol(err)
			}
			if len(evs) == 0 {
				return false, nil
			}
			for i := range evs {
				l.e.FollowVersion(ctx, r, &evs[i])
				replay.Follow(r.Def)
				f, err := replay.Frame(&evs[i])
				if err != nil {
					return true, fromProtocol(err)
				}
				if !emit(f, evs[i].Seq) {
					return true, nil
				}
			}
		}
	}
	if *resume {
		if stop, err := catchUp(); stop || err != nil {
			return true, errOrYield(err, yield)
		}
	} else if !emit(l.e.Frame(r, l.base), r.Version) {
		return true, nil
	}
	for {
		select {
		case <-ctx.Done():
			yield(client.StreamItem{}, fmt.Errorf("stream of run %s: %w", runID, ctx.Err()))
			return true, nil
		case m, ok := <-sub.C:
			if !ok {
				return false, nil // dropped or closed: resubscribe and catch up
			}
			if m.Progress != nil {
				p := *m.Progress
				if p.ID < *last {
					p.ID = *last
				}
				if !yield(client.StreamItem{Progress: &p}, nil) {
					return true, nil
				}
				continue
			}
			ev := m.Event
			if ev == nil || ev.Seq <= *last {
				continue
			}
			if ev.Seq > *last+1 {
				if stop, err := catchUp(); stop || err != nil {
					return true, errOrYield(err, yield)
				}
				continue
			}
			l.e.FollowVersion(ctx, r, ev)
			f, err := l.e.EventFrame(r.Def, ev, l.base)
			if err != nil {
				yield(client.StreamItem{}, fromProtocol(err))
				return true, nil
			}
			if !emit(f, ev.Seq) {
				return true, nil
			}
		}
	}
}

// errOrYield yields err (when not nil) and returns nil, so the caller ends.
func errOrYield(err error, yield func(client.StreamItem, error) bool) error {
	if err != nil {
		yield(client.StreamItem{}, err)
	}
	return nil
}
