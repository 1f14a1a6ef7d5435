// Package gctune gives a long-running server's garbage collector a heap
// floor: while the live heap is small, collections wait until the heap has
// grown by a fixed amount instead of doubling, so a server holding a few
// megabytes does not collect hundreds of times a second under load; once
// the live heap is large, GOGC's usual doubling applies unchanged.
//
// Go has no setting for this. A tuner does it: after every collection it
// reads the live heap and sets the GC percentage so that the next
// collection's goal is max(live × (1 + GOGC/100), floor).
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Percent returns the GC percentage that puts the next collection's goal
// at max(live × (1 + base/100), floor), for a live heap of live bytes.
func Percent(live, floor uint64, base int) int {
	if live == 0 {
		live = 1
	}
	if live*uint64(100+base)/100 >= floor {
		return base
	}
	p := (floor - live) * 100 / live
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
	t := &Tuner{floor: floor, base: base, last: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
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
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	if p := Percent(live, t.floor, t.base); p != t.last {
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
