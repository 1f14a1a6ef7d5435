package server

import (
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// visualize serves GET /visualize?workflow_id=&run_id=&version=: an HTML
// page with the FSM drawn as inline SVG (no script, no CDN: it works
// offline), the current state of the run highlighted. A run is drawn on the
// version it is pinned to; version= draws a stored version of the workflow.
func (s *Server) visualize(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	wfID := q.Get("workflow_id")
	if wfID == "" {
		wfID = c.wf
	}
	var run *engine.Run
	if id := q.Get("run_id"); id != "" {
		var err error
		run, err = s.e.GetRun(r.Context(), id)
		if err != nil {
			return err
		}
		if wfID != "" && run.WorkflowID != wfID {
			return protocol.Errorf(protocol.EInvalid, "Run %s belongs to workflow %q, not %q.", id, run.WorkflowID, wfID)
		}
		wfID = run.WorkflowID
	}
	def := s.e.Default()
	if wfID != "" {
		d, ok := s.e.Workflow(wfID)
		if !ok {
			return protocol.Errorf(protocol.ENotFound, "Workflow not found: %q is not served here. Served workflows: %s.", wfID, strings.Join(s.e.WorkflowIDs(), ", "))
		}
		def = d
	}
	if run != nil {
		def = run.Def // the version the run is pinned to
	} else if v := q.Get("version"); v != "" {
		d, err := s.e.DefinitionAt(r.Context(), def.ID, v)
		if err != nil {
			return err
		}
		def = d
	}
	page := vizPage{Def: def, SVG: template.HTML(DiagramSVG(def, ""))}
	for _, d := range s.e.Workflows() {
		page.Workflows = append(page.Workflows, d.ID)
	}
	if run != nil {
		page.Run = run
		page.Status = run.Status()
		page.SVG = template.HTML(DiagramSVG(def, run.State))
		page.FrameURL = c.base + "/runs/" + run.ID
	}
	page.Mermaid = def.Mermaid(page.current())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	return vizTemplate.Execute(w, page)
}

type vizPage struct {
	Def       *workflow.Definition
	Workflows []string
	Run       *engine.Run
	Status    string
	FrameURL  string
	SVG       template.HTML
	Mermaid   string
}

func (p vizPage) current() string {
	if p.Run != nil {
		return p.Run.State
	}
	return ""
}

var vizTemplate = template.Must(template.New("viz").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Def.ID}} — asmp</title>
<style>
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1f2937;background:#fafafa}
h1{font-size:1.3rem;margin:0 0 .2rem} .sub{color:#6b7280;margin:0 0 1rem}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:1rem;overflow:auto}
nav a{margin-right:.8rem} code,pre{font:13px ui-monospace,monospace} dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{color:#6b7280}
</style></head><body>
<h1>{{.Def.ID}}</h1>
<p class="sub">{{.Def.Description}}</p>
<p class="sub">workflow version <code id="workflow-version">{{.Def.Version}}</code></p>
<nav>{{range .Workflows}}<a href="?workflow_id={{.}}">{{.}}</a>{{end}}</nav>
{{if .Run}}<div class="card" style="margin:1rem 0"><dl>
<dt>run</dt><dd><a href="{{.FrameURL}}"><code>{{.Run.ID}}</code></a></dd>
<dt>state</dt><dd><strong id="current-state">{{.Run.State}}</strong></dd>
<dt>status</dt><dd id="status">{{.Status}}</dd>
<dt>version</dt><dd>{{.Run.Version}}</dd>
{{if .Run.Milestones}}<dt>milestones</dt><dd>{{range $i, $m := .Run.Milestones}}{{if $i}} → {{end}}{{$m}}{{end}}</dd>{{end}}
</dl></div>{{end}}
<div class="card" id="diagram">{{.SVG}}</div>
<details style="margin-top:1rem"><summary>Mermaid source</summary><pre>{{.Mermaid}}</pre></details>
</body></html>
`))

// DiagramSVG draws def as an SVG: states in columns by their distance from
// the initial state, transitions as labelled arrows, current highlighted.
func DiagramSVG(def *workflow.Definition, current string) string {
	const (
		boxW, boxH = 170, 46
		colGap     = 110
		rowGap     = 46
		margin     = 40
	)
	layer := map[string]int{def.InitialState: 0}
	queue := []string{def.InitialState}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		for _, t := range def.From(st) {
			if _, ok := layer[t.To]; !ok {
				layer[t.To] = layer[st] + 1
				queue = append(queue, t.To)
			}
		}
	}
	maxLayer := 0
	for _, l := range layer {
		maxLayer = max(maxLayer, l)
	}
	var cols [][]string
	for _, st := range def.States {
		l, ok := layer[st.Name]
		if !ok {
			l = maxLayer + 1
			layer[st.Name] = l
		}
		for len(cols) <= l {
			cols = append(cols, nil)
		}
		cols[l] = append(cols[l], st.Name)
	}
	rows := 0
	for _, col := range cols {
		rows = max(rows, len(col))
	}
	type pt struct{ x, y int }
	pos := map[string]pt{}
	height := margin*2 + rows*boxH + (rows-1)*rowGap + 60
	for ci, col := range cols {
		colH := len(col)*boxH + (len(col)-1)*rowGap
		y0 := (height - colH) / 2
		for ri, name := range col {
			pos[name] = pt{margin + ci*(boxW+colGap), y0 + ri*(boxH+rowGap)}
		}
	}
	width := margin*2 + len(cols)*boxW + (len(cols)-1)*colGap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s state diagram">`, width, height, width, height, template.HTMLEscapeString(def.ID))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker></defs>`)
	b.WriteString(`<g font-family="system-ui,sans-serif" font-size="12">`)
	for i, t := range def.Transitions {
		a, z := pos[t.From], pos[t.To]
		dash := ""
		if t.Guard != nil {
			dash = ` stroke-dasharray="5 4"`
		}
		label := t.Action
		if len(t.Expects) > 0 {
			label += " {" + strings.Join(sortedKeys(t.Expects), ",") + "}"
		}
		var d string
		var lx, ly int
		switch {
		case t.From == t.To:
			x, y := a.x+boxW/2, a.y
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x-20, y, x-40, y-50, x+40, y-50, x+20, y)
			lx, ly = x, y-42
		case z.x > a.x:
			x1, y1 := a.x+boxW, a.y+boxH/2
			x2, y2 := z.x, z.y+boxH/2
			mx := (x1 + x2) / 2
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, mx, y1, mx, y2, x2, y2)
			lx, ly = mx, (y1+y2)/2-6+(i%2)*12
		default:
			x1, y1 := a.x+boxW/2, a.y+boxH
			x2, y2 := z.x+boxW/2, z.y+boxH
			dip := max(y1, y2) + 40 + (i%3)*12
			d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1, dip, x2, dip, x2, y2)
			lx, ly = (x1+x2)/2, dip-8
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#6b7280" stroke-width="1.4" marker-end="url(#arrow)"%s/>`, d, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#374151" paint-order="stroke" stroke="#fff" stroke-width="4">%s</text>`, lx, ly, template.HTMLEscapeString(label))
	}
	for _, st := range def.States {
		p := pos[st.Name]
		fill, stroke, sw := "#ffffff", "#9ca3af", "1.5"
		if len(def.From(st.Name)) == 0 {
			stroke = "#4b5563"
		}
		cls := "state"
		if st.Name == current {
			fill, stroke, sw = "#fde68a", "#b45309", "3"
			cls = "state current"
		}
		fmt.Fprintf(&b, `<g class="%s" data-state="%s"><title>%s</title>`, cls, st.Name, template.HTMLEscapeString(st.Hint))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="10" fill="%s" stroke="%s" stroke-width="%s"/>`, p.x, p.y, boxW, boxH, fill, stroke, sw)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="600" font-size="13">%s</text>`, p.x+boxW/2, p.y+boxH/2+5, st.Name)
		b.WriteString(`</g>`)
		if st.Name == def.InitialState {
			fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="6" fill="#111827"/><path d="M%d,%d L%d,%d" stroke="#111827" stroke-width="1.4" marker-end="url(#arrow)"/>`, p.x-26, p.y+boxH/2, p.x-20, p.y+boxH/2, p.x, p.y+boxH/2)
		}
	}
	b.WriteString(`</g></svg>`)
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
