// Package gctune gives a long-running server's garbage collector a heap
// floor: while the live heap is small, collections wait until the heap has
// grown by a fixed amount instead of doubling, so a server holding a few
// megabytes does not collect hundreds of times a second under load; once
// the live heap is large, GOGC's usual doubling applies unchanged.
//
// Go has no setting for this. A tuner does it: after every collection it
// reads the live heap and sets the GC percentage so that the next
// collection's goal is max(what GOGC alone gives, floor).
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Percent returns the GC percentage that puts the next collection's goal
// at max(live + scanned × base/100, floor), for a live heap of live bytes
// and scanned bytes the percentage applies to (the live heap plus
// goroutine stacks and globals, as the runtime counts them). A live heap
// of 0 means unknown (no collection has run yet): base, so that the first
// collection comes as usual and tells the size.
func Percent(live, scanned, floor uint64, base int) int {
	if scanned < live {
		scanned = live
	}
	if live == 0 || live+scanned*uint64(base)/100 >= floor {
		return base
	}
	p := (floor - live) * 100 / scanned
	const most = 1 << 20
	if p > most {
		return most
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
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
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
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if p := Percent(v[0], v[0]+v[1]+v[2], t.floor, t.base); p != t.last {
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
