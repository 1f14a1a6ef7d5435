package httpx

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/protocol"
)

// Route is one endpoint an API contributes to an Edge: a method and a
// path pattern of net/http's ServeMux (without the method), the scope the
// caller must hold ("" for none), and the handler.
type Route struct {
	Method string
	Path   string
	Scope  string
	Handle HandlerFunc
}

// Check is one step an Edge runs before a route's handler, given the
// request and its route (which it must not change). The error it returns
// is the answer, and the handler does not run.
type Check func(r *http.Request, rt *Route) error

// API is a set of routes with the way their errors are worded: what a
// package that serves HTTP (the ASMP API, the OIP ledger) contributes to
// an Edge. It holds handlers only; the Edge checks and answers.
type API struct {
	Routes []Route
	// Errors is how the API's error bodies are worded.
	Errors ErrorStyle
	// Checks run before the scope check of each of the API's routes, in
	// order, after the Edge's own checks.
	Checks []Check
	// Prefix, when not "", claims every path under it (e.g. "/api/"): a
	// request there that no route serves is answered with NotFound's
	// error (or a generic 404).
	Prefix   string
	NotFound func(r *http.Request) error
}

// Edge routes requests to the handlers of its APIs, and is the one place
// where a request is checked and an error answered: for each route it runs
// the Edge's checks, the API's checks, and the scope check (RequireScope),
// then the handler; a returned error is written with the API's ErrorStyle.
// A path some route serves answers other methods with 405 and an Allow
// header. Mount every API before the Edge serves its first request.
type Edge struct {
	mux     *http.ServeMux
	routes  []Route
	log     *slog.Logger
	checks  []Check
	allowed map[string]*allowed // path pattern -> methods, for 405 answers
}

// allowed is what a 405 on one path pattern answers.
type allowed struct {
	methods []string
	errors  ErrorStyle
}

// NewEdge returns an Edge without routes. Server faults are logged to log
// (nil: not logged); checks run before every route's handler, in order.
func NewEdge(log *slog.Logger, checks ...Check) *Edge {
	return &Edge{mux: http.NewServeMux(), log: log, checks: checks, allowed: map[string]*allowed{}}
}

// Mount registers every route of api, the 405 answers of their paths and
// api's Prefix.
func (e *Edge) Mount(api API) {
	for i := range api.Routes {
		e.handle(&api, api.Routes[i])
	}
	if api.Prefix != "" {
		notFound := api.NotFound
		if notFound == nil {
			notFound = func(r *http.Request) error {
				return protocol.Errorf(protocol.ENotFound, "No endpoint at %s %s.", r.Method, protocol.Truncate(r.URL.Path, 200))
			}
		}
		style := api.Errors
		e.mux.HandleFunc(api.Prefix, func(w http.ResponseWriter, r *http.Request) {
			style.Write(w, e.log, notFound(r))
		})
	}
}

func (e *Edge) handle(api *API, rt Route) {
	e.routes = append(e.routes, rt)
	checks := append(slices.Clip(e.checks), api.Checks...)
	style := api.Errors
	e.mux.Handle(rt.Method+" "+rt.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := serve(w, r, &rt, checks); err != nil {
			style.Write(w, e.log, err)
		}
	}))
	a := e.allowed[rt.Path]
	if a == nil {
		a = &allowed{errors: style}
		e.allowed[rt.Path] = a
		e.mux.HandleFunc(rt.Path, func(w http.ResponseWriter, r *http.Request) {
			a.errors.Write(w, e.log, methodNotAllowed(w, r, a.methods))
		})
	}
	if !slices.Contains(a.methods, rt.Method) {
		a.methods = append(a.methods, rt.Method)
		if rt.Method == http.MethodGet && !slices.Contains(a.methods, http.MethodHead) {
			a.methods = append(a.methods, http.MethodHead) // the mux serves HEAD wherever it serves GET
		}
		slices.Sort(a.methods)
	}
}

// serve runs the checks, the scope check and the handler of rt.
func serve(w http.ResponseWriter, r *http.Request, rt *Route, checks []Check) error {
	for _, c := range checks {
		if err := c(r, rt); err != nil {
			return err
		}
	}
	if err := RequireScope(r, rt.Scope); err != nil {
		return err
	}
	return rt.Handle(w, r)
}

// Routes returns every route mounted, in the order they were.
func (e *Edge) Routes() []Route {
	return slices.Clone(e.routes)
}

// ServeHTTP implements http.Handler.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mux.ServeHTTP(w, r)
}

// RequireScope is the one scope check of asmp's HTTP edge: it returns nil
// when the caller of r (auth.FromContext) holds scope or scope is "", and
// otherwise the 403 error whose hint names the route and the scope.
func RequireScope(r *http.Request, scope string) error {
	if scope == "" {
		return nil
	}
	return CheckScope(auth.FromContext(r.Context()), r.Method, r.URL.Path, scope)
}

// CheckScope is RequireScope for a caller already authenticated (the MCP
// endpoint's in-process calls): nil when p holds scope, else the 403 of
// the route method path.
func CheckScope(p auth.Principal, method, path, scope string) error {
	if scope == "" || p.Has(scope) {
		return nil
	}
	return protocol.Errorf(protocol.EForbidden, "%s %s needs the %q scope, which %q does not hold; use a token with it.",
		method, protocol.Truncate(path, 200), scope, p.Name).With("scope", scope)
}

// methodNotAllowed sets the Allow header to methods and returns the 405
// error that names them.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, methods []string) error {
	allow := strings.Join(methods, ", ")
	w.Header().Set("Allow", allow)
	return protocol.Errorf(protocol.EMethodNotAllowed, "%s is not allowed on %s; use %s.", r.Method, protocol.Truncate(r.URL.Path, 200), allow)
}
