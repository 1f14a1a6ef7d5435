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
		live, scan, roots, floor uint64
		base, want               int
	}{
		{live: 4 * mb, scan: 4 * mb, floor: 32 * mb, base: 100, want: 700},                // goal 4 + 4×7 = 32 MB: the floor
		{live: 4 * mb, scan: 8 * mb, roots: 4 * mb, floor: 32 * mb, base: 100, want: 350}, // stacks and globals count too
		{live: 16 * mb, scan: 16 * mb, floor: 32 * mb, base: 100, want: 100},              // doubling reaches the floor
		{live: 64 * mb, scan: 64 * mb, floor: 32 * mb, base: 100, want: 100},              // large scanned heap: GOGC as is
		{live: 8 * mb, scan: 8 * mb, floor: 32 * mb, base: 200, want: 300},                // 8 + 16 < 32: floor
		{live: 512 * mb, scan: 2 * mb, floor: 32 * mb, base: 100, want: 3},                // pointer-free heap: grows by half the floor
		{live: 512 * mb, scan: 256 * mb, floor: 32 * mb, base: 100, want: 50},             // grows by what is scanned
		{live: 4 << 30, scan: 1 * mb, floor: 32 * mb, base: 100, want: 1},                 // never 0 (collect without pause)
		{live: 0, scan: 1 * mb, floor: 32 * mb, base: 100, want: 100},                     // unknown before the first collection
		{live: 1, scan: 1, floor: 32 * mb, base: 100, want: 1 << 20},                      // capped
	} {
		if got := Percent(c.live, c.scan, c.roots, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d, %d) = %d, want %d", c.live, c.scan, c.roots, c.floor, c.base, got, c.want)
		}
	}
}

// The tuner follows the heap collection by collection: a small heap gets
// a raised percentage; a large pointer-free heap a small one (the heap
// grows by half the floor, not by its size); a large scanned heap the
// base percentage, about. Stop restores the base.
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
	until := func(what string, ok func(p int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(tu.Current()) {
			if time.Now().After(deadline) {
				t.Fatalf("percentage still %d after collections with %s", tu.Current(), what)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
		}
	}
	bytes := make([]byte, 64<<20) // live, pointer-free, well past the floor
	for i := range bytes {
		bytes[i] = byte(i)
	}
	until("64 MB of pointer-free live heap", func(p int) bool { return p < 30 })
	runtime.KeepAlive(bytes)
	bytes = nil
	ptrs := make([]*int, 8<<20) // 64 MB the collector scans
	one := new(int)
	for i := range ptrs {
		ptrs[i] = one
	}
	until("64 MB of scanned live heap", func(p int) bool { return p >= 80 && p <= 110 })
	runtime.KeepAlive(ptrs)
	if got, want := debug.SetGCPercent(tu.Current()), tu.Current(); got != want {
		t.Fatalf("runtime's percentage %d, the tuner's %d", got, want)
	}
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after Stop the percentage is %d, want 100", got)
	}
}
