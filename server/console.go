package server

import (
	"net/http"
	"strings"

	"github.com/asmp-dev/asmp/internal/edge/httpx"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/server/console"
)

// consolePrefix is where the web console is served.
const consolePrefix = "/console/"

// consoleRoutes serves the web console (its static files, open to all:
// they hold no data) and the diagram it draws, as SVG.
func (s *Server) consoleRoutes() []httpx.Route {
	files := console.Handler(consolePrefix)
	moved := http.RedirectHandler(consolePrefix, http.StatusMovedPermanently)
	return append(s.route("GET /visualize.svg", auth.ScopeRead, s.visualizeSVG),
		// The console's files need no token (isConsoleFile); what they
		// fetch from the API does.
		httpx.Route{Method: http.MethodGet, Path: consolePrefix, Handle: func(w http.ResponseWriter, r *http.Request) error {
			files.ServeHTTP(w, r)
			return nil
		}},
		httpx.Route{Method: http.MethodGet, Path: "/console", Handle: func(w http.ResponseWriter, r *http.Request) error {
			moved.ServeHTTP(w, r)
			return nil
		}})
}

// isConsoleFile reports whether a request is for one of the console's
// static files, which need no token.
func isConsoleFile(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, consolePrefix))
}

// visualizeSVG serves GET /visualize.svg?workflow_id=&run_id=: the diagram
// of /visualize alone, as an SVG document, the run's state highlighted.
func (s *Server) visualizeSVG(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	def, run, err := s.e.Diagram(r.Context(), c.wf, q.Get("workflow_id"), q.Get("run_id"))
	if err != nil {
		return err
	}
	current := ""
	if run != nil {
		current = run.State
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h["Cache-Control"] = noStore
	_, _ = w.Write([]byte(DiagramSVG(def, current)))
	return nil
}
