package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/internal/edge/paging"
	"github.com/asmp-dev/asmp/protocol"
)

// call is what every API handler gets besides the request.
type call struct {
	root  string // the server's base URL
	base  string // the API base: root, or root/w/{workflow_id}
	wf    string // the scoping workflow, "" at the root
	actor auth.Principal
}

type apiFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route returns the routes of pattern ("METHOD /path") in the ASMP API:
// at the root and under /w/{workflow_id}, requiring scope.
func (s *Server) route(pattern, scope string, h apiFunc) []httpx.Route {
	method, path, _ := strings.Cut(pattern, " ")
	hf := s.api(h)
	var rs []httpx.Route
	for _, prefix := range []string{"", "/w/{workflow_id}"} {
		p := prefix + path
		if p == "/w/{workflow_id}/{$}" {
			rs = append(rs, httpx.Route{Method: method, Path: "/w/{workflow_id}", Scope: scope, Handle: hf})
		}
		rs = append(rs, httpx.Route{Method: method, Path: p, Scope: scope, Handle: hf})
	}
	return rs
}

// api adapts h to the edge: it gives h the request's call.
func (s *Server) api(h apiFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		c := &call{root: s.baseURL(r), actor: auth.FromContext(r.Context())}
		c.base = c.root
		if wf := r.PathValue("workflow_id"); wf != "" {
			c.wf = wf
			c.base = c.root + "/w/" + wf
		}
		return h(w, r, c)
	}
}

// servedWorkflow is the check of every route under /w/{workflow_id}: the
// workflow must be one the engine serves (404 before any scope check).
func (s *Server) servedWorkflow(r *http.Request, _ *httpx.Route) error {
	if wf := r.PathValue("workflow_id"); wf != "" {
		if _, ok := s.e.Workflow(wf); !ok {
			return s.e.UnknownWorkflow(wf)
		}
	}
	return nil
}

// routes builds the edge: the ASMP API, health checks, metrics and the
// API of Options.API (the OIP ledger).
func (s *Server) routes() {
	rs := slices.Concat(
		s.route("GET /{$}", auth.ScopeRead, s.discovery),
		s.route("GET /workflows", auth.ScopeRead, s.workflows),
		s.route("GET /workflows/{wf}/versions/{version}", auth.ScopeRead, s.workflowVersion),
		s.route("POST /workflows/{wf}/migrate", auth.ScopeAdmin, s.migrate),
		s.route("POST /runs", auth.ScopeRuns, s.startRun),
		s.route("GET /runs", auth.ScopeRead, s.listRuns),
		s.route("POST /{$}", auth.ScopeRuns, s.startRun), // the protocol's other start route
		s.route("GET /runs/{run_id}", auth.ScopeRead, s.getRun),
		s.route("GET /runs/{run_id}/cli", auth.ScopeRead, s.getCLI),
		s.route("GET /runs/{run_id}/cli.json", auth.ScopeRead, s.getCLI),
		s.route("POST /runs/{run_id}/transitions/{action}", auth.ScopeRuns, s.transition),
		s.route("POST /runs/{run_id}/invoke/{tool}", auth.ScopeRuns, s.invoke),
		s.route("GET /runs/{run_id}/resources/{path...}", auth.ScopeRead, s.resource),
		s.route("GET /runs/{run_id}/events", auth.ScopeRead, s.events),
		s.route("GET /runs/{run_id}/stream", auth.ScopeRead, s.stream),
		s.route("GET /stream", auth.ScopeRead, s.stream), // run named by X-Run-Id or Mcp-Session-Id
		s.route("GET /skills/{path...}", auth.ScopeRead, s.skill),
		s.route("GET /openapi.json", auth.ScopeRead, s.openapi),
		s.route("GET /visualize", auth.ScopeRead, s.visualize),
		s.route("GET /whoami", auth.ScopeRead, s.whoami),
	)
	rs = append(rs,
		httpx.Route{Method: http.MethodGet, Path: "/healthz", Handle: func(w http.ResponseWriter, r *http.Request) error {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return nil
		}},
		httpx.Route{Method: http.MethodGet, Path: "/readyz", Handle: s.readyz})
	rs = append(rs, s.webhookRoutes()...)
	rs = append(rs, s.scheduleRoutes()...)
	rs = append(rs, s.consoleRoutes()...)
	if s.metrics != nil {
		mh := s.metrics.handler()
		rs = append(rs, httpx.Route{Method: http.MethodGet, Path: "/metrics", Scope: auth.ScopeRead, Handle: func(w http.ResponseWriter, r *http.Request) error {
			mh.ServeHTTP(w, r)
			return nil
		}})
	}
	s.edge.Mount(httpx.API{Routes: rs, Checks: []httpx.Check{s.servedWorkflow}, Prefix: "/",
		NotFound: func(r *http.Request) error {
			return protocol.Errorf(protocol.ENotFound, "No endpoint at %s %s. Start at GET / or read GET /openapi.json.", r.Method, r.URL.Path)
		}})
	s.edge.Mount(s.opts.API)
	if s.opts.MCP != nil {
		s.edge.Mount(mcpAPI(s.opts.MCP(s), s.opts.MaxBody))
	}
}

