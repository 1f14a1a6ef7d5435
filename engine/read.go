package engine

import (
	"context"

	"github.com/asmp-dev/asmp/store"
)

// ViewRun returns the engine's view of a run read with LookupStored: its
// pinned definition, decoded data and pending timers (read only when its
// state declares timers). ENotFound when its workflow is neither served
// nor stored at its version.
func (e *Engine) ViewRun(ctx context.Context, sr store.Run) (*Run, error) {
	return e.viewWithTimers(ctx, sr)
}

// viewWithTimers is view plus the run's pending timers (RunTimers).
func (e *Engine) viewWithTimers(ctx context.Context, sr store.Run) (*Run, error) {
	r, err := e.view(ctx, sr)
	if err != nil {
		return nil, err
	}
	if err := e.loadTimers(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// PureState reports whether the State Frame and the CLI object of a run of
// workflowID in state are a function of the stored run alone (its version)
// and the base URL, so that an answer encoded for one version may be sent
// again while the version is unchanged. It is false when a transition
// leaving state has a guard that may change its verdict with the data
// unchanged (a Go function, or an expression calling now()), and for a
// workflow or state the engine does not serve.
func (e *Engine) PureState(workflowID, state string) bool {
	return e.pure[workflowID][state]
}

// PureRun is PureState for r's own (pinned) definition.
func (e *Engine) PureRun(r *Run) bool {
	if cur, ok := e.defs[r.WorkflowID]; ok && cur == r.Def {
		return e.pure[r.WorkflowID][r.State]
	}
	if _, ok := r.Def.State(r.State); !ok {
		return false
	}
	for _, t := range r.Def.From(r.State) {
		if !t.Guard.Pure() {
			return false
		}
	}
	return true
}

// pureStates records, per workflow, the states whose frames are a
// function of the stored run alone (see PureState).
func pureStates(e *Engine) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, d := range e.order {
		m := map[string]bool{}
		for _, s := range d.States {
			pure := true
			for _, t := range d.From(s.Name) {
				pure = pure && t.Guard.Pure()
			}
			m[s.Name] = pure
		}
		out[d.ID] = m
	}
	return out
}
