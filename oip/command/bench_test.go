package command

import "testing"

// BenchmarkBuild measures Build (row validation, compile and build) for the
// seed row and input; the target is under 2µs/op.
func BenchmarkBuild(b *testing.B) {
	r := mustRow(b, seedRow)
	in := mustInput(b, seedInput)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(r, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuilderBuild measures a precompiled Builder for the seed row.
func BenchmarkBuilderBuild(b *testing.B) {
	bl, err := Compile(mustRow(b, seedRow))
	if err != nil {
		b.Fatal(err)
	}
	in := mustInput(b, seedInput)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bl.Build(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildShellSchema measures Build for a shell row with a JSON
// Schema and values that need quoting.
func BenchmarkBuildShellSchema(b *testing.B) {
	r := mustRow(b, `{"command":"mytool","invocation_method":"shell",
		"args":[{"name":"input_file","type":"string","required":true}],
		"flags":[{"name":"output","type":"string","short_alias":"-o"},{"name":"level","type":"integer"}],
		"schema":{"type":"object","properties":{"level":{"minimum":0,"maximum":9}}}}`)
	in := map[string]any{"input_file": "my file's name.txt", "output": "$(out)", "level": int64(3)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(r, in); err != nil {
			b.Fatal(err)
		}
	}
}