// mcpPath is where the MCP endpoint is served.
const mcpPath = "/mcp"

// mcpAPI serves h at /mcp: MCP's streamable HTTP transport answers GET
// (its notification stream), POST (messages) and DELETE (end a session).
// A message body is read here first, so that one that is not UTF-8 is
// refused like any other body (the SDK's decoder would replace the
// invalid bytes silently).
func mcpAPI(h http.Handler, maxBody int64) httpx.API {
	serve := func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodPost {
			b, err := httpx.ReadBody(w, r, maxBody)
			if err != nil {
				return err
			}
			if !utf8.Valid(b) {
				return protocol.Errorf(protocol.EInvalid, "The MCP message is not valid UTF-8; send UTF-8 JSON (invalid bytes are never replaced silently).")
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		m := &mcpErrors{ResponseWriter: w}
		h.ServeHTTP(m, r)
		return m.err()
	}
	var rs []httpx.Route
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		rs = append(rs, httpx.Route{Method: m, Path: mcpPath, Scope: auth.ScopeRead, Handle: serve})
	}
	return httpx.API{Routes: rs}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.full.Load() {
		httpx.WriteError(w, nil, protocol.Errorf(protocol.EUnavailable, "The disk was full at the last write: not ready until a write succeeds again (free space, then retry a request).").With("status", "disk_full"))
		return nil
	}
	{
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := s.e.Ping(ctx); err != nil {
			// A warning, not a failed request: written without the logger.
			s.log.Warn("readiness check failed", "err", err)
			httpx.WriteError(w, nil, protocol.Errorf(protocol.EUnavailable, "The database does not answer.").With("status", "unavailable"))
			return nil
		}
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			httpx.WriteError(w, nil, protocol.Errorf(protocol.EUnavailable, "%s", protocol.ErrorHint(err)).With("status", "unavailable"))
			return nil
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) discovery(w http.ResponseWriter, r *http.Request, c *call) error {
	if wantsHTML(r) {
		return s.home(w, c) // a browser: a page linking the diagrams and the API docs
	}
	w.Header().Set("Vary", "Accept")
	writeFrame(w, http.StatusOK, s.e.Discovery(c.root, c.wf), "")
	return nil
}

// identity is the answer of GET /whoami: the caller's principal, its
// scopes, and whether an invocation it asks to execute runs (the server
// executes, --allow-exec, and the principal holds exec).
type identity struct {
	Principal string   `json:"principal"`
	Scopes    []string `json:"scopes"`
	Exec      bool     `json:"exec"`
}

// whoami tells the caller who it is here: a client (the stdio MCP
// bridge) decides from it whether to ask for execution.
func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, c *call) error {
	scopes := []string{}
	for _, sc := range auth.AllScopes {
		if c.actor.Has(sc) {
			scopes = append(scopes, sc)
		}
	}
	httpx.WriteJSON(w, http.StatusOK, identity{Principal: c.actor.Name, Scopes: scopes,
		Exec: auth.MayExecute(s.opts.AllowExec, c.actor)})
	return nil
}

