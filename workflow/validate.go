package workflow

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// Problem is one finding of validation.
type Problem struct {
	// Path locates the problem in the file format, e.g. "transitions[2].to".
	Path string
	// Line and Col are the position in the source file (1-based), when known.
	Line, Col int
	Message   string
	// Warning problems do not stop a definition from loading.
	Warning bool
	// DeadEnd marks the warning about a non-terminal state from which no
	// terminal state can be reached (a run there can never end): servers
	// serve such a workflow with a warning (a benchmark's endless loop is
	// one), `asmp validate` fails on it.
	DeadEnd bool
}

// String renders "path: message" with "line:col: " in front when known.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Col)
	}
	if p.Warning {
		b.WriteString("warning: ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError lists every error found in one definition.
type ValidationError struct {
	Source   string
	Problems []Problem
}

// Error renders one problem per line, prefixed with the source.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.Source != "" {
			b.WriteString(e.Source)
			if p.Line > 0 {
				b.WriteByte(':')
			} else {
				b.WriteString(": ")
			}
		}
		b.WriteString(p.String())
	}
	return b.String()
}

type validator struct {
	def      *Definition
	problems []Problem
}

func (v *validator) errf(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warnf(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
}

// finish validates d, builds its indexes, and returns the problems found
// (errors and warnings, in the order found).
func finish(d *Definition) []Problem {
	v := &validator{def: d}
	v.validate()
	return v.problems
}

func (v *validator) validate() {
	d := v.def
	if !workflowIDPattern.MatchString(d.ID) {
		v.errf("workflow_id", "%q is not a valid workflow id: use lowercase letters, digits and '-', at least 2 characters, not starting or ending with '-'", d.ID)
	}
	d.byName = make(map[string]*State, len(d.States))
	for _, s := range d.States {
		p := "states." + s.Name
		if !statePattern.MatchString(s.Name) {
			v.errf(p, "%q is not a valid state name: use [A-Z][A-Z0-9_]* (for example AWAITING_INPUT)", s.Name)
		}
		if _, dup := d.byName[s.Name]; dup {
			v.errf(p, "state %q is declared twice", s.Name)
		}
		d.byName[s.Name] = s
	}
	if d.InitialState == "" {
		v.errf("initial_state", "initial_state is required")
	} else if _, ok := d.byName[d.InitialState]; !ok {
		v.errf("initial_state", "initial state %q is not declared under states", d.InitialState)
	}

	d.from = make(map[string][]*Transition)
	for i, t := range d.Transitions {
		p := fmt.Sprintf("transitions[%d]", i)
		if _, ok := d.byName[t.From]; !ok {
			v.errf(p+".from", "transition %q leaves state %q, which is not declared under states", t.Action, t.From)
		}
		if _, ok := d.byName[t.To]; !ok {
			v.errf(p+".to", "transition %q goes to state %q, which is not declared under states", t.Action, t.To)
		}
		if !namePattern.MatchString(t.Action) {
			v.errf(p+".action", "%q is not a valid action name: use letters, digits, '_', '-', '.', ':' (it becomes a URL path segment)", t.Action)
		}
		for _, prev := range d.from[t.From] {
			if prev.Action == t.Action {
				v.errf(p+".action", "state %q already has a transition %q; (from, action) pairs must be unique", t.From, t.Action)
			}
		}
		t.Expects = v.expects(p+".expects", t.Expects)
		t.Constraints = v.constraints(p+".expects", t.Expects, t.Constraints)
		if t.Guard != nil {
			switch {
			case t.Guard.Func != nil:
			case strings.TrimSpace(t.Guard.Expr) == "":
				v.errf(p+".guard.expr", "a guard needs an expression (expr) over data that yields a boolean")
			default:
				prog, err := compileGuard(t.Guard.Expr)
				if err != nil {
					v.errf(p+".guard.expr", "guard expression does not compile to a boolean: %s", oneLine(err.Error()))
				}
				t.Guard.prog = prog
			}
		}
		d.from[t.From] = append(d.from[t.From], t)
	}

	for _, s := range d.States {
		v.state(s)
	}
	v.migrations()
	v.schedules()
	v.reachability()
}

// versionPattern is the shape of a workflow version.
var versionPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// migrations checks the `migrate:` blocks: each names a version once, and
// maps state names to states this definition declares.
func (v *validator) migrations() {
	seen := map[string]bool{}
	for i, m := range v.def.Migrations {
		p := fmt.Sprintf("migrate[%d]", i)
		if !versionPattern.MatchString(m.From) {
			v.errf(p+".from", "%q is not a workflow version: use the sha256:… version that `asmp workflows` lists", m.From)
		}
		if seen[m.From] {
			v.errf(p+".from", "version %s has two migrate blocks", m.From)
		}
		seen[m.From] = true
		olds := make([]string, 0, len(m.States))
		for k := range m.States {
			olds = append(olds, k)
		}
		sort.Strings(olds)
		for _, old := range olds {
			to := m.States[old]
			if !statePattern.MatchString(old) {
				v.errf(p+".states."+old, "%q is not a valid state name", old)
			}
			if _, ok := v.def.byName[to]; !ok {
				v.errf(p+".states."+old, "state %s is mapped to %q, which is not declared under states", old, to)
			}
		}
	}
}

func (v *validator) expects(path string, in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			v.errf(path, "an expects field name must not be empty")
			continue
		}
		c, ok := protocol.NormalizeType(in[k])
		if !ok {
			v.errf(path+"."+k, "unknown type %q: use string, number, integer, boolean, array or object (aliases str, float, int, bool)", in[k])
			continue
		}
		out[k] = c
	}
	return out
}

