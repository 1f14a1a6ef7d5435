package engine

import (
	"context"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Lookup is the one read of a run on behalf of a client: run runID as a
// caller in scope sees it. scope "" is the root API (a run of any
// workflow); otherwise it is the API under /w/{scope}/, where a run of
// another workflow is not found (NotInWorkflow). It waits for a
// transition of the run this process has queued. ENotFound for an unknown
// run, or one whose workflow is neither served nor stored at its version.
func (e *Engine) Lookup(ctx context.Context, runID, scope string) (*Run, error) {
	sr, err := e.LookupStored(ctx, runID, scope)
	if err != nil {
		return nil, err
	}
	return e.viewWithTimers(ctx, sr)
}

// LookupStored is Lookup without decoding the run: the run as stored, its
// scope checked. A caller that keeps answers per version (package
// server's encoded answers) needs only this to tell whether it has the
// answer already; ViewRun decodes it.
func (e *Engine) LookupStored(ctx context.Context, runID, scope string) (store.Run, error) {
	sr, err := e.storedRun(ctx, runID)
	if err != nil {
		return store.Run{}, err
	}
	if err := inScope(runID, sr.WorkflowID, scope); err != nil {
		return store.Run{}, err
	}
	return sr, nil
}

// UnknownWorkflow is the ENotFound error for a workflow id this engine
// does not serve.
func (e *Engine) UnknownWorkflow(id string) error {
	return protocol.Errorf(protocol.ENotFound, "Workflow not found: %q is not served here. Served workflows: %s.", protocol.Truncate(id, 64), strings.Join(e.WorkflowIDs(), ", "))
}

// Diagram resolves what a diagram of the API in scope draws (GET
// /visualize and /visualize.svg, their workflow_id and run_id
// parameters): the run runID when one is named (looked up in scope, so a
// run of another workflow is not found under /w/{scope}/), drawn on the
// version it is pinned to; else workflow workflowID, else the scoping
// workflow, else the default one. Under /w/{scope}/ a workflowID other
// than scope is not found; a run of another workflow than workflowID is
// EInvalid.
func (e *Engine) Diagram(ctx context.Context, scope, workflowID, runID string) (*workflow.Definition, *Run, error) {
	if scope != "" && workflowID != "" && workflowID != scope {
		return nil, nil, protocol.Errorf(protocol.ENotFound, "This API is scoped to workflow %q; draw workflow %q under the root (without /w/%s).", scope, protocol.Truncate(workflowID, 64), scope)
	}
	if workflowID == "" {
		workflowID = scope
	}
	if runID != "" {
		run, err := e.Lookup(ctx, runID, scope)
		if err != nil {
			return nil, nil, err
		}
		if workflowID != "" && run.WorkflowID != workflowID {
			return nil, nil, protocol.Errorf(protocol.EInvalid, "Run %s belongs to workflow %q, not %q.", runID, run.WorkflowID, workflowID)
		}
		return run.Def, run, nil
	}
	if workflowID == "" {
		return e.def, nil, nil
	}
	def, ok := e.defs[workflowID]
	if !ok {
		return nil, nil, e.UnknownWorkflow(workflowID)
	}
	return def, nil, nil
}