func (s *Server) workflows(w http.ResponseWriter, r *http.Request, c *call) error {
	cat := s.e.Catalog(c.root, c.wf)
	for i := range cat {
		vs, err := s.e.Versions(r.Context(), c.base, cat[i].WorkflowID)
		if err != nil {
			return err
		}
		cat[i].Versions = vs
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"workflows": cat})
	return nil
}

func (s *Server) readObject(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	return httpx.ReadObject(w, r, s.opts.MaxBody, s.opts.MaxDepth)
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	wf := c.wf
	var data map[string]any
	for k, v := range body {
		switch k {
		case "workflow_id":
			id, ok := v.(string)
			if !ok {
				return protocol.Errorf(protocol.EInvalid, "workflow_id must be a string.").With("field", "workflow_id")
			}
			if c.wf != "" && id != c.wf {
				return protocol.Errorf(protocol.EInvalid, "This API is scoped to workflow %q; workflow_id %q does not match. Omit workflow_id here.", c.wf, id).With("field", "workflow_id")
			}
			wf = id
		case "data":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return protocol.Errorf(protocol.EInvalid, "data must be a JSON object.").With("field", "data")
			}
			data = m
		default:
			return protocol.Errorf(protocol.EInvalid, "Unknown field %q: the body of POST /runs takes workflow_id and data.", k).With("field", k)
		}
	}
	run, err := s.e.StartRun(r.Context(), wf, data, engine.StartOptions{Actor: c.actor.Name})
	if err != nil {
		return err
	}
	f := s.e.Frame(run, c.base)
	w.Header().Set("Location", c.base+"/runs/"+run.ID)
	writeFrame(w, http.StatusCreated, f, run.ETag())
	return nil
}

// loadRun reads the path's run and checks it belongs to the scoping workflow.
func (s *Server) loadRun(r *http.Request, c *call) (*engine.Run, error) {
	id, err := requireRunID(r)
	if err != nil {
		return nil, err
	}
	return s.e.Lookup(r.Context(), id, c.wf)
}

// requireRunID returns runID(r), or an error when the request names no run.
func requireRunID(r *http.Request) (string, error) {
	if id := runID(r); id != "" {
		return id, nil
	}
	return "", protocol.Errorf(protocol.EInvalid, "Name the run: use /runs/{run_id}/stream, or send its id in X-Run-Id or Mcp-Session-Id.")
}

// runID returns the run id of the path, or of the Mcp-Session-Id / X-Run-Id
// headers when the path names none.
func runID(r *http.Request) string {
	id := r.PathValue("run_id")
	if id == "" {
		id = r.Header.Get("X-Run-Id")
	}
	if id == "" {
		id = r.Header.Get("Mcp-Session-Id")
	}
	return id
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := requireRunID(r)
	if err != nil {
		return err
	}
	f, err := s.answers.Frame(r.Context(), id, c.wf, c.base)
	if err != nil {
		return err
	}
	h := w.Header()
	h["Etag"] = []string{f.ETag}
	if match := r.Header.Get("If-None-Match"); match != "" && match == f.ETag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h["Cache-Control"] = noStore
	httpx.WriteEncoded(w, http.StatusOK, f.Body)
	return nil
}

