package server

import (
	"html/template"
	"net/http"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// wantsHTML reports whether the request's Accept header names text/html
// first, as browsers send it. API clients (no Accept, */*, or JSON first)
// get the discovery frame.
func wantsHTML(r *http.Request) bool { return httpx.WantsHTML(r) }

// homePage is what a browser opening GET / gets: where to go next.
type homePage struct {
	Base      string
	Workflows []protocol.WorkflowInfo
}

var homeTemplate = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>asmp</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em;color:#222}
code{background:#f2f2f2;padding:0 .3em;border-radius:3px}li{margin:.3em 0}</style></head>
<body><h1>asmp</h1>
<p>This is an ASMP server: workflows as state machines over HTTP and JSON. API clients get
the discovery frame at <a href="{{.Base}}/">{{.Base}}/</a> (any <code>Accept</code> but
<code>text/html</code> first).</p>
<h2>Workflows</h2><ul>
{{range .Workflows}}<li><b>{{.WorkflowID}}</b>{{if .Default}} (default){{end}}: {{.Description}}
 — <a href="{{$.Base}}/visualize?workflow_id={{.WorkflowID}}">diagram</a></li>
{{end}}</ul>
<h2>Next</h2><ul>
<li><a href="{{.Base}}/console/">The console</a> (<code>/console/</code>): list runs, drive them and audit the ledger.</li>
<li>In a terminal: <code>asmp attach {{.Base}}</code> drives a run in a terminal UI;
<code>asmp start {{.Base}}</code> drives one in agent mode, one command per step.</li>
<li><a href="{{.Base}}/visualize">The state diagrams</a> (<code>/visualize</code>).</li>
<li><a href="{{.Base}}/openapi.json">The API description</a> (<code>/openapi.json</code>),
<a href="{{.Base}}/workflows">the workflow catalog</a> (<code>/workflows</code>).</li>
</ul></body></html>
`))

// home writes the page for browsers.
func (s *Server) home(w http.ResponseWriter, c *call) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Vary", "Accept")
	return homeTemplate.Execute(w, homePage{Base: c.root, Workflows: s.e.Catalog(c.root, c.wf)})
}
