package embedded

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// Constraints returns the constraints of frame's state, from the workflow
// version the frame links (_links.workflow_version): the counterpart of
// (*client.Client).Constraints, without reading the version over HTTP. A
// frame without that link has none.
func (l *Client) Constraints(ctx context.Context, frame protocol.Frame) (client.Constraints, error) {
	link, ok := frame.Links["workflow_version"]
	if !ok || link.Href == "" {
		return client.Constraints{}, nil
	}
	def, err := l.e.DefinitionAt(ctx, frame.WorkflowID, link.Version)
	if err != nil {
		return client.Constraints{}, fromProtocol(err)
	}
	var out client.Constraints
	for _, t := range def.From(frame.State) {
		if len(t.Constraints) > 0 {
			if out.Actions == nil {
				out.Actions = map[string]map[string]protocol.Constraint{}
			}
			out.Actions[t.Action] = t.Constraints
		}
	}
	if st, ok := def.State(frame.State); ok {
		for _, t := range st.Tools {
			if len(t.Constraints) > 0 {
				if out.Tools == nil {
					out.Tools = map[string]map[string]protocol.Constraint{}
				}
				out.Tools[t.Name] = t.Constraints
			}
		}
	}
	return out, nil
}

// Skill reads a skill document by the URL a frame of this client names
// (its active_skill.url: BASE/skills/PATH, with ?workflow_id=&version=
// for a version that is not the served one).
func (l *Client) Skill(ctx context.Context, rawURL string) (*client.Content, error) {
	rest, ok := strings.CutPrefix(rawURL, l.base)
	if !ok {
		return nil, fmt.Errorf("skill URL %q is not one of this client's (they start with %s)", rawURL, l.base)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return nil, fmt.Errorf("skill URL %q: %w", rawURL, err)
	}
	p := strings.TrimPrefix(u.Path, "/")
	if i := strings.Index(p, "skills/"); i >= 0 && (i == 0 || strings.HasPrefix(p, "w/")) {
		p = p[i+len("skills/"):]
	} else {
		return nil, &client.Error{Status: http.StatusNotFound, Code: protocol.ENotFound, Hint: fmt.Sprintf("No skill at %s.", rawURL)}
	}
	q := u.Query()
	c, err := l.e.Skill(p)
	if q.Get("version") != "" {
		c, err = l.e.SkillAt(ctx, p, q.Get("workflow_id"), q.Get("version"))
	}
	if err != nil {
		return nil, fromProtocol(err)
	}
	return &client.Content{Body: c.Body, MimeType: c.MimeType}, nil
}
