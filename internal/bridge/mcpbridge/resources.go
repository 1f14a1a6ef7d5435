package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/protocol"
)

// URIs of the bridge's resources.
const (
	// RunURIPrefix starts asmp://runs/{run_id} (the run's frame) and
	// asmp://runs/{run_id}/resources/{path} (a stage resource).
	RunURIPrefix = "asmp://runs/"
	// LedgerURIPrefix starts asmp://ledger/{inv_ID}: a record with its
	// inclusion proof, checked against the signed checkpoint.
	LedgerURIPrefix = "asmp://ledger/"
)

// RunURI is the resource URI of a run's frame.
func RunURI(runID string) string { return RunURIPrefix + url.PathEscape(runID) }

// StageResourceURI is the resource URI of a stage resource of a run.
func StageResourceURI(runID, path string) string {
	return RunURI(runID) + "/resources/" + strings.TrimLeft(path, "/")
}

func (s *session) addTemplates() {
	h := s.readResource
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: RunURIPrefix + "{run_id}", Name: "run",
		Description: "A run's current State Frame.", MIMEType: "application/json"}, h)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: RunURIPrefix + "{run_id}/resources/{+path}", Name: "stage-resource",
		Description: "A resource bound to the run's current state."}, h)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: LedgerURIPrefix + "{inv_ID}", Name: "ledger-record",
		Description: "An OIP ledger record with its inclusion proof, verified against the signed checkpoint.", MIMEType: "application/json"}, h)
}

// readResource reads an asmp:// URI through the server.
func (s *session) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx = withCaller(ctx, req.Extra)
	uri := req.Params.URI
	text, mime, err := s.read(ctx, uri)
	if err != nil {
		if client.IsNotFound(err) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, fmt.Errorf("%s: %s", uri, client.HintOf(err))
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

func (s *session) read(ctx context.Context, uri string) (text, mime string, err error) {
	switch {
	case strings.HasPrefix(uri, RunURIPrefix):
		rest := strings.TrimPrefix(uri, RunURIPrefix)
		id, sub, _ := strings.Cut(rest, "/")
		id, err = url.PathUnescape(id)
		if err != nil || id == "" {
			return "", "", refusal(404, "No run in %s.", uri)
		}
		if sub == "" {
			f, err := s.runs.Frame(ctx, id)
			if err != nil {
				return "", "", err
			}
			b, err := json.MarshalIndent(f.Frame, "", "  ")
			return string(b), "application/json", err
		}
		p, ok := strings.CutPrefix(sub, "resources/")
		if !ok || p == "" {
			return "", "", refusal(404, "No resource at %s: use asmp://runs/{run_id} or asmp://runs/{run_id}/resources/{path}.", uri)
		}
		if p, err = url.PathUnescape(p); err != nil {
			return "", "", refusal(404, "No resource at %s.", uri)
		}
		c, err := s.runs.Resource(ctx, id, p)
		if err != nil {
			return "", "", err
		}
		return string(c.Body), c.MimeType, nil
	case strings.HasPrefix(uri, LedgerURIPrefix):
		inv := strings.TrimPrefix(uri, LedgerURIPrefix)
		rec, proof, err := verify.ReceiptFrom(ctx, s.c, inv, "")
		if err != nil {
			return "", "", err
		}
		b, err := json.MarshalIndent(map[string]any{"record": rec, "proof": proof, "verified": true}, "", "  ")
		return string(b), "application/json", err
	}
	return "", "", refusal(404, "No resource at %s.", uri)
}

// syncRunResources registers the current run's frame and stage
// resources as resources, and its active skill as a prompt.
func (s *session) syncRunResources(ctx context.Context, f *protocol.Frame) {
	uris := []string{RunURI(f.RunID)}
	res := []*mcp.Resource{{URI: RunURI(f.RunID), Name: "run", Title: fmt.Sprintf("Run %s (%s, %s)", f.RunID, f.WorkflowID, f.State), MIMEType: "application/json",
		Description: "The session's current run: its State Frame."}}
	if !protocol.Terminal(f.Status) {
		marker := "/runs/" + f.RunID + "/resources/"
		for _, r := range f.Resources {
			i := strings.Index(r.URI, marker)
			if i < 0 {
				continue
			}
			u := StageResourceURI(f.RunID, r.URI[i+len(marker):])
			name := r.Name
			if name == "" {
				name = r.URI[i+len(marker):]
			}
			uris = append(uris, u)
			res = append(res, &mcp.Resource{URI: u, Name: name, MIMEType: r.MimeType, Description: "A resource of state " + f.State + "."})
		}
	}
	runRes, _ := json.Marshal(res[0])
	s.mu.Lock()
	old := s.res
	oldPrompts := s.prompt
	oldRunRes := s.runRes
	s.res, s.runRes = uris, string(runRes)
	s.mu.Unlock()
	var gone []string
	for _, u := range old {
		if !slices.Contains(uris, u) {
			gone = append(gone, u)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveResources(gone...)
	}
	for i, r := range res {
		if !slices.Contains(old, uris[i]) || (i == 0 && oldRunRes != string(runRes)) {
			s.srv.AddResource(r, s.readResource)
		}
	}

	var prompts []string
	if sk := f.ActiveSkill; sk != nil && sk.URL != "" && !protocol.Terminal(f.Status) {
		name := protocol.ToolName(sk.Name)
		prompts = append(prompts, name)
		skill := *sk
		s.srv.AddPrompt(&mcp.Prompt{Name: name, Title: sk.Name, Description: strings.TrimSpace("The skill of state " + f.State + ". " + sk.ContextSummary)},
			func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				ctx = withCaller(ctx, req.Extra)
				c, err := s.runs.Skill(ctx, skill.URL)
				if err != nil {
					return nil, fmt.Errorf("skill %s: %s", skill.Name, client.HintOf(err))
				}
				text := string(c.Body)
				if skill.ContextSummary != "" {
					text = "Context: " + skill.ContextSummary + "\n\n" + text
				}
				return &mcp.GetPromptResult{Description: "Skill " + skill.Name,
					Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
			})
	}
	var stale []string
	for _, p := range oldPrompts {
		if !slices.Contains(prompts, p) {
			stale = append(stale, p)
		}
	}
	if len(stale) > 0 {
		s.srv.RemovePrompts(stale...)
	}
	s.mu.Lock()
	s.prompt = prompts
	s.mu.Unlock()
	_ = ctx
}
