package workflow

import (
	"fmt"
	"strings"
)

// Mermaid renders the workflow as a Mermaid stateDiagram-v2. When current is
// a declared state, it is highlighted with the "current" class.
func (d *Definition) Mermaid(current string) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", d.InitialState)
	for _, s := range d.States {
		if s.Hint != "" {
			fmt.Fprintf(&b, "    %s : %s\n", s.Name, mermaidText(s.Hint))
		}
	}
	for _, t := range d.Transitions {
		label := t.Action
		if len(t.Expects) > 0 {
			label += " (" + describeFields(t.Expects) + ")"
		}
		if t.Guard != nil {
			label += " [guarded]"
		}
		if w := d.timerLabel(t); w != "" {
			label += " [" + w + "]"
		}
		fmt.Fprintf(&b, "    %s --> %s : %s\n", t.From, t.To, mermaidText(label))
	}
	for _, s := range d.States {
		if len(d.from[s.Name]) == 0 {
			fmt.Fprintf(&b, "    %s --> [*]\n", s.Name)
		}
	}
	if _, ok := d.byName[current]; ok {
		b.WriteString("    classDef current fill:#fde68a,stroke:#b45309,stroke-width:3px\n")
		fmt.Fprintf(&b, "    class %s current\n", current)
	}
	return b.String()
}

// DOT renders the workflow as a Graphviz digraph; current (if declared) is filled.
func (d *Definition) DOT(current string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotID(d.ID))
	b.WriteString("    rankdir=LR;\n    node [shape=box, style=rounded];\n")
	b.WriteString("    __start [shape=point, label=\"\"];\n")
	fmt.Fprintf(&b, "    __start -> %s;\n", dotID(d.InitialState))
	for _, s := range d.States {
		attrs := []string{"label=" + dotID(s.Name)}
		if len(d.from[s.Name]) == 0 {
			attrs = append(attrs, "peripheries=2")
		}
		if s.Name == current {
			attrs = append(attrs, `style="rounded,filled"`, `fillcolor="#fde68a"`)
		}
		if s.Hint != "" {
			attrs = append(attrs, "tooltip="+dotID(s.Hint))
		}
		fmt.Fprintf(&b, "    %s [%s];\n", dotID(s.Name), strings.Join(attrs, ", "))
	}
	for _, t := range d.Transitions {
		label := t.Action
		if len(t.Expects) > 0 {
			label += "\n(" + describeFields(t.Expects) + ")"
		}
		if w := d.timerLabel(t); w != "" {
			label += "\n[" + w + "]"
		}
		style := ""
		if t.Guard != nil {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "    %s -> %s [label=%s%s];\n", dotID(t.From), dotID(t.To), dotID(label), style)
	}
	b.WriteString("}\n")
	return b.String()
}

// timerLabel says when a timer of t's state fires t ("after 10m0s", "at
// data.due_at"), or "" when none does.
func (d *Definition) timerLabel(t *Transition) string {
	s, ok := d.byName[t.From]
	if !ok {
		return ""
	}
	tm, ok := s.Timer(t.Action)
	if !ok {
		return ""
	}
	if tm.At != "" {
		return "at " + tm.At
	}
	return "after " + tm.After.String()
}

func describeFields(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + m[k]
	}
	return strings.Join(parts, ", ")
}

// mermaidText keeps a label on one line and away from Mermaid's syntax.
func mermaidText(s string) string {
	r := strings.NewReplacer("\n", " ", "\r", " ", ":", "#58;", ";", "#59;", "#", "#35;", "<", "#lt;", ">", "#gt;")
	return r.Replace(s)
}

func dotID(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
