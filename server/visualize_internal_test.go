package server

import (
	"testing"

	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/workflow"
)

// No label of the diagram overlaps a state box or another label, for
// every built-in workflow and a crowded one; every label sits next to its
// own edge (none dangles), and everything is inside the drawing.
func TestDiagramLabelsNeverOverlap(t *testing.T) {
	crowded := workflow.New("crowded-v1", "A")
	for _, s := range []string{"A", "B", "C", "D"} {
		crowded.State(s)
	}
	for _, tr := range [][3]string{{"A", "go", "B"}, {"A", "skip", "C"}, {"A", "jump", "D"}, {"B", "back", "A"}, {"C", "back", "A"},
		{"D", "back", "A"}, {"B", "again", "B"}, {"C", "on", "D"}, {"D", "undo", "C"}, {"B", "retry", "A"}} {
		crowded.Transition(tr[0], tr[1], tr[2]).Expect("a_rather_long_field_name", "string")
	}
	defs := append(examples.All(), examples.NumberFacts(), crowded.MustBuild())
	for _, def := range defs {
		d := layoutDiagram(def)
		var boxes []rect
		for _, name := range d.order {
			boxes = append(boxes, d.boxes[name])
		}
		inside := func(what string, r rect) {
			if r.x < 0 || r.y < 0 || r.x+r.w > d.width || r.y+r.h > d.height {
				t.Errorf("%s: %s %+v is outside the %dx%d drawing", def.ID, what, r, d.width, d.height)
			}
		}
		for i, b := range boxes {
			inside(d.order[i], b)
			for j := i + 1; j < len(boxes); j++ {
				if b.overlaps(boxes[j]) {
					t.Errorf("%s: boxes %s and %s overlap", def.ID, d.order[i], d.order[j])
				}
			}
		}
		for i, e := range d.edges {
			inside("label "+e.text, e.label)
			for k, b := range boxes {
				if e.label.overlaps(b) {
					t.Errorf("%s: label %q overlaps state %s", def.ID, e.text, d.order[k])
				}
			}
			for j := i + 1; j < len(d.edges); j++ {
				if e.label.overlaps(d.edges[j].label) {
					t.Errorf("%s: labels %q and %q overlap", def.ID, e.text, d.edges[j].text)
				}
			}
			if dist := nearest(&e); dist > 120 {
				t.Errorf("%s: label %q is %d px from its edge", def.ID, e.text, dist)
			}
		}
		if len(d.legend) == 0 || d.legendY < 0 || d.legendY > d.height {
			t.Errorf("%s: no legend inside the drawing", def.ID)
		}
	}
}

// nearest is the distance from e's label centre to its curve (sampled).
func nearest(e *edge) int {
	cx, cy := e.label.x+e.label.w/2, e.label.y+e.label.h/2
	best := 1 << 30
	for u := 0.0; u <= 1.0001; u += 0.02 {
		p := e.at(u)
		dx, dy := p.x-cx, p.y-cy
		best = min(best, dx*dx+dy*dy)
	}
	n := 0
	for n*n < best {
		n++
	}
	return n
}
