package workflow

import (
	"fmt"
	"strconv"

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

// compileGuard compiles an expr-lang expression over `data` that must
// yield a boolean.
func compileGuard(src string) (guardProgram, error) {
	p, err := expr.Compile(src, exprEnv(), expr.AsBool())
	if err != nil {
		return guardProgram{}, err
	}
	var f nowFinder
	node := p.Node()
	ast.Walk(&node, &f)
	return guardProgram{p: p, usesNow: f.found}, nil
}

func (g guardProgram) eval(data map[string]any, reason string) (bool, string) {
	if reason == "" {
		reason = "This action is not allowed now."
	}
	if g.p == nil {
		return true, ""
	}
	if data == nil {
		data = map[string]any{}
	}
	out, err := expr.Run(g.p, map[string]any{"data": data})
	if err != nil {
		return false, fmt.Sprintf("%s (the guard could not be evaluated: %v)", reason, err)
	}
	ok, _ := out.(bool)
	if !ok {
		return false, reason
	}
	return true, ""
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