func (s *Server) getCLI(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := requireRunID(r)
	if err != nil {
		return err
	}
	cli, err := s.answers.CLI(r.Context(), id, c.wf)
	if err != nil {
		return err
	}
	h := w.Header()
	h["Etag"] = []string{cli.ETag}
	h["Cache-Control"] = noStore
	httpx.WriteEncoded(w, http.StatusOK, cli.Body)
	return nil
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request, c *call) error {
	raw, err := httpx.ReadBody(w, r, s.opts.MaxBody)
	if err != nil {
		return err
	}
	// The engine refuses in the documented order (engine.Submit).
	req := engine.TransitionRequest{RunID: r.PathValue("run_id"), Action: r.PathValue("action"),
		IfMatch: r.Header.Get("If-Match"), Body: raw, MaxDepth: s.opts.MaxDepth, Actor: c.actor.Name, Scope: c.wf}
	if wantsNDJSON(r) {
		return s.transitionStream(w, r, c, req)
	}
	next, err := s.e.Submit(r.Context(), req)
	if err != nil {
		return err
	}
	writeFrame(w, http.StatusOK, s.e.Frame(next, c.base), next.ETag())
	return nil
}

func (s *Server) invoke(w http.ResponseWriter, r *http.Request, c *call) error {
	input, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	// A row-bound tool may run a command for as long as its row allows:
	// the answer must not be cut off by the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	res, err := s.e.InvokeTool(r.Context(), r.PathValue("run_id"), r.PathValue("tool"), input,
		engine.ToolOptions{Actor: c.actor.Name, Scopes: c.actor.Scopes, Workflow: c.wf})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"result": res})
	return nil
}

func (s *Server) resource(w http.ResponseWriter, r *http.Request, c *call) error {
	content, err := s.e.ReadResource(r.Context(), r.PathValue("run_id"), r.PathValue("path"), engine.ResourceOptions{Workflow: c.wf})
	if err != nil {
		return err
	}
	writeContent(w, content)
	return nil
}

func writeContent(w http.ResponseWriter, c *engine.Content) {
	w.Header().Set("Content-Type", c.MimeType)
	// A resource is the workflow author's content: as a page (text/html,
	// SVG) it runs in a sandbox, an origin of its own, never the API's.
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.Body)
}

func (s *Server) skill(w http.ResponseWriter, r *http.Request, c *call) error {
	var content *engine.Content
	var err error
	if q := r.URL.Query(); q.Get("version") != "" {
		content, err = s.e.SkillAt(r.Context(), r.PathValue("path"), q.Get("workflow_id"), q.Get("version"))
	} else {
		content, err = s.e.Skill(r.PathValue("path"))
	}
	if err != nil {
		return err
	}
	writeContent(w, content)
	return nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, c *call) error {
	run, err := s.loadRun(r, c)
	if err != nil {
		return err
	}
	p, err := eventsList.Parse(r.URL.Query())
	if err != nil {
		return err
	}
	after, err := paging.Seq(p.After, "after")
	if err != nil {
		return err
	}
	log, err := s.e.EventLog(r.Context(), run, after, p.Limit)
	if err != nil {
		return err
	}
	last := after
	if n := len(log.Events); n > 0 {
		last = log.Events[n-1].ID
	}
	log.NextCursor = eventsList.Next(strconv.FormatInt(last, 10), last < run.Version)
	httpx.WriteJSON(w, http.StatusOK, log)
	return nil
}

// eventsList pages GET /runs/{run_id}/events (after=SEQ still accepted).
var eventsList = paging.List{Name: "events", Default: 100, Max: 1000, After: "after"}

// noStore is the shared value of Cache-Control on every frame and CLI
// answer (net/http never modifies header value slices).
var noStore = []string{"no-store"}

func writeFrame(w http.ResponseWriter, status int, f protocol.Frame, etag string) {
	h := w.Header()
	if etag != "" {
		h["Etag"] = []string{etag} // canonical form of ETag: no re-canonicalising per request
	}
	h["Cache-Control"] = noStore
	httpx.WriteJSON(w, status, f)
}

func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
}
