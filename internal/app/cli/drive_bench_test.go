package cli_test

import (
	"testing"
)

// BenchmarkDriveStep measures what asmp drive adds per step when the model
// answers at once: building the tools and the system prompt, the Chat
// Completions round trip to a local fake, the transition, and the output.
// One iteration drives config-wizard-v1 to DONE (3 steps).
func BenchmarkDriveStep(b *testing.B) {
	srv := driveServer(b)
	m := newFakeModel(b,
		func(t testing.TB, r chatRequest) []string { return call("start", `{}`) },
		func(t testing.TB, r chatRequest) []string { return call("save", `{"value": "v"}`) },
		func(t testing.TB, r chatRequest) []string { return call("confirm", `{}`) },
	)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.mu.Lock()
		m.reqs, m.auth = m.reqs[:0], m.auth[:0]
		m.mu.Unlock()
		if code, out, errOut := drive(b, srv, m, "--workflow", "config-wizard-v1", "--json"); code != 0 {
			b.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/step")
}
