package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Frame builds the State Frame of r. base is the API base URL the client
// used (no trailing slash); every href in the frame is absolute under it.
func (e *Engine) Frame(r *Run, base string) protocol.Frame {
	return e.frameOf(r.Def, r.ID, r.Snapshot, r.Data, nil, r.Timers, base)
}

// EventFrame builds the frame a run showed right after event ev, which
// must carry its data (a published event, or the first of a page of
// Events; Replay folds the others).
func (e *Engine) EventFrame(def *workflow.Definition, ev *store.Event, base string) (protocol.Frame, error) {
	if ev.Data == nil && ev.Patch != nil {
		return protocol.Frame{}, internal("an event without its data has no frame of its own", errors.New("delta event"))
	}
	data, err := decodeData(ev.Data)
	if err != nil {
		return protocol.Frame{}, internal("stored event data is not a JSON object", err)
	}
	return e.frameOf(def, ev.RunID, ev.Snapshot, data, ev.Offered, eventTimers(def, ev, data), base), nil
}

// Replay builds the frames of a run's events, read in seq order from
// Events (pages one after the other), folding each event's data patch
// into the data of the event before it. It keeps one version of the data.
type Replay struct {
	e    *Engine
	def  *workflow.Definition
	base string
	data map[string]any
	seq  int64
}

// NewReplay starts a replay of a run of workflow def, with hrefs under base.
func (e *Engine) NewReplay(def *workflow.Definition, base string) *Replay {
	return &Replay{e: e, def: def, base: base}
}

// Follow makes def the definition of the frames from the next event on:
// a replay follows the versions the run had (engine.FollowVersion).
func (p *Replay) Follow(def *workflow.Definition) { p.def = def }

// Frame returns the frame the run showed right after ev, the event after
// the one given last (or the first of a page, which carries its data).
func (p *Replay) Frame(ev *store.Event) (protocol.Frame, error) {
	switch {
	case ev.Data != nil:
		data, err := decodeData(ev.Data)
		if err != nil {
			return protocol.Frame{}, internal("stored event data is not a JSON object", err)
		}
		p.data = data
	case p.data == nil || ev.Seq != p.seq+1:
		return protocol.Frame{}, internal("replaying events out of order", fmt.Errorf("event %d after %d", ev.Seq, p.seq))
	default:
		patch, err := protocol.DecodeValue(ev.Patch, 0)
		if err != nil {
			return protocol.Frame{}, internal("stored event patch is not JSON", err)
		}
		data, ok := store.MergeValue(p.data, patch).(map[string]any)
		if !ok {
			return protocol.Frame{}, internal("stored event patch is not an object", errors.New(string(ev.Patch)))
		}
		p.data = data
	}
	p.seq = ev.Seq
	return p.e.frameOf(p.def, ev.RunID, ev.Snapshot, p.data, ev.Offered, eventTimers(p.def, ev, p.data), p.base), nil
}

