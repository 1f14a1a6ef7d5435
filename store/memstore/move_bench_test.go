package memstore

import (
	"fmt"
	"testing"
)

// BenchmarkRunIndexMove: the index's share of a tick, 64 runs ticked
// round-robin (each tick moves the run's five entries from the start to
// the end of their groups), in an index that also holds 100,000 other
// runs' entries.
func BenchmarkRunIndexMove(b *testing.B) {
	ids := func(slot int32) []byte { return fmt.Appendf(nil, "id-%08d", slot) }
	x := newRunIndex(ids)
	const hot, cold = 64, 100000
	for i := range int32(cold) {
		for g := range uint64(5) {
			x.insert(ikey{group: g << 56, sec: int64(i), slot: hot + i})
		}
	}
	keys := make([][5]ikey, hot)
	clock := int64(cold)
	for i := range int32(hot) {
		clock++
		for g := range uint64(5) {
			keys[i][g] = ikey{group: g<<56 | 1, sec: clock, slot: i}
			x.insert(keys[i][g])
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clock++
		for g := range 5 {
			nk := keys[i][g]
			nk.sec = clock
			x.move(keys[i][g], nk)
			keys[i][g] = nk
		}
		i = (i + 1) % hot
	}
}
