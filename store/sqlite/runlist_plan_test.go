package sqlite

import (
	"regexp"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store/storetest"
)

// Every filter of a run list walks an index in the list's order and stops
// at the page's end: no scan of the runs table and no sort of what
// matched, so a page costs the same at 10 and at 1,000,000 runs.
func TestListRunsUsesIndexes(t *testing.T) {
	for _, tc := range storetest.ListIndexCases() {
		q, args := listRunsQuery(tc.Filter)
		p := queryPlan(t, q, args...)
		uses := regexp.MustCompile(`INDEX ` + tc.Index + `( |$)`).MatchString(p)
		if !uses || strings.Contains(p, "SCAN runs;") || strings.HasSuffix(p, "SCAN runs") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want a walk of %s in order", tc.Name, p, tc.Index)
		}
	}
}
