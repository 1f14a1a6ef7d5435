package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// call is what every API handler gets besides the request.
type call struct {
	root  string // the server's base URL
	base  string // the API base: root, or root/w/{workflow_id}
	wf    string // the scoping workflow, "" at the root
	actor auth.Principal
}

type apiFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route registers pattern ("METHOD /path") at the root and under
// /w/{workflow_id}, requiring scope, plus a JSON 405 for other methods.
func (s *Server) route(pattern, scope string, h apiFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	for _, prefix := range []string{"", "/w/{workflow_id}"} {
		p := prefix + path
		if p == "/w/{workflow_id}/{$}" {
			s.mux.Handle(method+" /w/{workflow_id}", s.api(scope, h))
		}
		s.mux.Handle(method+" "+p, s.api(scope, h))
		s.allow(p, method)
	}
}

// allow records that method serves path, and answers other methods with a
// JSON 405 naming the allowed ones.
func (s *Server) allow(path, method string) {
	if s.allowed == nil {
		s.allowed = map[string][]string{}
	}
	first := len(s.allowed[path]) == 0
	s.allowed[path] = append(s.allowed[path], method)
	if !first {
		return
	}
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		methods := s.allowed[path]
		w.Header().Set("Allow", strings.Join(methods, ", "))
		httpx.WriteJSON(w, http.StatusMethodNotAllowed, map[string]any{
			"error": "method_not_allowed",
			"hint":  "Method " + r.Method + " is not allowed here; use " + strings.Join(methods, " or ") + ".",
		})
	})
}

func (s *Server) api(scope string, h apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{root: s.baseURL(r), actor: auth.FromContext(r.Context())}
		c.base = c.root
		if wf := r.PathValue("workflow_id"); wf != "" {
			if _, ok := s.e.Workflow(wf); !ok {
				httpx.WriteError(w, s.log, protocol.Errorf(protocol.ENotFound, "Workflow not found: %q is not served here. Served workflows: %s.", wf, strings.Join(s.e.WorkflowIDs(), ", ")))
				return
			}
			c.wf = wf
			c.base = c.root + "/w/" + wf
		}
		if scope != "" && !c.actor.Has(scope) {
			httpx.WriteError(w, s.log, protocol.Errorf(protocol.EForbidden, "Token %q lacks the %q scope needed here.", c.actor.Name, scope).With("scope", scope))
			return
		}
		if err := h(w, r, c); err != nil {
			httpx.WriteError(w, s.log, err)
		}
	})
}

func (s *Server) routes() {
	s.route("GET /{$}", auth.ScopeRead, s.discovery)
	s.route("GET /workflows", auth.ScopeRead, s.workflows)
	s.route("POST /runs", auth.ScopeRuns, s.startRun)
	s.route("GET /runs/{run_id}", auth.ScopeRead, s.getRun)
	s.route("GET /runs/{run_id}/cli", auth.ScopeRead, s.getCLI)
	s.route("GET /runs/{run_id}/cli.json", auth.ScopeRead, s.getCLI)
	s.route("POST /runs/{run_id}/transitions/{action}", auth.ScopeRuns, s.transition)
	s.route("POST /runs/{run_id}/invoke/{tool}", auth.ScopeRuns, s.invoke)
	s.route("GET /runs/{run_id}/resources/{path...}", auth.ScopeRead, s.resource)
	s.route("GET /runs/{run_id}/events", auth.ScopeRead, s.events)
	s.route("GET /runs/{run_id}/stream", auth.ScopeRead, s.stream)
	s.route("GET /stream", auth.ScopeRead, s.stream) // run named by X-Run-Id or Mcp-Session-Id
	s.route("GET /skills/{path...}", auth.ScopeRead, s.skill)
	s.route("GET /openapi.json", auth.ScopeRead, s.openapi)
	s.route("GET /visualize", auth.ScopeRead, s.visualize)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if s.metrics != nil {
		mh := s.metrics.handler()
		s.mux.Handle("GET /metrics", s.api(auth.ScopeRead, func(w http.ResponseWriter, r *http.Request, c *call) error {
			mh.ServeHTTP(w, r)
			return nil
		}))
	}
	if s.opts.API != nil {
		s.mux.Handle("/api/", s.opts.API)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, nil, protocol.Errorf(protocol.ENotFound, "No endpoint at %s %s. Start at GET / or read GET /openapi.json.", r.Method, r.URL.Path))
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.e.Store().(store.Pinger); ok {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			s.log.Warn("readiness check failed", "err", err)
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "hint": "The database does not answer."})
			return
		}
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "hint": protocol.ErrorHint(err)})
			return
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) discovery(w http.ResponseWriter, r *http.Request, c *call) error {
	writeFrame(w, http.StatusOK, s.e.Discovery(c.root, c.wf), "")
	return nil
}

