package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/asmp-dev/asmp/protocol"
)

var styles = struct {
	header, title, hint, selected, option, keys, dim, err, ok, fail, label, spinner, box lipgloss.Style
}{
	header:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
	title:    lipgloss.NewStyle().Bold(true),
	hint:     lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
	selected: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("14")),
	option:   lipgloss.NewStyle(),
	keys:     lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
	dim:      lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
	err:      lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true),
	ok:       lipgloss.NewStyle().Foreground(lipgloss.Color("10")).Bold(true),
	fail:     lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true),
	label:    lipgloss.NewStyle().Foreground(lipgloss.Color("13")),
	spinner:  lipgloss.NewStyle().Foreground(lipgloss.Color("13")),
	box:      lipgloss.NewStyle().Border(lipgloss.NormalBorder()).BorderForeground(lipgloss.Color("9")).Padding(0, 1),
}

// glyphs are the marks the UI draws, in Unicode or ASCII.
type glyphs struct{ pointer, check, cross, arrow, bullet, rule string }

func (m *Model) glyphs() glyphs { return glyphSet(m.opts.ASCII) }

// glyphSet returns the marks in ASCII or Unicode.
func glyphSet(ascii bool) glyphs {
	if ascii {
		return glyphs{pointer: ">", check: "[ok]", cross: "[x]", arrow: "->", bullet: "*", rule: "--"}
	}
	return glyphs{pointer: "›", check: "✔", cross: "✘", arrow: "→", bullet: "•", rule: "──"}
}

func (m *Model) wrap(s string, indent int) string {
	w := max(m.width-indent-1, 20)
	return lipgloss.NewStyle().Width(w).Render(s)
}

// View renders the screen.
func (m *Model) View() string {
	if m.quitting {
		return ""
	}
	g := m.glyphs()
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	if m.frame == nil {
		line("%s %s", m.spin.View(), "Connecting to the run…")
		return b.String()
	}
	f := m.frame
	line("%s", styles.header.Render(fmt.Sprintf("ASMP %s %s %s run %s", f.WorkflowID, g.bullet, f.State, f.RunID)))
	line("%s", styles.dim.Render(fmt.Sprintf("status %s %s version %d%s", f.Status, g.bullet, m.version, workflowVersion(&f.Frame, " "+g.bullet+" workflow "))))
	line("")

	if m.mode == modeDone {
		m.viewDone(&b, g)
		return b.String()
	}
	if m.cli.Prompt != "" {
		line("%s", styles.title.Render(m.wrap(m.cli.Prompt, 0)))
	}
	if m.cli.Hint != "" {
		line("%s", styles.hint.Render(m.wrap(m.cli.Hint, 0)))
	}
	line("")
	if f.Status == protocol.StatusProcessing {
		pct := "…"
		bar := ""
		if m.progress >= 0 {
			pct = fmt.Sprintf("%3.0f%%", m.progress*100)
			bar = m.bar.ViewAs(m.progress) + " "
		}
		text := "Processing"
		if m.progHint != "" {
			text = m.progHint
		}
		line("%s %s%s %s", m.spin.View(), bar, pct, text)
		line("")
	}
	switch {
	case m.stale() || m.settling != 0:
		line("%s %s", m.spin.View(), "Loading the options…")
	case len(m.cli.Options) == 0 && f.Status != protocol.StatusProcessing:
		line("%s", styles.dim.Render("No action is offered now."))
	}
	if !m.stale() && m.settling == 0 {
		for i, o := range m.cli.Options {
			ex := m.expects(i)
			mark := "  "
			st := styles.option
			if i == m.cursor && (m.mode == modeSelect || m.mode == modeBusy || m.mode == modeInput || m.mode == modeConfirm) {
				mark = g.pointer + " "
				st = styles.selected
			}
			text := fmt.Sprintf("%d. %s", i+1, o.Label)
			var tags []string
			if o.Keys != "" {
				tags = append(tags, styles.keys.Render("["+o.Keys+"]"))
			}
			if len(ex) > 0 {
				tags = append(tags, styles.dim.Render(protocol.DescribeExpects(ex)))
			}
			if ns, ok := f.Action(o.Action); ok && ns.IsCritical {
				tags = append(tags, styles.err.Render("critical"))
			}
			line("%s%s %s", mark, st.Render(text), strings.Join(tags, " "))
		}
	}
	if m.mode == modeInput && m.settling == 0 {
		line("")
		if m.cli.InputHint != "" {
			line("%s", styles.title.Render(m.cli.InputHint))
		}
		for i, fl := range m.fields {
			mark := "  "
			if i == m.focus {
				mark = g.pointer + " "
			}
			line("%s%s %s", mark, styles.label.Render(fmt.Sprintf("%s (%s):", fl.name, fl.typ)), fl.input.View())
			if fl.err != "" {
				line("    %s", styles.err.Render(fl.name+" "+fl.err))
			}
		}
	}
	// Outside the form the input hint is not shown: the options already
	// name what they take, and a label without its field misleads.
	if m.mode == modeConfirm && m.ask != nil && m.settling == 0 {
		o := m.cli.Options[m.ask.option]
		line("")
		line("%s", styles.err.Render(fmt.Sprintf("%s (%s) is marked critical. Send it? y yes, n no", o.Label, o.Action)))
		for _, k := range sortedKeys(m.ask.input) {
			line("    %s", styles.dim.Render(fmt.Sprintf("%s = %v", k, m.ask.input[k])))
		}
	}
	if m.mode == modeBusy {
		line("")
		line("%s %s", m.spin.View(), "Sending…")
	}
	if timers := timerLines(&f.Frame, m.opts.now()); len(timers) > 0 {
		line("")
		for _, t := range timers {
			line("%s", styles.dim.Render(t))
		}
	}
	if len(f.Milestones) > 0 {
		line("")
		line("%s", styles.dim.Render("Milestones: "+g.check+" "+strings.Join(f.Milestones, " "+g.check+" ")))
	}
	if m.errHint != "" {
		line("")
		box := styles.box
		if m.opts.ASCII {
			box = box.Border(lipgloss.ASCIIBorder())
		}
		line("%s", box.Render(styles.err.Render(g.cross+" ")+m.wrap(m.errHint, 6)))
	} else if m.notice != "" {
		line("")
		line("%s", styles.dim.Render(m.wrap(m.notice, 0)))
	}
	line("")
	line("%s", styles.dim.Render(m.help()))
	return b.String()
}

