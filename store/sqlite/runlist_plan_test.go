package sqlite

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// Every filter of a run list walks an index in the list's order and stops
// at the page's end: no scan of the runs table and no sort of what
// matched, so a page costs the same at 10 and at 1,000,000 runs.
func TestListRunsUsesIndexes(t *testing.T) {
	t.Parallel()
	processing, derived := "processing", ""
	cursor := store.RunCursor{UpdatedAt: time.Unix(100, 0), ID: "x"}
	cases := []struct {
		name  string
		f     store.RunFilter
		index string
	}{
		{"unfiltered", store.RunFilter{Limit: 50}, "runs_updated"},
		{"updated after", store.RunFilter{UpdatedAfter: time.Unix(5, 0), Limit: 50}, "runs_updated"},
		{"next page", store.RunFilter{Before: cursor, Limit: 50}, "runs_updated"},
		{"workflow", store.RunFilter{WorkflowID: "wf", Limit: 50}, "runs_list_workflow"},
		{"workflow, next page", store.RunFilter{WorkflowID: "wf", Before: cursor, Limit: 50}, "runs_list_workflow"},
		{"state", store.RunFilter{State: "S", Limit: 50}, "runs_list_workflow_state"},
		{"state, next page", store.RunFilter{State: "S", Before: cursor, Limit: 50}, "runs_list_workflow_state"},
		{"derived status of one state, any workflow", store.RunFilter{State: "S", Override: &derived, Limit: 50}, "runs_list_workflow_state"},
		{"status override and state", store.RunFilter{State: "S", Override: &processing, Limit: 50}, "runs_list_status"},
		{"status override", store.RunFilter{Override: &processing, Limit: 50}, "runs_list_status"},
		{"workflow and state", store.RunFilter{WorkflowID: "wf", State: "S", Limit: 50}, "runs_list_workflow_state"},
		{"derived status of one state", store.RunFilter{WorkflowID: "wf", State: "S", Override: &derived, Limit: 50}, "runs_list_workflow_state"},
	}
	for _, tc := range cases {
		f := tc.f
		if byWorkflow(f) {
			f.WorkflowID = "wf" // one of the queries of each workflow
		}
		q, args := listRunsQuery(f)
		p := queryPlan(t, q, args...)
		uses := regexp.MustCompile(`INDEX ` + tc.index + `( |$)`).MatchString(p)
		if !uses || strings.Contains(p, "SCAN runs;") || strings.HasSuffix(p, "SCAN runs") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a walk of %s in order", tc.name, p, tc.index)
		}
	}
}
