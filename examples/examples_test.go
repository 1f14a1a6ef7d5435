package examples_test

import (
	"testing"
	"time"

	"github.com/asmp-dev/asmp/examples"
)

// Options change how the built-in workflows behave, not what they are:
// expense-approval-v1 with short payment steps, or with the default
// review timeout spelled out, is the same version, so a test serving it
// serves what asmp serve does.
func TestOptionsKeepTheVersion(t *testing.T) {
	t.Parallel()
	for _, o := range []examples.Options{
		{PaymentStep: time.Millisecond},
		{ReviewTimeout: examples.DefaultReviewTimeout},
	} {
		same := examples.AllWith(o)
		for i, d := range examples.All() {
			if same[i].ID != d.ID || same[i].Version() != d.Version() {
				t.Fatalf("%s with %+v: %s %s, want %s %s", d.ID, o, same[i].ID, same[i].Version(), d.ID, d.Version())
			}
		}
	}
}

// The review timeout is REVIEW's timer: 48h unless Options say otherwise,
// and, being part of the definition, another timeout is another version.
func TestReviewTimeoutIsTheTimer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    examples.Options
		want time.Duration
	}{
		{examples.Options{}, 48 * time.Hour},
		{examples.Options{ReviewTimeout: 10 * time.Minute}, 10 * time.Minute},
	} {
		d := examples.ExpenseApprovalWith(tc.o)
		st, ok := d.State("REVIEW")
		if !ok {
			t.Fatal("expense-approval-v1 has no REVIEW")
		}
		tm, ok := st.Timer("escalate_to_manager")
		if !ok || tm.After != tc.want || len(st.Timers) != 1 {
			t.Fatalf("%+v: REVIEW's timers %+v, want escalate_to_manager after %s", tc.o, st.Timers, tc.want)
		}
		if tr, ok := d.Transition("REVIEW", "escalate_to_manager"); !ok || tr.To != "ESCALATED" {
			t.Fatalf("%+v: escalate_to_manager goes to %+v, want ESCALATED", tc.o, tr)
		}
	}
	if examples.ExpenseApprovalWith(examples.Options{ReviewTimeout: time.Hour}).Version() == examples.ExpenseApproval().Version() {
		t.Fatal("a review timeout of 1h kept the version of the 48h one")
	}
}