// frameOf builds a frame. offered names the actions to show (recorded at
// commit time), or is nil to compute them now; timers are the run's
// pending timers (of its state), named in _links as "timer:ACTION".
func (e *Engine) frameOf(def *workflow.Definition, runID string, snap store.Snapshot, data map[string]any, names []string, timers []store.Timer, base string) protocol.Frame {
	r := &Run{Run: store.Run{ID: runID, WorkflowID: def.ID, Snapshot: snap}, Def: def, Data: data}
	st := r.StateDef()
	var offered []*workflow.Transition
	if names == nil {
		offered = e.Offered(r)
	} else {
		offered = make([]*workflow.Transition, 0, len(names))
		for _, a := range names {
			if t, ok := def.Transition(snap.State, a); ok {
				offered = append(offered, t)
			}
		}
	}
	// Every URL of the frame starts with runURL: build them all in one
	// string and slice it, one allocation instead of one per URL.
	runLen := len(base) + len("/runs/") + len(runID)
	version := def.Version()
	size := 4*runLen + len("/stream/cli/events") + len(base) + len("/workflows//versions/") + len(def.ID) + len(version)
	for _, t := range offered {
		size += runLen + len("/transitions/") + len(t.Action)*3
	}
	for _, t := range timers {
		size += runLen + len("/transitions/") + len(t.Action)*3
	}
	var sb strings.Builder
	sb.Grow(size)
	url := func(suffix ...string) string {
		start := sb.Len()
		sb.WriteString(base)
		sb.WriteString("/runs/")
		sb.WriteString(runID)
		for _, s := range suffix {
			sb.WriteString(s)
		}
		return sb.String()[start:]
	}
	runURL := url()
	streamURL := url("/stream")
	cliURL := url("/cli")
	eventsURL := url("/events")
	vstart := sb.Len()
	for _, part := range [...]string{base, "/workflows/", def.ID, "/versions/", version} {
		sb.WriteString(part)
	}
	versionURL := sb.String()[vstart:] // VersionHref(base, def.ID, version)
	f := protocol.Frame{
		RunID:       runID,
		WorkflowID:  def.ID,
		ResourceURL: base,
		State:       snap.State,
		Status:      r.Status(),
		NextStates:  make([]protocol.NextState, 0, len(offered)),
		Milestones:  snap.Milestones,
		StreamURL:   streamURL,
		Links: map[string]protocol.Link{
			"self":             {Href: runURL, Method: "GET"},
			"cli":              {Href: cliURL, Method: "GET"},
			"events":           {Href: eventsURL, Method: "GET"},
			"workflow_version": {Href: versionURL, Method: "GET", Version: version},
		},
	}
	if len(data) > 0 {
		f.Data = data
	}
	if st != nil {
		f.Hint = expandHint(st.Hint, data) + missingFuncsHint(def, st.Name)
	}
	f.Hint = failureHint(f.Hint, snap)
	for _, t := range offered {
		f.NextStates = append(f.NextStates, protocol.NextState{
			Action:     t.Action,
			Method:     "POST",
			Href:       url("/transitions/", neturl.PathEscape(t.Action)),
			Expects:    t.Expects,
			IsCritical: t.IsCritical,
		})
	}
	for _, t := range timers {
		// The href of the transition the timer fires: the one its
		// next_states entry has when the action is offered.
		f.Links[TimerLinkPrefix+t.Action] = protocol.Link{
			Href:   url("/transitions/", neturl.PathEscape(t.Action)),
			Method: "POST",
			DueAt:  FormatDueAt(t.DueAt),
		}
	}
	if st == nil {
		return f
	}
	if st.Skill != nil {
		skillURL := base + "/skills/" + escapePath(st.Skill.Path)
		if e.defs[def.ID] != def {
			// Not the served version: name the version, whose skill may differ.
			skillURL += "?workflow_id=" + neturl.QueryEscape(def.ID) + "&version=" + neturl.QueryEscape(version)
		}
		f.ActiveSkill = &protocol.ActiveSkill{
			Name:           st.Skill.Name,
			URL:            skillURL,
			ContextSummary: st.Skill.ContextSummary,
			Version:        st.Skill.Version,
		}
	}
	for _, t := range st.Tools {
		f.Tools = append(f.Tools, protocol.Tool{
			Name:        t.Name,
			Href:        runURL + "/invoke/" + neturl.PathEscape(t.Name),
			Description: t.Description,
			Expects:     t.Expects,
		})
	}
	for _, res := range st.Resources {
		f.Resources = append(f.Resources, protocol.Resource{
			URI:      runURL + "/resources/" + escapePath(res.Path),
			Name:     res.Name,
			MimeType: res.MimeType,
		})
	}
	return f
}

// FormatDueAt writes a timer's due time as its frame link shows it: RFC
// 3339 in UTC, to the microsecond (what every store keeps), trailing
// zeros of the fraction left out ("2026-12-03T10:30:00Z").
func FormatDueAt(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// TimerLinkPrefix starts the _links key of a pending timer: "timer:" and
// its action (protocol.TimerLinkPrefix).
const TimerLinkPrefix = protocol.TimerLinkPrefix

// failureHint puts a task's failure reason in front of the state's hint: in
// place of it when the run is failed, before it in the state the failure
// action led to (until the run moves on).
func failureHint(hint string, snap store.Snapshot) string {
	switch {
	case snap.Error == "":
		return hint
	case snap.Status == protocol.StatusFailed || hint == "":
		return snap.Error
	}
	return snap.Error + " " + hint
}

// expandHint replaces each {data.PATH} in hint (PATH: keys separated by
// dots) with that value of the run's data: strings as they are, other
// values as JSON. A placeholder whose value is missing stays as written.
func expandHint(hint string, data map[string]any) string {
	if !strings.Contains(hint, "{data.") {
		return hint
	}
	var b strings.Builder
	rest := hint
	for {
		i := strings.Index(rest, "{data.")
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			break
		}
		b.WriteString(rest[:i])
		ph := rest[i : i+j+1]
		if v, ok := dataAt(data, ph[len("{data."):len(ph)-1]); ok {
			b.WriteString(v)
		} else {
			b.WriteString(ph)
		}
		rest = rest[i+j+1:]
	}
	b.WriteString(rest)
	return b.String()
}

// dataAt renders the value at a dotted path of data.
func dataAt(data map[string]any, path string) (string, bool) {
	var cur any = data
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[k]; !ok {
			return "", false
		}
	}
	if s, ok := cur.(string); ok {
		return s, true
	}
	b, err := json.Marshal(cur)
	return string(b), err == nil
}

