package testbin

import (
	"runtime/debug"
	"testing"
)

// Race tells the truth: it agrees with the -race setting the go command
// recorded in this test binary.
func TestRaceMatchesThisBinary(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	if built := raceSetting(bi); Race != built {
		t.Fatalf("Race = %v, but the test binary was built with -race=%v", Race, built)
	}
}
