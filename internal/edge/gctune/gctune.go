// Package gctune sizes a long-running server's collection cycles by the
// work a collection does, not by the heap's size. Go's GOGC lets the heap
// grow by GOGC% of the live heap between collections, so a server holding
// a large heap of pointer-free data (encoded runs in byte arenas, which
// the collector never scans) collects rarely but lets each cycle's new
// objects spread over hundreds of megabytes of cold memory; a small heap,
// the other way round, is collected hundreds of times a second. The tuner
// lets the heap grow by GOGC% of what a collection scans (the scannable
// heap, stacks and globals), but never less than half the floor, and
// never collects below the floor: cycles cost about the same whatever the
// pointer-free data held, and new objects stay in memory the caches hold.
//
// Go has no setting for this. A tuner does it: after every collection it
// reads the heap and sets the GC percentage that gives that goal.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Percent returns the GC percentage whose next goal is live + headroom,
// headroom = max(scan × base/100, floor − live, floor/2), for a live heap
// of live bytes of which scan bytes are scannable, and roots bytes of
// goroutine stacks and globals (the runtime applies the percentage to
// live + roots). scan counts roots too when given as scannable heap +
// roots. A live heap of 0 means unknown (no collection has run yet):
// base, so that the first collection comes as usual and tells the size.
func Percent(live, scan, roots, floor uint64, base int) int {
	if live == 0 {
		return base
	}
	head := scan * uint64(base) / 100
	if floor > live {
		head = max(head, floor-live)
	}
	head = max(head, floor/2)
	p := head * 100 / (live + roots)
	const most = 1 << 20
	switch {
	case p > most:
		return most
	case p < 1:
		return 1 // 0 would collect without pause
	}
	return int(p)
}

// Tuner adjusts the GC percentage after every collection; see Start.
type Tuner struct {
	floor   uint64
	base    int
	stopped atomic.Bool
	mu      sync.Mutex
	last    int
	sample  []metrics.Sample
}

// Start installs a tuner with a heap floor of floor bytes over base, the
// GC percentage in force (GOGC; 100 by default). Stop restores base.
func Start(floor uint64, base int) *Tuner {
	t := &Tuner{floor: floor, base: base, last: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/scan/heap:bytes"}}}
	t.adjust()
	t.arm()
	return t
}

// arm registers a cleanup on a fresh unreachable object: it runs after the
// next collection, adjusts, and arms again.
func (t *Tuner) arm() {
	s := new([64]byte) // not a tiny allocation: its own object
	runtime.AddCleanup(s, func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	}, t)
}

func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	metrics.Read(t.sample)
	var v [4]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	live, roots, scan := v[0], v[1]+v[2], min(v[3], v[0])+v[1]+v[2]
	if p := Percent(live, scan, roots, t.floor, t.base); p != t.last {
		debug.SetGCPercent(p)
		t.last = p
	}
}

// Current returns the GC percentage the tuner last set.
func (t *Tuner) Current() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Stop ends tuning and restores the base percentage.
func (t *Tuner) Stop() {
	t.stopped.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	debug.SetGCPercent(t.base)
	t.last = t.base
}