func escapePath(p string) string {
	return (&neturl.URL{Path: p}).EscapedPath()
}

// CLI builds the dynamic CLI object of r (SPEC section 3): from the state's
// hook when it has one, else generated from the frame.
func (e *Engine) CLI(r *Run) protocol.CLI {
	st := r.StateDef()
	offered := e.Offered(r)
	hint := ""
	if st != nil {
		hint = st.Hint
	}
	c := protocol.CLI{Prompt: protocol.DefaultPrompt, Hint: hint, RunID: r.ID}
	var hook *workflow.CLIHook
	if st != nil {
		hook = st.CLI
	}
	used := map[string]bool{}
	if hook != nil {
		if hook.Prompt != "" {
			c.Prompt = hook.Prompt
		}
		if hook.Hint != "" {
			c.Hint = hook.Hint
		}
		c.InputHint = hook.InputHint
		for _, o := range hook.Options {
			if used[o.Action] || !offeredAction(offered, o.Action) {
				continue
			}
			used[o.Action] = true
			c.Options = append(c.Options, protocol.CLIOption{Action: o.Action, Label: o.Label, Keys: o.Keys})
		}
	}
	for _, t := range offered {
		if !used[t.Action] {
			c.Options = append(c.Options, protocol.CLIOption{Action: t.Action, Label: t.Action})
		}
	}
	if hook == nil {
		c.InputHint = generatedInputHint(offered)
	}
	c.Hint = failureHint(expandHint(c.Hint, r.Data), r.Snapshot)
	if st != nil {
		c.Hint += missingFuncsHint(r.Def, st.Name)
	}
	return c
}

func offeredAction(ts []*workflow.Transition, action string) bool {
	for _, t := range ts {
		if t.Action == action {
			return true
		}
	}
	return false
}

// generatedInputHint describes the fields the offered transitions expect,
// e.g. "value (string):". With several transitions expecting input, each
// is prefixed with its action.
func generatedInputHint(ts []*workflow.Transition) string {
	var with []*workflow.Transition
	for _, t := range ts {
		if len(t.Expects) > 0 {
			with = append(with, t)
		}
	}
	switch len(with) {
	case 0:
		return ""
	case 1:
		return protocol.DescribeExpects(with[0].Expects) + ":"
	}
	s := ""
	for i, t := range with {
		if i > 0 {
			s += "; "
		}
		s += t.Action + ": " + protocol.DescribeExpects(t.Expects)
	}
	return s + ":"
}

// DiscoveryRunID is the run_id of the discovery frame, which stands for no
// run: GET / never creates one.
const DiscoveryRunID = "00000000-0000-0000-0000-000000000000"

// DiscoveryState is the state of the discovery frame.
const DiscoveryState = "DISCOVERY"

// Discovery builds the discovery frame served at GET /: one start action per
// served workflow (or only workflowID's, for a scoped API), whose href is a
// POST that creates a run. rootBase is the server's base URL.
func (e *Engine) Discovery(rootBase, workflowID string) protocol.Frame {
	defs := e.order
	def := e.def
	if workflowID != "" {
		if d, ok := e.defs[workflowID]; ok {
			defs = []*workflow.Definition{d}
			def = d
		}
	}
	base := rootBase
	if workflowID != "" {
		base = rootBase + "/w/" + workflowID
	}
	f := protocol.Frame{
		RunID:       DiscoveryRunID,
		WorkflowID:  def.ID,
		ResourceURL: base,
		State:       DiscoveryState,
		Status:      protocol.StatusActive,
		NextStates:  []protocol.NextState{},
		Links: map[string]protocol.Link{
			"self":      {Href: base + "/", Method: "GET"},
			"workflows": {Href: rootBase + "/workflows", Method: "GET"},
			"openapi":   {Href: base + "/openapi.json", Method: "GET"},
		},
	}
	if len(defs) == 1 {
		f.Hint = "This server serves workflow " + def.ID + ". POST to the start action's href to create a run; the answer is the run's first State Frame."
	} else {
		f.Hint = "This server serves several workflows. POST to one start action's href to create a run of that workflow; the answer is the run's first State Frame."
	}
	for _, d := range defs {
		f.NextStates = append(f.NextStates, protocol.NextState{
			Action: StartAction(d.ID),
			Method: "POST",
			Href:   StartHref(rootBase, d.ID),
		})
	}
	return f
}

// StartAction names the discovery action that starts a run of workflowID.
func StartAction(workflowID string) string { return "start:" + workflowID }

// StartHref is the URL that creates a run of workflowID.
func StartHref(rootBase, workflowID string) string {
	return rootBase + "/w/" + workflowID + "/runs"
}
