package workflow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/workflow"
)

func guarded(t *testing.T, expression string, clock func() time.Time) *workflow.Guard {
	t.Helper()
	b := workflow.New("bound-v1", "A")
	b.State("A").Hint("a")
	b.State("B").Hint("b")
	b.Transition("A", "go", "B").GuardExpr(expression, "Not now.")
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	g := d.Transitions[0].Guard
	g.Clock = clock
	return g
}

// A guard's evaluation is bounded in steps, time and memory: past a
// bound it refuses, and the reason names the guard and the bound.
func TestGuardsAreBounded(t *testing.T) {
	big := make([]any, 2000)
	for i := range big {
		big[i] = i
	}
	data := map[string]any{"a": big}

	// Steps: each predicate iteration is one (2000 × 2000 here); the
	// clock stands still.
	still := func() time.Time { return time.Unix(0, 0) }
	ok, reason := guarded(t, `all(data.a, {any(data.a, {# == -1}) || # >= 0})`, still).Allow(data)
	if ok || !strings.Contains(reason, "Not now.") || !strings.Contains(reason, "all(data.a") || !strings.Contains(reason, "ran more than 1000000 steps") {
		t.Fatalf("a guard of 4 million steps: %v %q", ok, reason)
	}
	// Time: an operation inside a predicate costs steps of its own
	// (`in` over the array); the clock passes the deadline.
	now := time.Unix(0, 0)
	moving := func() time.Time {
		now = now.Add(10 * time.Millisecond)
		return now
	}
	ok, reason = guarded(t, `all(data.a, {# in data.a})`, moving).Allow(data)
	if ok || !strings.Contains(reason, "all(data.a, {# in data.a})") || !strings.Contains(reason, "longer than") {
		t.Fatalf("a guard past its deadline: %v %q", ok, reason)
	}
	// Memory: expr-lang's budget (a range of ten million).
	ok, reason = guarded(t, `len(1..10000000) > 0`, still).Allow(data)
	if ok || !strings.Contains(reason, "stopped: memory budget exceeded") {
		t.Fatalf("a guard over its memory budget: %v %q", ok, reason)
	}
	// Within its bounds a guard decides as before.
	if ok, reason := guarded(t, `all(data.a, {# >= 0}) && sum(data.a, {#}) > 0 && len(map(data.a, {string(#)})) == 2000`, still).Allow(data); !ok {
		t.Fatalf("a guard within its bounds: %q", reason)
	}
	if ok, _ := guarded(t, `any(data.a, {# < 0})`, still).Allow(data); ok {
		t.Fatal("a false guard allowed")
	}
}
