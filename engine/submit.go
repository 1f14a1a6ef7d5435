package engine

import (
	"context"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// TransitionRequest is a transition as a client sends it (POST
// /runs/{run_id}/transitions/{action}): the run, the action, the If-Match
// header and the body as they came.
type TransitionRequest struct {
	RunID  string
	Action string
	// IfMatch is the If-Match header as sent: "" or "*" for any version,
	// else the run's ETag ("3"; a bare 3 is accepted). A weak entity tag
	// (W/"3") never matches (RFC 9110, section 13.1.1): the answer is 409.
	IfMatch string
	// Body is the request body: a JSON object (empty means {}).
	Body []byte
	// BodyErr, when set, is why the transport could not make a body of
	// the input (an in-process caller's value that is not JSON): it is
	// refused in the body's place in the order.
	BodyErr error
	// MaxDepth bounds the body's nesting (0 = protocol's default).
	MaxDepth int
	// Actor names who fires the transition.
	Actor string
	// Scope is the scoping workflow of the API the request came in ("" =
	// the root): a run of another workflow is not found.
	Scope string
	// Before, when set, runs once the request is valid as sent, just
	// before the transition is applied; an error it returns is the answer
	// and nothing is applied. (The NDJSON answer takes its stream slot
	// and subscribes to the run there, so it misses no event.)
	Before func() error
}

// Submit applies a transition request, refusing it in the one documented
// order (README, "Validation order"): 404 unknown run (or a run of
// another workflow than Scope), 400 malformed If-Match, 403 action not
// offered now or refused by its guard (whatever the body or If-Match),
// 400 body not a JSON object or not matching what the action expects, 409
// stale If-Match. The last three are checked against the run as it is
// when the change applies (Transition).
func (e *Engine) Submit(ctx context.Context, req TransitionRequest) (*Run, error) {
	ifMatch, weak, imErr := ParseIfMatch(req.IfMatch)
	input, err := protocol.DecodeObject(req.Body, req.MaxDepth)
	if req.BodyErr != nil {
		input, err = nil, req.BodyErr
	}
	if imErr != nil || err != nil {
		run, lerr := e.Lookup(ctx, req.RunID, req.Scope)
		if lerr != nil {
			return nil, lerr
		}
		if imErr != nil {
			return nil, imErr
		}
		if oerr := e.CheckOffered(run, req.Action); oerr != nil {
			return nil, oerr
		}
		return nil, err
	}
	if req.Before != nil {
		if err := req.Before(); err != nil {
			return nil, err
		}
	}
	next, err := e.transition(ctx, req.RunID, req.Action, input, TransitionOptions{
		IfMatch: ifMatch, Actor: req.Actor, Workflow: req.Scope, weakIfMatch: weak})
	if err != nil || next.timersKnown {
		return next, err
	}
	// The commit kept the timers of a run read without them: read them
	// (only in a state with timers), on a copy, since next may be shared
	// with a transition queued after it.
	own := *next
	if err := e.loadTimers(ctx, &own); err != nil {
		return nil, err
	}
	return &own, nil
}

// ParseIfMatch reads an If-Match header: "" and * mean any version (0);
// "7" and 7 name version 7. weak is the header when it is a weak entity
// tag (W/"7"), which names a version but never matches (RFC 9110: If-Match
// compares strong validators only). Anything else is EInvalid.
func ParseIfMatch(header string) (version int64, weak string, err error) {
	v := strings.TrimSpace(header)
	if v == "" || v == "*" {
		return 0, "", nil
	}
	tag, isWeak := strings.CutPrefix(v, "W/")
	n, perr := strconv.ParseInt(strings.Trim(tag, `"`), 10, 64)
	if perr != nil || n <= 0 {
		return 0, "", protocol.Errorf(protocol.EInvalid, "If-Match must be the run's ETag, e.g. \"3\" (from the frame you acted on), not %q.", header)
	}
	if isWeak {
		return n, header, nil
	}
	return n, "", nil
}

// weakIfMatch is the EConflict error of a transition whose If-Match is a
// weak entity tag: it names a version, but never matches.
func weakIfMatch(r *Run, header string) error {
	return protocol.Errorf(protocol.EConflict, "If-Match %s is a weak entity tag, which never matches (RFC 9110): send the run's ETag as the server sent it, e.g. %s.", header, r.ETag()).
		With("version", r.Version).With("state", r.State)
}