// constraints checks that every constraint bounds an expected field in a
// way its type allows, and drops empty ones (nil when none is left).
func (v *validator) constraints(path string, expects map[string]string, in map[string]protocol.Constraint) map[string]protocol.Constraint {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]protocol.Constraint, len(in))
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c, fp := in[k], path+"."+k
		typ, ok := expects[k]
		if !ok {
			if c.IsZero() {
				continue
			}
			v.errf(fp, "a constraint bounds field %q, which is not expected (declare its type first)", k)
			continue
		}
		numeric, text := typ == protocol.TypeNumber || typ == protocol.TypeInteger, typ == protocol.TypeString
		if (c.Minimum != nil || c.Maximum != nil) && !numeric {
			v.errf(fp, "minimum and maximum bound numbers; field %q is a %s", k, typ)
		}
		if c.Minimum != nil && c.Maximum != nil && *c.Minimum > *c.Maximum {
			v.errf(fp, "minimum %s is greater than maximum %s", protocol.FormatNumber(*c.Minimum), protocol.FormatNumber(*c.Maximum))
		}
		if (c.Pattern != "" || c.MaxLength != nil) && !text {
			v.errf(fp, "pattern and maxLength bound strings; field %q is a %s", k, typ)
		}
		if c.MaxLength != nil && *c.MaxLength < 0 {
			v.errf(fp+".maxLength", "maxLength must not be negative")
		}
		if c.Pattern != "" {
			if err := protocol.CheckPattern(c.Pattern); err != nil {
				v.errf(fp+".pattern", "pattern does not compile: %s", oneLine(err.Error()))
			}
		}
		for i, e := range c.Enum {
			if !protocol.CheckType(typ, e) {
				v.errf(fmt.Sprintf("%s.enum[%d]", fp, i), "enum value %v is not of type %s", e, typ)
			}
		}
		if !c.IsZero() {
			out[k] = c
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (v *validator) state(s *State) {
	d := v.def
	p := "states." + s.Name
	if s.Status != "" && !protocol.ValidStatus(s.Status) {
		v.errf(p+".status", "unknown status %q: use active, processing, awaiting_input, completed or failed", s.Status)
	}
	if s.Skill != nil {
		if s.Skill.Name == "" {
			v.errf(p+".skill.name", "a skill needs a name")
		}
		if !pathPattern.MatchString(s.Skill.Path) || strings.Contains(s.Skill.Path, "..") {
			v.errf(p+".skill.path", "skill path %q must be a relative path without '..' (it is served under /skills/)", s.Skill.Path)
		}
		if s.Skill.Content == nil && s.Skill.FS == nil {
			v.errf(p+".skill", "skill %q has no content: give Content or a file", s.Skill.Name)
		}
	}
	if s.CLI != nil {
		for i, o := range s.CLI.Options {
			op := fmt.Sprintf("%s.cli.options[%d]", p, i)
			if _, ok := d.Transition(s.Name, o.Action); !ok {
				v.errf(op+".action", "CLI option names action %q, but state %s has no such transition (it has: %s)", o.Action, s.Name, strings.Join(actionsOf(d.from[s.Name]), ", "))
			}
			if o.Label == "" {
				v.errf(op+".label", "CLI option for %q needs a label", o.Action)
			}
		}
	}
	seen := map[string]bool{}
	for i, t := range s.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", p, i)
		if !namePattern.MatchString(t.Name) {
			v.errf(tp+".name", "%q is not a valid tool name: use letters, digits, '_', '-', '.', ':'", t.Name)
		}
		if seen[t.Name] {
			v.errf(tp+".name", "tool %q is declared twice in state %s", t.Name, s.Name)
		}
		seen[t.Name] = true
		if (t.Handler == nil) == (t.Row == "") {
			v.errf(tp, "tool %q needs exactly one implementation: a Go handler or a directory row (row: KEY)", t.Name)
		}
		if _, _, err := ParseRowRef(t.Row); t.Row != "" && err != nil {
			v.errf(tp+".row", "%v", err)
		}
		t.Expects = v.expects(tp+".expects", t.Expects)
		t.Constraints = v.constraints(tp+".expects", t.Expects, t.Constraints)
	}
	seen = map[string]bool{}
	for i, r := range s.Resources {
		rp := fmt.Sprintf("%s.resources[%d]", p, i)
		if !pathPattern.MatchString(r.Path) || strings.Contains(r.Path, "..") {
			v.errf(rp+".path", "resource path %q must be a relative path of letters, digits, '_', '-', '.' and '/', without '..'", r.Path)
		}
		if seen[r.Path] {
			v.errf(rp+".path", "resource %q is declared twice in state %s", r.Path, s.Name)
		}
		seen[r.Path] = true
		n := 0
		if r.Handler != nil {
			n++
		}
		if r.File != "" {
			n++
			if r.FS == nil {
				v.errf(rp+".file", "resource %q names file %q but has no file system to read it from", r.Path, r.File)
			}
		}
		if r.Text != "" {
			n++
		}
		if n != 1 {
			v.errf(rp, "resource %q needs exactly one of: file, text, or a Go handler", r.Path)
		}
	}
	if s.Task != nil {
		tp := p + ".task"
		if (s.Task.Func == nil) == (s.Task.Row == "") {
			v.errf(tp, "a task needs exactly one implementation: a Go func or a directory row (row: KEY)")
		}
		if _, _, err := ParseRowRef(s.Task.Row); s.Task.Row != "" && err != nil {
			v.errf(tp+".row", "%v", err)
		}
		if o := s.Task.Output; o != "" && strings.TrimSpace(o) != o {
			v.errf(tp+".output", "output %q is a data key and must not start or end with spaces", o)
		}
		if s.Task.Row != "" && s.Task.OnSuccess == "" {
			v.errf(tp+".on_success", "a row task needs on_success: the action fired when the command succeeds")
		}
		for _, a := range []struct{ field, action string }{{"on_success", s.Task.OnSuccess}, {"on_failure", s.Task.OnFailure}} {
			if a.action == "" {
				continue
			}
			t, ok := d.Transition(s.Name, a.action)
			if !ok {
				v.errf(tp+"."+a.field, "%s names action %q, but state %s has no such transition", a.field, a.action, s.Name)
			} else if len(t.Expects) > 0 {
				v.errf(tp+"."+a.field, "action %q expects input (%s); a task fires it without a body", a.action, protocol.DescribeExpects(t.Expects))
			}
		}
		v.retry(tp+".retry", s.Task.Retry)
		if s.Status != "" && s.Status != protocol.StatusProcessing {
			v.errf(p+".status", "state %s has a task, so its status is processing while the task runs; remove status %q", s.Name, s.Status)
		}
	}
	v.timers(s)
}

