package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Run is a run as the engine sees it: the stored run, its definition, and
// its decoded data.
type Run struct {
	store.Run
	Def  *workflow.Definition
	Data map[string]any
	// Timers are the run's pending timers, ordered by due time, when the
	// engine knows them: a run from Lookup, ViewRun, StartRun or Submit
	// (other reads leave it nil). Its frame names them in _links
	// ("timer:ACTION", SPEC section 17).
	Timers []store.Timer
	// timersKnown says Timers was read or derived from the commit that
	// made the run (a run in a state without timers knows it has none).
	timersKnown bool
}

// StateDef returns the definition of the run's current state.
func (r *Run) StateDef() *workflow.State {
	s, _ := r.Def.State(r.State)
	return s
}

// Status returns the run's status as frames show it.
func (r *Run) Status() string {
	if r.Snapshot.Status != "" {
		return r.Snapshot.Status
	}
	if s := r.StateDef(); s != nil {
		return r.Def.StatusOf(s)
	}
	return protocol.StatusActive
}

// ETag returns the run's version as a quoted HTTP entity tag.
func (r *Run) ETag() string { return ETag(r.Version) }

// ETag formats a version as a quoted entity tag.
func ETag(version int64) string {
	return `"` + itoa(version) + `"`
}

// StartOptions qualify StartRun.
type StartOptions struct {
	Actor string
	// ID, when set, is the new run's id instead of a new UUIDv7 (a
	// schedule's run of one tick has an id derived from the tick). A run
	// with that id stored already is refused with EConflict, and nothing
	// is written.
	ID string
}

// StartRun creates a run of workflowID ("" = the default workflow) with
// initial data, and returns it.
func (e *Engine) StartRun(ctx context.Context, workflowID string, data map[string]any, o StartOptions) (*Run, error) {
	def := e.def
	if workflowID != "" {
		d, ok := e.defs[workflowID]
		if !ok {
			return nil, protocol.Errorf(protocol.ENotFound, "Workflow not found: %q is not served here. Served workflows: %s.", workflowID, strings.Join(e.WorkflowIDs(), ", ")).
				With("workflows", e.WorkflowIDs())
		}
		def = d
	}
	if data == nil {
		data = map[string]any{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, protocol.Errorf(protocol.EInvalid, "The initial data cannot be stored as JSON: %v.", err)
	}
	now := e.now().UTC()
	initial, _ := def.State(def.InitialState)
	snap := store.Snapshot{State: def.InitialState, Data: raw}
	if initial.Milestone != "" {
		snap.Milestones = []string{initial.Milestone}
	}
	if err := e.checkRunSize(store.Snapshot{}, snap); err != nil {
		return nil, err
	}
	id := o.ID
	if id == "" {
		id = e.newID()
	}
	run := store.Run{ID: id, WorkflowID: def.ID, Snapshot: snap, Version: 1, CreatedAt: now, UpdatedAt: now, WorkflowVersion: def.Version()}
	c := store.Commit{
		Run:   run,
		Event: store.Event{RunID: run.ID, Seq: 1, Time: now, Kind: store.EventCreated, To: def.InitialState, Actor: actorOr(o.Actor), WorkflowVersion: def.Version(), Snapshot: snap},
	}
	if initial.Task != nil {
		c.Run.Snapshot.Status = protocol.StatusProcessing
		c.Event.Snapshot = c.Run.Snapshot
		c.Enqueue = e.newTask(run.ID, def.InitialState, 1, now)
	}
	c.Event.Offered = actionNames(e.Offered(&Run{Run: c.Run, Def: def, Data: data}))
	enterTimers(&c, nil, initial, data, now)
	e.outbox(def, "", &c)
	if err := e.store.CreateRun(ctx, c); err != nil {
		if o.ID != "" && errors.Is(err, store.ErrExists) {
			return nil, protocol.Errorf(protocol.EConflict, "A run with id %q exists already.", o.ID)
		}
		return nil, internal("could not store the new run", err)
	}
	e.timersStored(c.Timers)
	e.outboxStored(&c)
	e.published(def.ID, c.Event)
	r := &Run{Run: c.Run, Def: def, Data: data}
	r.setTimersFrom(&c, nil)
	return r, nil
}

// GetRun returns the run's current value. ENotFound for an unknown run.
func (e *Engine) GetRun(ctx context.Context, runID string) (*Run, error) {
	sr, err := e.storedRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return e.view(ctx, sr)
}

// storedRun reads run runID from the store, after its queued commit if it
// has one.
func (e *Engine) storedRun(ctx context.Context, runID string) (store.Run, error) {
	// A transition of this run is queued: read the run as it leaves it (at
	// most one group commit away), not the value before it.
	if p := e.pendingOf(runID); p != nil {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	sr, err := e.store.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Run{}, notFound(runID)
		}
		return store.Run{}, internal("could not read the run", err)
	}
	return sr, nil
}