func (s *Server) workflows(w http.ResponseWriter, r *http.Request, c *call) error {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"workflows": s.e.Catalog(c.root, c.wf)})
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
	run, err := s.e.GetRun(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if c.wf != "" && run.WorkflowID != c.wf {
		return nil, engine.NotInWorkflow(id, c.wf)
	}
	return run, nil
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
	f, err := s.e.EncodedFrame(r.Context(), id, c.base)
	if err != nil {
		return err
	}
	if c.wf != "" && f.WorkflowID != c.wf {
		return engine.NotInWorkflow(id, c.wf)
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
	cli, err := s.e.EncodedCLI(r.Context(), id)
	if err != nil {
		return err
	}
	if c.wf != "" && cli.WorkflowID != c.wf {
		return engine.NotInWorkflow(id, c.wf)
	}
	h := w.Header()
	h["Etag"] = []string{cli.ETag}
	h["Cache-Control"] = noStore
	httpx.WriteEncoded(w, http.StatusOK, cli.Body)
	return nil
}

// parseIfMatch reads If-Match: "7", W/"7", 7 or * (any version: 0).
func parseIfMatch(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0, nil
	}
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, protocol.Errorf(protocol.EInvalid, "If-Match must be the run's ETag, e.g. \"3\" (from the frame you acted on), not %q.", r.Header.Get("If-Match"))
	}
	return n, nil
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request, c *call) error {
	raw, err := httpx.ReadBody(w, r, s.opts.MaxBody)
	if err != nil {
		return err
	}
	ifMatch, err := parseIfMatch(r)
	if err != nil {
		return err
	}
	action := r.PathValue("action")
	input, err := protocol.DecodeObject(raw, s.opts.MaxDepth)
	if err != nil {
		// An unknown run is a 404 first; a bad body is a 400 only for an
		// action that is offered now, otherwise the caller first needs to
		// learn what is (403).
		run, lerr := s.loadRun(r, c)
		if lerr != nil {
			return lerr
		}
		if oerr := s.e.CheckOffered(run, action); oerr != nil {
			return oerr
		}
		return err
	}
	// The engine reads the run itself (under its lock): no read here.
	opts := engine.TransitionOptions{IfMatch: ifMatch, Actor: c.actor.Name, Workflow: c.wf}
	if wantsNDJSON(r) {
		return s.transitionStream(w, r, c, r.PathValue("run_id"), action, input, opts)
	}
	next, err := s.e.Transition(r.Context(), r.PathValue("run_id"), action, input, opts)
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
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.Body)
}

func (s *Server) skill(w http.ResponseWriter, r *http.Request, c *call) error {
	content, err := s.e.Skill(r.PathValue("path"))
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
	after, err := intParam(r, "after", 0)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 0)
	if err != nil {
		return err
	}
	log, err := s.e.EventLog(r.Context(), run, after, int(limit))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, log)
	return nil
}

func intParam(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, protocol.Errorf(protocol.EInvalid, "Query parameter %s must be a non-negative integer, not %q.", name, v).With("field", name)
	}
	return n, nil
}

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