func (v *validator) reachability() {
	d := v.def
	if _, ok := d.byName[d.InitialState]; !ok {
		return
	}
	seen := map[string]bool{d.InitialState: true}
	queue := []string{d.InitialState}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, t := range d.from[s] {
			if !seen[t.To] {
				seen[t.To] = true
				queue = append(queue, t.To)
			}
		}
	}
	for _, s := range d.States {
		if !seen[s.Name] {
			v.warnf("states."+s.Name, "state %s is unreachable from the initial state %s", s.Name, d.InitialState)
		}
	}
	v.deadEnds(seen)
}

// canEnd reports whether a run in s can end there: s is completed or
// failed, or s's task marks the run failed when it fails (no on_failure).
func (d *Definition) canEnd(s *State) bool {
	st := d.StatusOf(s)
	return st == protocol.StatusCompleted || st == protocol.StatusFailed || s.Task != nil && s.Task.OnFailure == ""
}

// deadEnds warns (DeadEnd) about every reachable state from which no state
// that can end is reachable, naming the path from the initial state.
func (v *validator) deadEnds(reachable map[string]bool) {
	d := v.def
	// Walk backwards from the states that can end.
	into := map[string][]string{}
	for _, t := range d.Transitions {
		into[t.To] = append(into[t.To], t.From)
	}
	ends := map[string]bool{}
	var queue []string
	for _, s := range d.States {
		if d.canEnd(s) {
			ends[s.Name] = true
			queue = append(queue, s.Name)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, f := range into[s] {
			if !ends[f] {
				ends[f] = true
				queue = append(queue, f)
			}
		}
	}
	for _, s := range d.States {
		if !reachable[s.Name] || ends[s.Name] {
			continue
		}
		v.problems = append(v.problems, Problem{Path: "states." + s.Name, Warning: true, DeadEnd: true,
			Message: fmt.Sprintf("no terminal state can be reached from state %s (path %s): a run there can never end; add a transition to a state without outgoing transitions (e.g. cancel to CANCELLED)", s.Name, d.pathTo(s.Name))})
	}
}

// pathTo renders the shortest path from the initial state to target, as
// "A -go-> B -next-> C".
func (d *Definition) pathTo(target string) string {
	type step struct {
		prev   string
		action string
	}
	came := map[string]step{d.InitialState: {}}
	queue := []string{d.InitialState}
	for len(queue) > 0 && target != d.InitialState {
		s := queue[0]
		queue = queue[1:]
		for _, t := range d.from[s] {
			if _, ok := came[t.To]; !ok {
				came[t.To] = step{s, t.Action}
				queue = append(queue, t.To)
			}
		}
		if _, ok := came[target]; ok {
			break
		}
	}
	out := target
	for cur := target; cur != d.InitialState; {
		st := came[cur]
		out = st.prev + " -" + st.action + "-> " + out
		cur = st.prev
	}
	return out
}

func actionsOf(ts []*Transition) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range ts {
		if !seen[t.Action] {
			seen[t.Action] = true
			out = append(out, t.Action)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
