package engine

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// ToolOptions qualify InvokeTool.
type ToolOptions struct {
	Actor  string
	Scopes []string // the caller's scopes, passed to row invocations; nil = all
	// Workflow, when set, is the only workflow the run may belong to (the
	// scoped API): a run of another is ENotFound.
	Workflow string
}

// ResourceOptions qualify ReadResource.
type ResourceOptions struct {
	// Workflow, when set, is the only workflow the run may belong to.
	Workflow string
}

// InvokeTool runs tool name of the run's current state with input and
// returns its result. EForbidden when the tool is not bound to the current
// state, EInvalid when input does not match its expects.
func (e *Engine) InvokeTool(ctx context.Context, runID, name string, input map[string]any, o ToolOptions) (any, error) {
	r, err := e.Lookup(ctx, runID, o.Workflow)
	if err != nil {
		return nil, err
	}
	st := r.StateDef()
	var t *workflow.Tool
	if st != nil {
		t, _ = st.Tool(name)
	}
	if t == nil {
		return nil, protocol.Errorf(protocol.EForbidden, "Tool %s is not available in state %s. Tools here: %s.", quote(name), r.State, listOr(toolNames(st), "none")).
			With("state", r.State).With("tool", name).With("allowed", toolNames(st))
	}
	if err := protocol.CheckExpects(t.Expects, input); err != nil {
		return nil, err
	}
	if err := protocol.CheckConstraints(t.Constraints, input); err != nil {
		return nil, err
	}
	if t.Handler != nil {
		res, err := t.Handler(ctx, workflow.ToolCall{RunID: r.ID, State: r.State, Data: r.Data, Input: input})
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, internal("tool "+name+" failed", err)
		}
		return res, nil
	}
	if e.invoker == nil {
		return nil, protocol.Errorf(protocol.ENotSupported, "Tool %s is bound to directory row %s, but this server has no OIP invoker.", quote(name), quote(t.Row))
	}
	res, _, _, err := e.invoker.InvokeRow(ctx, RowCall{
		Key: t.Row, Input: input, RunID: r.ID, State: r.State, Tool: name,
		Actor: actorOr(o.Actor), Scopes: o.Scopes,
	})
	return res, err
}

func toolNames(st *workflow.State) []string {
	var out []string
	if st != nil {
		for _, t := range st.Tools {
			out = append(out, t.Name)
		}
	}
	return out
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}

// Content is a resource's or skill's body and its media type.
type Content struct {
	Body     []byte
	MimeType string
}

// ReadResource returns the content of resource p of the run's current state.
// EForbidden when the resource is not bound to the current state.
func (e *Engine) ReadResource(ctx context.Context, runID, p string, o ResourceOptions) (*Content, error) {
	r, err := e.Lookup(ctx, runID, o.Workflow)
	if err != nil {
		return nil, err
	}
	st := r.StateDef()
	var res *workflow.Resource
	if st != nil {
		res, _ = st.Resource(p)
	}
	if res == nil {
		var names []string
		if st != nil {
			for _, x := range st.Resources {
				names = append(names, x.Path)
			}
		}
		return nil, protocol.Errorf(protocol.EForbidden, "Resource %s is not available in state %s. Resources here: %s.", quote(p), r.State, listOr(names, "none")).
			With("state", r.State).With("resource", p).With("allowed", names)
	}
	mt := res.MimeType
	if mt == "" {
		mt = "text/plain; charset=utf-8"
	}
	switch {
	case res.Handler != nil:
		b, err := res.Handler(ctx, workflow.ResourceRequest{RunID: r.ID, State: r.State, Path: p, Data: r.Data})
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, pe
			}
			return nil, internal("resource "+p+" failed", err)
		}
		return &Content{Body: b, MimeType: mt}, nil
	case res.File != "":
		b, err := readInside(res.FS, res.File)
		if err != nil {
			return nil, internal("resource "+p+" cannot be read", err)
		}
		return &Content{Body: b, MimeType: mt}, nil
	default:
		return &Content{Body: []byte(res.Text), MimeType: mt}, nil
	}
}

// Skill returns the SKILL.md served at /skills/{p}.
func (e *Engine) Skill(p string) (*Content, error) {
	s, ok := e.skills[p]
	if !ok {
		return nil, protocol.Errorf(protocol.ENotFound, "Skill not found: no state links a skill at %s.", quote(p))
	}
	return skillContent(p, s)
}

// SkillAt returns the SKILL.md at p of version version of workflowID: what
// the frames of a run pinned to a version this process does not serve
// link (their active_skill.url names the version).
func (e *Engine) SkillAt(ctx context.Context, p, workflowID, version string) (*Content, error) {
	d, err := e.definition(ctx, workflowID, version)
	if err != nil {
		return nil, err
	}
	for _, st := range d.States {
		if st.Skill != nil && st.Skill.Path == p {
			return skillContent(p, st.Skill)
		}
	}
	return nil, protocol.Errorf(protocol.ENotFound, "Skill not found: no state of %s version %s links a skill at %s.", workflowID, version, quote(p))
}

func skillContent(p string, s *workflow.Skill) (*Content, error) {
	body := s.Content
	if body == nil {
		b, err := readInside(s.FS, s.Path)
		if err != nil {
			return nil, internal("skill "+p+" cannot be read", err)
		}
		body = b
	}
	return &Content{Body: body, MimeType: "text/markdown; charset=utf-8"}, nil
}

// readInside reads name from fsys; the name must stay inside it.
func readInside(fsys fs.FS, name string) ([]byte, error) {
	clean := path.Clean(name)
	if fsys == nil || !fs.ValidPath(clean) {
		return nil, errors.New("path escapes its root")
	}
	return fs.ReadFile(fsys, clean)
}