func (m *Model) help() string {
	if m.held {
		return "space go on · ctrl+c quit"
	}
	if m.errHint != "" && m.mode != modeInput {
		if m.retry != nil {
			return "r retry · esc back · q quit"
		}
		return "esc back (reload the run) · q quit"
	}
	switch m.mode {
	case modeConfirm:
		return "y send it · n or esc don't · ctrl+c quit"
	case modeInput:
		if m.errHint != "" {
			return "fix the input if needed, enter send again · esc back · ctrl+c quit"
		}
		if len(m.fields) > 1 {
			return "type the value · tab next field · enter submit · esc back · ctrl+c quit"
		}
		return "type the value · enter " + m.cli.Options[m.chosen].Label + " · esc back · ctrl+c quit"
	case modeSelect:
		var keys []string
		for _, o := range m.cli.Options {
			if k := normKey(o.Keys); k != "" && !strings.Contains(k, " ") && k != "enter" && (k < "0" || k > "9") {
				keys = append(keys, k)
			}
		}
		h := "↑/↓ move · enter select · 1-9 pick"
		if m.opts.ASCII {
			h = "up/down move · enter select · 1-9 pick"
		}
		if len(keys) > 0 {
			h += " · " + strings.Join(keys, "/") + " keys"
		}
		return h + " · q quit"
	}
	return "q quit"
}

func (m *Model) viewDone(b *strings.Builder, g glyphs) {
	f := m.frame
	mark, st := g.check, styles.ok
	if f.Status == protocol.StatusFailed {
		mark, st = g.cross, styles.fail
	}
	fmt.Fprintf(b, "%s\n", st.Render(fmt.Sprintf("%s Run %s", mark, f.Status)))
	fmt.Fprintf(b, "\n")
	fmt.Fprintf(b, "  State:  %s\n", f.State)
	if f.Hint != "" {
		fmt.Fprintf(b, "  Hint:   %s\n", m.wrap(f.Hint, 10))
	}
	if len(f.Milestones) > 0 {
		fmt.Fprintf(b, "  Milestones: %s\n", strings.Join(f.Milestones, " "+g.arrow+" "))
	}
	if len(f.Data) > 0 {
		var parts []string
		for _, k := range sortedKeys(f.Data) {
			parts = append(parts, fmt.Sprintf("%s=%v", k, f.Data[k]))
		}
		fmt.Fprintf(b, "  Data:   %s\n", m.wrap(strings.Join(parts, " "), 10))
	}
	fmt.Fprintf(b, "  Run id: %s\n", f.RunID)
	if m.notice != "" {
		fmt.Fprintf(b, "\n%s\n", styles.dim.Render(m.notice))
	}
	if m.settling == 0 {
		// Shown once keys act on this screen: one typed before it is dropped.
		fmt.Fprintf(b, "\n%s\n", styles.dim.Render("enter or q to exit"))
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// workflowVersion is prefix and the short form of the workflow version the
// frame's run is pinned to (its _links.workflow_version), or "" when the
// server names none.
func workflowVersion(f *protocol.Frame, prefix string) string {
	v := f.Links["workflow_version"].Version
	if v == "" {
		return ""
	}
	if len(v) > len("sha256:")+12 {
		v = v[:len("sha256:")+12]
	}
	return prefix + v
}
