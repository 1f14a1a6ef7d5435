package main

import "testing"

// A full run keeps the sections written by hand (the timers' and the
// webhooks' benchmarks, which bench/run does not run), whole and in order,
// and only those.
func TestHandWrittenSectionsAreKept(t *testing.T) {
	doc := "# Performance\n\nGenerated.\n\n## Targets\n\n| a |\n\n## Timers\n\nWritten by hand (not by `bench/run`): x.\n\n### Sub\n\ny\n\n" +
		"## Webhooks\n\nWritten by hand: z.\n\n## Commands\n\n- c\n\n## Optimisation log\n\n### 1. Step\n"
	want := "## Timers\n\nWritten by hand (not by `bench/run`): x.\n\n### Sub\n\ny\n\n## Webhooks\n\nWritten by hand: z.\n\n"
	if got := handWritten(doc); got != want {
		t.Fatalf("handWritten =\n%q\nwant\n%q", got, want)
	}
	if got := handWritten("# P\n\n## Targets\n\nGenerated.\n"); got != "" {
		t.Fatalf("handWritten of a report with none = %q", got)
	}
}