// view returns the engine's view of sr: its pinned definition (the served
// one, or the stored version) and its decoded data.
func (e *Engine) view(ctx context.Context, sr store.Run) (*Run, error) {
	def, err := e.definition(ctx, sr.WorkflowID, sr.WorkflowVersion)
	if err != nil {
		if protocol.ErrorCode(err) == protocol.ENotFound {
			return nil, protocol.Errorf(protocol.ENotFound, "Run %s belongs to workflow %q (version %q), which this server neither serves nor has stored.", sr.ID, sr.WorkflowID, sr.WorkflowVersion)
		}
		return nil, err
	}
	data, err := decodeData(sr.Data)
	if err != nil {
		return nil, internal("stored run data is not a JSON object", err)
	}
	return &Run{Run: sr, Def: def, Data: data}, nil
}

func decodeData(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	v, err := protocol.DecodeValue(raw, 1<<20)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("data is not an object")
	}
	return m, nil
}

// NotInWorkflow is the ENotFound error for a run looked up under the
// scoped API of a workflow it does not belong to.
func NotInWorkflow(runID, workflowID string) error {
	return protocol.Errorf(protocol.ENotFound, "Run not found: run %s does not belong to workflow %q.", runID, workflowID)
}

// inScope is the one check of a workflow scope (the API under
// /w/{workflow_id}/, or an option's Workflow): a run of workflow
// runWorkflow may be seen by a caller scoped to scope ("" = any workflow),
// else the run is not found for that caller (NotInWorkflow).
func inScope(runID, runWorkflow, scope string) error {
	if scope != "" && runWorkflow != scope {
		return NotInWorkflow(runID, scope)
	}
	return nil
}

// TransitionOptions qualify Transition.
type TransitionOptions struct {
	// IfMatch, when not 0, is the version the caller saw; if the run has
	// moved on, Transition fails with EConflict (HTTP 409).
	IfMatch int64
	// Actor names who fires the transition (the token name, or anonymous).
	Actor string
	// Workflow, when set, is the only workflow the run may belong to (the
	// scoped API /w/{workflow_id}/): a run of another is ENotFound.
	Workflow string
	// task marks a transition fired by a background task.
	task *store.Task
	// set are data keys the transition also sets (a task's output).
	set map[string]any
	// weakIfMatch is the If-Match header when it was a weak entity tag
	// (Submit): it never matches.
	weakIfMatch string
	// failure is why a task failed, when it fires its failure action:
	// stored on the run and the event (Snapshot.Error) and shown in the
	// frame's hint until the run moves on.
	failure string
}

// Offered returns the transitions offered now, in declaration order: those
// leaving the current state whose guards allow them, except the actions a
// running task reserves for itself. A run with status failed offers none.
func (e *Engine) Offered(r *Run) []*workflow.Transition {
	if r.Snapshot.Status == protocol.StatusFailed {
		return nil
	}
	st := r.StateDef()
	var out []*workflow.Transition
	for _, t := range r.Def.From(r.State) {
		if reservedByTask(st, t.Action) {
			continue
		}
		if ok, _ := t.Guard.Allow(r.Data); ok {
			out = append(out, t)
		}
	}
	return out
}

func reservedByTask(st *workflow.State, action string) bool {
	return st != nil && st.Task != nil && (action == st.Task.OnSuccess || action == st.Task.OnFailure)
}

// CheckOffered returns the EForbidden error Transition would give for
// action on r (not offered now, or refused by its guard), or nil.
func (e *Engine) CheckOffered(r *Run, action string) error {
	st := r.StateDef()
	t, ok := r.Def.Transition(r.State, action)
	if !ok || reservedByTask(st, action) || r.Snapshot.Status == protocol.StatusFailed {
		return notOffered(r, action, e.Offered(r))
	}
	if allowed, reason := t.Guard.Allow(r.Data); !allowed {
		return guardRefused(r, action, reason, e.Offered(r))
	}
	return nil
}

