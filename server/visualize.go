package server

import (
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/workflow"
)

// visualize serves GET /visualize?workflow_id=&run_id=&version=: an HTML
// page with the FSM drawn as inline SVG (no script, no CDN: it works
// offline), the current state of the run highlighted. A run is drawn on the
// version it is pinned to; version= draws a stored version of the workflow.
func (s *Server) visualize(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	def, run, err := s.e.Diagram(r.Context(), c.wf, q.Get("workflow_id"), q.Get("run_id"))
	if err != nil {
		return err
	}
	if v := q.Get("version"); run == nil && v != "" {
		if def, err = s.e.DefinitionAt(r.Context(), def.ID, v); err != nil {
			return err
		}
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
		for _, m := range run.Milestones {
			if !slices.Contains(page.Milestones, m) {
				page.Milestones = append(page.Milestones, m)
			}
		}
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
	// Milestones are the run's, each once (a retry enters a state again).
	Milestones []string
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
{{if .Milestones}}<dt>milestones</dt><dd id="milestones">{{range $i, $m := .Milestones}}{{if $i}} → {{end}}{{$m}}{{end}}</dd>{{end}}
</dl></div>{{end}}
<div class="card" id="diagram">{{.SVG}}</div>
<details style="margin-top:1rem"><summary>Mermaid source</summary><pre>{{.Mermaid}}</pre></details>
</body></html>
`))

// Diagram geometry.
const (
	boxW, boxH  = 170, 46
	colGap      = 130
	rowGap      = 56
	margin      = 40
	charW       = 7 // estimated width of one label character (12px system-ui)
	labelH      = 15
	labelPad    = 3 // free space kept around every label
	legendLines = 2
)

// rect is an axis-aligned box in diagram coordinates.
type rect struct{ x, y, w, h int }

func (r rect) overlaps(o rect) bool {
	return r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h
}

func (r rect) grow(d int) rect { return rect{r.x - d, r.y - d, r.w + 2*d, r.h + 2*d} }

type pt struct{ x, y int }

// edge is one drawn transition: a cubic Bézier (c) or, for edges that go
// back or stay in their column, a polyline through the gaps between the
// columns (poly), and its placed label.
type edge struct {
	t      *workflow.Transition
	c      [4]pt // start, control 1, control 2, end (when poly is nil)
	poly   []pt
	text   string
	label  rect // where the label's text sits (its centre is the anchor)
	dashed bool
}

// diagram is the laid-out state diagram: every box, edge and label, in
// coordinates where all of them are inside [0,width]×[0,height].
type diagram struct {
	width, height int
	boxes         map[string]rect
	order         []string // states in declaration order
	edges         []edge
	legend        []string
	legendY       int
}

// at is the point of the curve at parameter u in [0,1] (by length along
// a polyline).
func (e *edge) at(u float64) pt {
	if e.poly != nil {
		total := 0.0
		for i := 1; i < len(e.poly); i++ {
			total += dist(e.poly[i-1], e.poly[i])
		}
		want := u * total
		for i := 1; i < len(e.poly); i++ {
			l := dist(e.poly[i-1], e.poly[i])
			if want <= l || i == len(e.poly)-1 {
				f := 0.0
				if l > 0 {
					f = min(want/l, 1)
				}
				a, b := e.poly[i-1], e.poly[i]
				return pt{a.x + int(f*float64(b.x-a.x)), a.y + int(f*float64(b.y-a.y))}
			}
			want -= l
		}
	}
	v := 1 - u
	f := func(a, b, c, d int) int {
		return int(v*v*v*float64(a) + 3*v*v*u*float64(b) + 3*v*u*u*float64(c) + u*u*u*float64(d))
	}
	return pt{f(e.c[0].x, e.c[1].x, e.c[2].x, e.c[3].x), f(e.c[0].y, e.c[1].y, e.c[2].y, e.c[3].y)}
}

// layoutDiagram places states in columns by their distance from the
// initial state, then every transition's label on its curve where it
// overlaps no state box and no other label (searching along the curve,
// then away from it).
func layoutDiagram(def *workflow.Definition) *diagram {
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
	d := &diagram{boxes: map[string]rect{}}
	colsH := rows*boxH + (rows-1)*rowGap
	for ci, col := range cols {
		colH := len(col)*boxH + (len(col)-1)*rowGap
		y0 := (colsH - colH) / 2
		for ri, name := range col {
			d.boxes[name] = rect{ci * (boxW + colGap), y0 + ri*(boxH+rowGap), boxW, boxH}
		}
	}
	for _, st := range def.States {
		d.order = append(d.order, st.Name)
	}
	var placed []rect
	obstacles := func() []rect {
		out := make([]rect, 0, len(d.boxes)+len(placed))
		for _, b := range d.boxes {
			out = append(out, b.grow(labelPad))
		}
		return append(out, placed...)
	}
	back := 0
	for _, t := range def.Transitions {
		a, z := d.boxes[t.From], d.boxes[t.To]
		e := edge{t: t, text: t.Action, dashed: t.Guard != nil}
		if len(t.Expects) > 0 {
			e.text += " {" + strings.Join(sortedKeys(t.Expects), ",") + "}"
		}
		switch {
		case t.From == t.To:
			x, y := a.x+boxW/2, a.y
			e.c = [4]pt{{x - 20, y}, {x - 40, y - 60}, {x + 40, y - 60}, {x + 20, y}}
		case z.x > a.x:
			x1, y1 := a.x+boxW, a.y+boxH/2
			x2, y2 := z.x, z.y+boxH/2
			mx := (x1 + x2) / 2
			e.c = [4]pt{{x1, y1}, {mx, y1}, {mx, y2}, {x2, y2}}
		case z.x == a.x:
			// Within a column: out of the right side, through the gap,
			// into the other box's right side.
			gx := a.x + boxW + 18 + (back%4)*10
			back++
			e.poly = []pt{{a.x + boxW, a.y + boxH/2 + 8}, {gx, a.y + boxH/2 + 8}, {gx, z.y + boxH/2 - 8}, {z.x + boxW, z.y + boxH/2 - 8}}
		default:
			// Backwards: down the gap left of its column, under every
			// box, up the gap right of the target's column, into its
			// right side; each one a little deeper than the last.
			bottom := 0
			for _, bx := range d.boxes {
				bottom = max(bottom, bx.y+bx.h)
			}
			dip := bottom + 30 + back*22
			gl, gr := a.x-18-(back%4)*10, z.x+boxW+18+(back%4)*10
			back++
			e.poly = []pt{{a.x, a.y + boxH - 10}, {gl, a.y + boxH - 10}, {gl, dip}, {gr, dip}, {gr, z.y + boxH - 10}, {z.x + boxW, z.y + boxH - 10}}
		}
		e.label = placeLabel(&e, obstacles())
		placed = append(placed, e.label.grow(labelPad))
		d.edges = append(d.edges, e)
	}
	d.legend = []string{"transition, labelled with its action and {expected fields}",
		"guarded transition: offered only while its guard allows it; dark border: a final state"}
	// Bounds of everything drawn, then shift it all inside the margins.
	minX, minY, maxX, maxY := 0, 0, 0, 0
	include := func(r rect) {
		minX, minY = min(minX, r.x), min(minY, r.y)
		maxX, maxY = max(maxX, r.x+r.w), max(maxY, r.y+r.h)
	}
	for _, b := range d.boxes {
		include(b)
	}
	for i := range d.edges {
		include(d.edges[i].label)
		for u := 0.0; u <= 1; u += 0.1 {
			p := d.edges[i].at(u)
			include(rect{p.x, p.y, 0, 0})
		}
	}
	include(rect{-30, 0, 0, 0}) // the initial state's dot
	dx, dy := margin-minX, margin-minY
	for k, b := range d.boxes {
		d.boxes[k] = rect{b.x + dx, b.y + dy, b.w, b.h}
	}
	for i := range d.edges {
		e := &d.edges[i]
		for j := range e.c {
			e.c[j].x += dx
			e.c[j].y += dy
		}
		for j := range e.poly {
			e.poly[j].x += dx
			e.poly[j].y += dy
		}
		e.label.x += dx
		e.label.y += dy
	}
	d.legendY = maxY + dy + 30
	d.width = maxX - minX + 2*margin
	for _, l := range d.legend {
		d.width = max(d.width, margin*2+38+len(l)*charW)
	}
	d.height = d.legendY + legendLines*18 + margin/2
	return d
}

func dist(a, b pt) float64 {
	return math.Hypot(float64(b.x-a.x), float64(b.y-a.y))
}

// placeLabel finds where e's label overlaps none of taken: on the curve
// near its middle first, then ever further above and below it.
func placeLabel(e *edge, taken []rect) rect {
	w := len(e.text)*charW + 6
	box := func(p pt) rect { return rect{p.x - w/2, p.y - labelH/2, w, labelH} }
	free := func(r rect) bool {
		for _, o := range taken {
			if r.overlaps(o) {
				return false
			}
		}
		return true
	}
	us := []float64{0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8}
	for off := 0; off <= 400; off += labelH + labelPad {
		for _, u := range us {
			p := e.at(u)
			for _, sign := range []int{-1, 1} {
				if r := box(pt{p.x, p.y + sign*off}); free(r) {
					return r
				}
				if off == 0 {
					break
				}
			}
		}
	}
	return box(e.at(0.5)) // not reached for diagrams of sane size
}

// DiagramSVG draws def as an SVG: states in columns by their distance from
// the initial state, transitions as labelled arrows (no label overlaps a
// state or another label), a legend, current highlighted.
func DiagramSVG(def *workflow.Definition, current string) string {
	d := layoutDiagram(def)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s state diagram">`, d.width, d.height, d.width, d.height, template.HTMLEscapeString(def.ID))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker></defs>`)
	b.WriteString(`<g font-family="system-ui,sans-serif" font-size="12">`)
	for _, e := range d.edges {
		dash := ""
		if e.dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		c := e.c
		path := fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", c[0].x, c[0].y, c[1].x, c[1].y, c[2].x, c[2].y, c[3].x, c[3].y)
		if e.poly != nil {
			var pb strings.Builder
			for i, p := range e.poly {
				if i == 0 {
					fmt.Fprintf(&pb, "M%d,%d", p.x, p.y)
				} else {
					fmt.Fprintf(&pb, " L%d,%d", p.x, p.y)
				}
			}
			path = pb.String()
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#6b7280" stroke-width="1.4" stroke-linejoin="round" marker-end="url(#arrow)"%s/>`, path, dash)
	}
	// Labels after every edge, so that no edge is drawn over a label.
	for _, e := range d.edges {
		fmt.Fprintf(&b, `<text class="edge-label" x="%d" y="%d" text-anchor="middle" fill="#374151" paint-order="stroke" stroke="#fafafa" stroke-width="5">%s</text>`,
			e.label.x+e.label.w/2, e.label.y+labelH-4, template.HTMLEscapeString(e.text))
	}
	for _, name := range d.order {
		st, _ := def.State(name)
		p := d.boxes[name]
		fill, stroke, sw := "#ffffff", "#9ca3af", "1.5"
		if len(def.From(name)) == 0 {
			stroke = "#4b5563"
		}
		cls := "state"
		if name == current {
			fill, stroke, sw = "#fde68a", "#b45309", "3"
			cls = "state current"
		}
		fmt.Fprintf(&b, `<g class="%s" data-state="%s"><title>%s</title>`, cls, name, template.HTMLEscapeString(st.Hint))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="10" fill="%s" stroke="%s" stroke-width="%s"/>`, p.x, p.y, boxW, boxH, fill, stroke, sw)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="600" font-size="13">%s</text>`, p.x+boxW/2, p.y+boxH/2+5, name)
		b.WriteString(`</g>`)
		if name == def.InitialState {
			fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="6" fill="#111827"/><path d="M%d,%d L%d,%d" stroke="#111827" stroke-width="1.4" marker-end="url(#arrow)"/>`, p.x-26, p.y+boxH/2, p.x-20, p.y+boxH/2, p.x, p.y+boxH/2)
		}
	}
	b.WriteString(`<g class="legend" fill="#4b5563">`)
	fmt.Fprintf(&b, `<path d="M%d,%d L%d,%d" stroke="#6b7280" stroke-width="1.4"/>`, margin, d.legendY-4, margin+30, d.legendY-4)
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, margin+38, d.legendY, d.legend[0])
	fmt.Fprintf(&b, `<path d="M%d,%d L%d,%d" stroke="#6b7280" stroke-width="1.4" stroke-dasharray="5 4"/>`, margin, d.legendY+14, margin+30, d.legendY+14)
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`, margin+38, d.legendY+18, d.legend[1])
	b.WriteString(`</g></g></svg>`)
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
