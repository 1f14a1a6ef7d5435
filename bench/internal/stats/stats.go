// Package stats holds what the benchmark reports (bench/report and
// bench/abreport) compute alike.
package stats

import "slices"

// Median is the median of xs (0 for none); xs is not changed.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// NoopWorkload names the no-op server's workload an asmp workload is
// compared with (the no-op server has one transition workload for all
// of asmp's).
func NoopWorkload(workload string) string {
	if workload == "transition_1run" || workload == "transition_webhook" {
		return "transition"
	}
	return workload
}
