package workflow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/protocol"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

type guardProgram struct {
	p       *vm.Program
	usesNow bool // calls now(): the verdict may change with time alone
}

// nowFinder notes whether an expression calls the now() builtin.
type nowFinder struct{ found bool }

func (f *nowFinder) Visit(n *ast.Node) {
	if b, ok := (*n).(*ast.BuiltinNode); ok && b.Name == "now" {
		f.found = true
	}
}

// exprEnv is the environment of every expression in a workflow (guards,
// timers' `at`): the run's data as `data`.
func exprEnv() expr.Option { return expr.Env(map[string]any{"data": map[string]any{}}) }

// Bounds of one evaluation of a guard expression. A guard runs on every
// read of a run that offers its transition and on every attempt to fire
// it, so it must be cheap: expr-lang's memory budget bounds what it
// allocates (ranges, arrays, maps and the iterations of its loops), and
// the step count and the deadline bound its time, which an operation
// inside a loop (`all(data.a, {# in data.a})`: quadratic) would not be.
const (
	// GuardSteps is the most iterations of the predicates ({...}) of
	// all, any, filter, map, count, sum, sortBy, ... one evaluation runs.
	GuardSteps = 1_000_000
	// GuardTimeout is the longest one evaluation runs.
	GuardTimeout = 100 * time.Millisecond
	// GuardMemory is expr-lang's memory budget of one evaluation.
	GuardMemory = 1_000_000
)

// guardBudget is what one evaluation may still spend; every predicate
// iteration ticks it (the patched program calls asmp_tick).
type guardBudget struct {
	steps    int
	deadline time.Time
	now      func() time.Time
}

var errGuardBound = errors.New("guard bound exceeded")

// tick spends one step; past GuardSteps or the deadline (checked every
// 16 steps and on the first) the evaluation stops with an error.
func (b *guardBudget) tick() error {
	b.steps++
	if b.steps > GuardSteps {
		return fmt.Errorf("%w: it ran more than %d steps", errGuardBound, GuardSteps)
	}
	if b.steps%16 == 1 && b.now().After(b.deadline) {
		return fmt.Errorf("%w: it ran longer than %s", errGuardBound, GuardTimeout)
	}
	return nil
}

// tickFunc is asmp_tick(asmp_budget, value): ticks the budget and
// returns value, wrapped around every predicate body.
var tickFunc = expr.Function("asmp_tick", func(params ...any) (any, error) {
	if b, ok := params[0].(*guardBudget); ok {
		if err := b.tick(); err != nil {
			return nil, err
		}
	}
	return params[1], nil
}, new(func(*guardBudget, any) any))

// tickPatch wraps the body of every predicate in asmp_tick.
type tickPatch struct{}

func (tickPatch) Visit(n *ast.Node) {
	if p, ok := (*n).(*ast.PredicateNode); ok {
		p.Node = &ast.CallNode{Callee: &ast.IdentifierNode{Value: "asmp_tick"},
			Arguments: []ast.Node{&ast.IdentifierNode{Value: "asmp_budget"}, p.Node}}
	}
}

// compileGuard compiles an expr-lang expression over `data` that must
// yield a boolean. It is type-checked as written; what runs is the same
// expression with every predicate ticking the evaluation's budget.
func compileGuard(src string) (guardProgram, error) {
	p, err := expr.Compile(src, exprEnv(), expr.AsBool())
	if err != nil {
		return guardProgram{}, err
	}
	var f nowFinder
	node := p.Node()
	ast.Walk(&node, &f)
	run, err := compileBounded(src, expr.AsBool())
	if err != nil {
		return guardProgram{}, err
	}
	return guardProgram{p: run, usesNow: f.found}, nil
}

// compileBounded compiles src, already type-checked as written, for
// runBounded: every predicate ticks the evaluation budget (asmp_budget).
func compileBounded(src string, opts ...expr.Option) (*vm.Program, error) {
	return expr.Compile(src, append([]expr.Option{expr.Env(map[string]any{"data": map[string]any{}, "asmp_budget": (*guardBudget)(nil)}),
		tickFunc, expr.Patch(tickPatch{})}, opts...)...)
}

// runBounded runs p, compiled by compileBounded, on data within a guard's
// bounds (GuardSteps, GuardTimeout by now, GuardMemory); bound, when not
// "", is the bound that stopped it (err is then set too).
func runBounded(p *vm.Program, data map[string]any, now func() time.Time) (out any, bound string, err error) {
	if data == nil {
		data = map[string]any{}
	}
	budget := &guardBudget{deadline: now().Add(GuardTimeout), now: now}
	machine := vm.VM{MemoryBudget: GuardMemory}
	out, err = machine.Run(p, map[string]any{"data": data, "asmp_budget": budget})
	if err != nil && (errors.Is(err, errGuardBound) || strings.Contains(err.Error(), "memory budget exceeded")) {
		bound = boundOf(err)
	}
	return out, bound, err
}

func (g guardProgram) eval(data map[string]any, src, reason string, now func() time.Time) (bool, string) {
	if reason == "" {
		reason = "This action is not allowed now."
	}
	if g.p == nil {
		return true, ""
	}
	if now == nil {
		now = time.Now
	}
	out, bound, err := runBounded(g.p, data, now)
	if err != nil {
		if bound != "" {
			return false, fmt.Sprintf("%s (the guard %q was stopped: %v; its bounds are %d steps, %s and expr-lang's memory budget of %d per evaluation — simplify the guard, or keep less data in the run)",
				reason, protocol.Truncate(src, 200), bound, GuardSteps, GuardTimeout, GuardMemory)
		}
		return false, fmt.Sprintf("%s (the guard %q could not be evaluated: %v)", reason, protocol.Truncate(src, 200), err)
	}
	ok, _ := out.(bool)
	if !ok {
		return false, reason
	}
	return true, ""
}

// boundOf is the bound err names, without expr-lang's source excerpt.
func boundOf(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, errGuardBound.Error()+": "))
	if i := strings.LastIndex(msg, " ("); i > 0 && strings.HasSuffix(msg, ")") {
		msg = msg[:i] // the position
	}
	return msg
}

func formatPct(pct float64) string {
	if pct < 0 {
		pct = 0
	}
	if pct > 100 {
		pct = 100
	}
	return strconv.FormatFloat(pct, 'f', -1, 64) + "%"
}
