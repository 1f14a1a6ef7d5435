package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, scanned, floor uint64
		base, want           int
	}{
		{live: 4 * mb, scanned: 4 * mb, floor: 32 * mb, base: 100, want: 700},   // goal 4 + 4×7 = 32 MB
		{live: 4 * mb, scanned: 8 * mb, floor: 32 * mb, base: 100, want: 350},   // stacks and globals count too
		{live: 16 * mb, scanned: 16 * mb, floor: 32 * mb, base: 100, want: 100}, // doubling reaches the floor
		{live: 64 * mb, scanned: 64 * mb, floor: 32 * mb, base: 100, want: 100}, // large heap: GOGC as is
		{live: 8 * mb, scanned: 8 * mb, floor: 32 * mb, base: 200, want: 300},   // 8 + 16 < 32: floor
		{live: 0, scanned: 1 * mb, floor: 32 * mb, base: 100, want: 100},        // unknown before the first collection
		{live: 1, scanned: 1, floor: 32 * mb, base: 100, want: 1 << 20},         // capped
	} {
		if got := Percent(c.live, c.scanned, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", c.live, c.scanned, c.floor, c.base, got, c.want)
		}
	}
}

// The tuner follows the live heap collection by collection: a small heap
// gets a raised percentage, and once the live heap alone passes the floor,
// the base percentage is back. Stop restores the base.
func TestTunerFollowsCollections(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	floor := ms.HeapAlloc + 8<<20
	tu := Start(floor, 100)
	defer tu.Stop()
	if got := tu.Current(); got <= 100 {
		t.Fatalf("percentage %d for a heap below the floor, want > 100", got)
	}
	keep := make([]byte, 32<<20) // live, and well past the floor
	for i := range keep {
		keep[i] = byte(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tu.Current() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("percentage still %d after collections with a live heap past the floor", tu.Current())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
	}
	runtime.KeepAlive(keep)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("runtime's percentage %d, want 100", got)
	}
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after Stop the percentage is %d, want 100", got)
	}
}
