package engine

import "github.com/asmp-dev/asmp/protocol"

// Constraints returns the bounds beyond their types of the fields that
// action expects in state of the served workflow workflowID (field ->
// constraint; nil when it has none, or there is no such transition). Frames
// show only the types; tool schemas for models and MCP hosts add these
// (protocol.ExpectsSchema).
func (e *Engine) Constraints(workflowID, state, action string) map[string]protocol.Constraint {
	d, ok := e.Workflow(workflowID)
	if !ok {
		return nil
	}
	t, ok := d.Transition(state, action)
	if !ok {
		return nil
	}
	return t.Constraints
}

// ToolConstraints is Constraints for the stage tool named tool of state.
func (e *Engine) ToolConstraints(workflowID, state, tool string) map[string]protocol.Constraint {
	d, ok := e.Workflow(workflowID)
	if !ok {
		return nil
	}
	st, ok := d.State(state)
	if !ok {
		return nil
	}
	t, ok := st.Tool(tool)
	if !ok {
		return nil
	}
	return t.Constraints
}
