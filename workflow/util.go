package workflow

import "sort"

func sortStrings(s []string) { sort.Strings(s) }

// sortProblems orders problems by their position in the file; problems
// without one keep their order at the end.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}