// Transition fires action on the run with input (the request body). It is
// validated against the run as it is when the change is applied: after a
// lost compare-and-set the run is read again and everything is checked
// again. Errors: ENotFound (unknown run), EForbidden (action not offered
// now, or guard refused: the hint says why and lists the offered actions),
// EInvalid (input does not match expects), EConflict (IfMatch is stale).
func (e *Engine) Transition(ctx context.Context, runID, action string, input map[string]any, o TransitionOptions) (*Run, error) {
	return e.transition(ctx, runID, action, input, o)
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// plan validates action against r and returns the commit that applies it.
func (e *Engine) plan(r *Run, action string, input map[string]any, o TransitionOptions) (*store.Commit, error) {
	if err := inScope(r.ID, r.WorkflowID, o.Workflow); err != nil {
		return nil, err
	}
	st := r.StateDef()
	if st == nil {
		// Cannot happen for a pinned run (its version declares its state);
		// say so as a refusal, not a 500.
		return nil, notOffered(r, action, nil)
	}
	if o.task != nil {
		// A task may only fire on the entry it was started for.
		if r.Version != o.task.Version || r.State != o.task.State {
			return nil, errTaskStale
		}
	}
	t, ok := r.Def.Transition(r.State, action)
	if !ok || (o.task == nil && reservedByTask(st, action)) || (r.Snapshot.Status == protocol.StatusFailed) {
		return nil, notOffered(r, action, e.Offered(r))
	}
	if allowed, reason := t.Guard.Allow(r.Data); !allowed {
		return nil, guardRefused(r, action, reason, e.Offered(r))
	}
	if err := protocol.CheckExpects(t.Expects, input); err != nil {
		return nil, err
	}
	if err := protocol.CheckConstraints(t.Constraints, input); err != nil {
		return nil, err
	}
	// A stale If-Match is the last check (SPEC section 2's order): an
	// action not offered now is a 403 and a bad body a 400 whatever the
	// version the caller saw.
	if o.weakIfMatch != "" {
		return nil, weakIfMatch(r, o.weakIfMatch)
	}
	if o.IfMatch != 0 && o.IfMatch != r.Version {
		return nil, protocol.Errorf(protocol.EConflict, "The run is at version %d, but If-Match says %d: it changed since you read it. GET the run again and decide on the new frame.", r.Version, o.IfMatch).
			With("version", r.Version).With("state", r.State)
	}
	data := r.Data
	if len(t.Expects) > 0 || len(o.set) > 0 {
		data = make(map[string]any, len(r.Data)+len(t.Expects)+len(o.set))
		for k, v := range r.Data {
			data[k] = v
		}
		for k := range t.Expects {
			data[k] = input[k]
		}
		for k, v := range o.set {
			data[k] = v
		}
	}
	raw := r.Snapshot.Data
	if len(t.Expects) > 0 || len(o.set) > 0 {
		b, err := json.Marshal(data)
		if err != nil {
			return nil, protocol.Errorf(protocol.EInvalid, "The input cannot be stored as JSON: %v.", err)
		}
		raw = b
	}
	to, _ := r.Def.State(t.To)
	now := e.now().UTC()
	snap := store.Snapshot{State: t.To, Data: raw, Milestones: r.Milestones, Error: o.failure}
	if to.Milestone != "" {
		ms := make([]string, len(r.Milestones), len(r.Milestones)+1)
		copy(ms, r.Milestones)
		snap.Milestones = append(ms, to.Milestone)
	}
	if err := e.checkRunSize(r.Snapshot, snap); err != nil {
		return nil, err
	}
	next := r.Run
	next.Snapshot = snap
	next.Version = r.Version + 1
	next.UpdatedAt = now
	actor := actorOr(o.Actor)
	c := &store.Commit{
		Run:   next,
		Event: store.Event{RunID: r.ID, Seq: next.Version, Time: now, Kind: store.EventTransition, Action: action, From: r.State, To: t.To, Actor: actor},
	}
	if st.Task != nil && r.Snapshot.Status == protocol.StatusProcessing {
		c.Complete = taskID(r.ID, r.Version)
	}
	if to.Task != nil {
		c.Run.Snapshot.Status = protocol.StatusProcessing
		c.Enqueue = e.newTask(r.ID, t.To, next.Version, now)
	}
	c.Event.Snapshot = c.Run.Snapshot
	c.Event.Offered = actionNames(e.Offered(&Run{Run: c.Run, Def: r.Def, Data: data}))
	enterTimers(c, st, to, data, now)
	e.outbox(r.Def, r.Status(), c)
	if c.Event.Patch = dataPatch(r.Data, data, t.Expects, o.set); c.Event.Patch != nil && to.Milestone != "" {
		c.Event.Added = []string{to.Milestone}
	}
	return c, nil
}

// runSize is what a run's snapshot holds that clients can grow: the bytes
// of its data's JSON and of its milestones (each with its quotes and
// comma, as a frame shows them).
func runSize(s store.Snapshot) int64 {
	n := int64(len(s.Data))
	for _, m := range s.Milestones {
		n += int64(len(m)) + 3
	}
	return n
}

// checkRunSize refuses next, the run's snapshot after a start or a
// transition, when it is over the bound on a run's data and larger than
// old: so one request's memory stays bounded whatever was stored, and a
// run stored larger under a higher bound may still move on.
func (e *Engine) checkRunSize(old, next store.Snapshot) error {
	size := runSize(next)
	if size <= e.maxData || size <= runSize(old) {
		return nil
	}
	return protocol.Errorf(protocol.ETooLarge, "This would make the run's data and milestones %d bytes, over this server's limit of %d bytes (asmp serve --max-run-data); nothing was written. Keep large values outside the run (a file, a directory row) and store a reference to them.", size, e.maxData).
		With("limit_bytes", e.maxData).With("size_bytes", size)
}

// dataPatch returns the merge patch (RFC 7386) that turns old into new,
// where new is old with the keys of expects and of set written, or nil
// when no merge patch expresses it (a value that is or holds null).
func dataPatch[E, S any](old, new map[string]any, expects map[string]E, set map[string]S) json.RawMessage {
	if len(expects) == 0 && len(set) == 0 {
		return noChange
	}
	patch := make(map[string]any, len(expects)+len(set))
	add := func(k string) bool {
		if _, done := patch[k]; done {
			return true
		}
		v, ok := diffValue(old[k], new[k])
		patch[k] = v
		return ok
	}
	for k := range expects {
		if !add(k) {
			return nil
		}
	}
	for k := range set {
		if !add(k) {
			return nil
		}
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return nil
	}
	return b
}

// noChange is the merge patch of a transition that writes no data (shared:
// patches are never modified).
var noChange = json.RawMessage(`{}`)

// diffValue returns the merge patch member that turns old into new, and
// whether there is one.
func diffValue(old, new any) (any, bool) {
	o, ok1 := old.(map[string]any)
	n, ok2 := new.(map[string]any)
	if !ok1 || !ok2 {
		return new, store.Expressible(new)
	}
	out := make(map[string]any, len(n))
	for k := range o {
		if _, kept := n[k]; !kept {
			out[k] = nil
		}
	}
	for k, v := range n {
		d, ok := diffValue(o[k], v)
		if !ok {
			return nil, false
		}
		out[k] = d
	}
	return out, true
}

func notOffered(r *Run, action string, offered []*workflow.Transition) error {
	names := actionNames(offered)
	var hint string
	switch {
	case r.Snapshot.Status == protocol.StatusFailed:
		hint = "Action " + quote(action) + " is not available: run is failed in state " + r.State + " and offers no actions."
	case len(names) == 0:
		hint = "Action " + quote(action) + " is not available in state " + r.State + ": no actions are offered now."
	default:
		hint = "Action " + quote(action) + " is not available in state " + r.State + ". Offered actions: " + strings.Join(names, ", ") + "."
	}
	if r.Snapshot.Status == protocol.StatusProcessing {
		hint += " A background task is running; watch the stream for its result."
	}
	return protocol.Errorf(protocol.EForbidden, "%s", hint).
		With("state", r.State).With("action", action).With("allowed", names)
}

func guardRefused(r *Run, action, reason string, offered []*workflow.Transition) error {
	return protocol.Errorf(protocol.EForbidden, "%s", reason).
		With("state", r.State).With("action", action).With("allowed", actionNames(offered)).With("refused_by", "guard")
}

func actionNames(ts []*workflow.Transition) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Action
	}
	return out
}

func actorOr(a string) string {
	if a == "" {
		return "anonymous"
	}
	return a
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Events returns the run's event log after seq after (0 = from the start).
func (e *Engine) Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error) {
	evs, err := e.store.Events(ctx, runID, after, limit)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(runID)
	}
	if err != nil {
		return nil, internal("could not read the event log", err)
	}
	return evs, nil
}
