package memstore

import "encoding/binary"

// The runs' bytes (each run's id and current value, its encoded events
// and their offsets) live in an arena of large byte chunks, which hold no
// pointers: the garbage collector marks a chunk as one object and never
// scans it, however many runs it holds.
//
// A span is one allocation in a chunk: n bytes written of cap reserved.
// Bytes once written are never overwritten, so the slices the store hands
// out may alias them: a span grows into its reserved bytes, in place at
// the end of the chunk being filled, or by moving to the arena's end
// (the old copy becomes dead). Each span is preceded by a header naming
// its run's slot and its kind, so that a chunk can be walked: once most of
// a chunk is dead it is compacted, a bounded number of bytes per write,
// by moving its live spans to the arena's end and dropping it (slices
// still aliasing it keep it alive until they are gone).

const (
	chunkSize = 4 << 20
	// bigSpan: a span this large gets a chunk of its own, freed with it.
	bigSpan = chunkSize / 4
	// spanHeader: slot (4 bytes), kind (1), cap (4).
	spanHeader = 9
	// compactBudget is the least number of bytes a write moves or walks
	// of a chunk being compacted.
	compactBudget = 64 << 10
)

// Kinds of span, one of each per run.
const (
	kindCur byte = iota // id and current value (appendRun)
	kindLog             // events, back to back (appendEvent)
	kindIdx             // 8 bytes per event: its offset in the log, the index of the last whole event at or before it
)

type span struct {
	chunk int32
	off   uint32 // of the first byte, after the header
	n     uint32
	cap   uint32
}

type chunk struct {
	b      []byte // len: the bytes allocated so far (headers, written and reserved bytes)
	dead   int    // bytes (headers included) of spans released
	queued bool   // in arena.queue, or being compacted
}

type arena struct {
	chunks []chunk
	fill   int32 // the chunk allocations go to; -1 before the first
	// fillSize is the capacity of the last chunk filled: a store starts
	// with small chunks, doubling up to chunkSize.
	fillSize int
	free     []int32
	queue    []int32 // chunks waiting for compaction, oldest first
	// compacting is the chunk being compacted (-1: none), walked up to pos.
	compacting int32
	pos        int
}

func newArena() arena { return arena{fill: -1, compacting: -1} }

// bytes returns the written bytes of sp (capacity capped, so an append
// to them copies).
func (a *arena) bytes(sp span) []byte {
	if sp.n == 0 {
		return nil
	}
	end := sp.off + sp.n
	return a.chunks[sp.chunk].b[sp.off:end:end]
}

// newChunk returns the index of a new chunk of capacity size.
func (a *arena) newChunk(size int) int32 {
	c := chunk{b: make([]byte, 0, size)}
	if n := len(a.free); n > 0 {
		i := a.free[n-1]
		a.free = a.free[:n-1]
		a.chunks[i] = c
		return i
	}
	a.chunks = append(a.chunks, c)
	return int32(len(a.chunks) - 1)
}

// alloc reserves a span of capacity cp for run slot's span of kind.
func (a *arena) alloc(slot int32, kind byte, cp int) span {
	need := spanHeader + cp
	var ci int32
	switch {
	case cp >= bigSpan:
		ci = a.newChunk(need)
	case a.fill < 0 || cap(a.chunks[a.fill].b)-len(a.chunks[a.fill].b) < need:
		if a.fill >= 0 {
			old := a.fill
			a.fill = -1
			a.retire(old)
		}
		a.fillSize = min(chunkSize, max(64<<10, 2*a.fillSize, need))
		a.fill = a.newChunk(a.fillSize)
		ci = a.fill
	default:
		ci = a.fill
	}
	c := &a.chunks[ci]
	at := len(c.b)
	c.b = c.b[:at+need]
	binary.LittleEndian.PutUint32(c.b[at:], uint32(slot))
	c.b[at+4] = kind
	binary.LittleEndian.PutUint32(c.b[at+5:], uint32(cp))
	if cp >= bigSpan {
		a.retire(ci) // nothing else goes there
	}
	return span{chunk: ci, off: uint32(at + spanHeader), cap: uint32(cp)}
}

// release marks sp dead.
func (a *arena) release(sp span) {
	if sp.off == 0 {
		return // never allocated
	}
	c := &a.chunks[sp.chunk]
	c.dead += spanHeader + int(sp.cap)
	if sp.chunk != a.fill {
		a.retire(sp.chunk)
	}
}

// retire looks at a chunk that receives no more allocations: it is
// dropped once all dead, queued for compaction once mostly dead.
func (a *arena) retire(ci int32) {
	c := &a.chunks[ci]
	switch {
	case c.dead >= len(c.b):
		if ci == a.compacting {
			a.compacting = -1
		} else if c.queued {
			return // dropped when the queue reaches it
		}
		a.drop(ci)
	case !c.queued && 2*c.dead > len(c.b):
		c.queued = true
		a.queue = append(a.queue, ci)
	}
}

func (a *arena) drop(ci int32) {
	a.chunks[ci] = chunk{}
	a.free = append(a.free, ci)
}

// grow makes room in *sp for extra more bytes, for run slot's span of
// kind: in place when sp ends the chunk being filled, else by moving it,
// with room to double.
func (a *arena) grow(slot int32, kind byte, sp *span, extra int) {
	need := int(sp.n) + extra
	if need <= int(sp.cap) {
		return
	}
	if sp.off != 0 && sp.chunk == a.fill {
		c := &a.chunks[a.fill]
		if int(sp.off+sp.cap) == len(c.b) && len(c.b)+need-int(sp.cap) <= cap(c.b) {
			c.b = c.b[:len(c.b)+need-int(sp.cap)]
			sp.cap = uint32(need)
			binary.LittleEndian.PutUint32(c.b[sp.off-4:], sp.cap)
			return
		}
	}
	cp := need
	if sp.n > 0 {
		cp = max(need, 2*int(sp.n))
	}
	next := a.alloc(slot, kind, cp)
	next.n = sp.n
	copy(a.chunks[next.chunk].b[next.off:], a.bytes(*sp))
	a.release(*sp)
	*sp = next
}

// write appends p to *sp, growing it as needed.
func (a *arena) write(slot int32, kind byte, sp *span, p []byte) {
	a.grow(slot, kind, sp, len(p))
	copy(a.chunks[sp.chunk].b[sp.off+sp.n:], p)
	sp.n += uint32(len(p))
}

// put allocates a span holding exactly p.
func (a *arena) put(slot int32, kind byte, p []byte) span {
	sp := a.alloc(slot, kind, len(p))
	a.write(slot, kind, &sp, p)
	return sp
}

// compact walks at least budget bytes of the chunks queued for
// compaction, moving the live spans it meets to the arena's end. spanOf
// returns the span of kind of run slot, where a live span is recorded.
func (a *arena) compact(budget int, spanOf func(slot int32, kind byte) *span) {
	for budget > 0 {
		if a.compacting < 0 {
			if len(a.queue) == 0 {
				return
			}
			a.compacting, a.pos = a.queue[0], 0
			a.queue = a.queue[1:]
			if a.chunks[a.compacting].dead >= len(a.chunks[a.compacting].b) {
				a.drop(a.compacting)
				a.compacting = -1
				continue
			}
		}
		ci := a.compacting
		b := a.chunks[ci].b
		if a.pos >= len(b) {
			a.drop(ci)
			a.compacting = -1
			continue
		}
		slot := int32(binary.LittleEndian.Uint32(b[a.pos:]))
		kind := b[a.pos+4]
		cp := int(binary.LittleEndian.Uint32(b[a.pos+5:]))
		off := uint32(a.pos + spanHeader)
		a.pos += spanHeader + cp
		budget -= spanHeader
		if sp := spanOf(slot, kind); sp != nil && sp.chunk == ci && sp.off == off {
			next := a.alloc(slot, kind, int(sp.n))
			next.n = sp.n
			copy(a.chunks[next.chunk].b[next.off:], a.bytes(*sp))
			*sp = next
			budget -= int(sp.n)
		}
	}
}

// live returns the bytes allocated in chunks and the bytes of them dead,
// for tests.
func (a *arena) live() (allocated, dead int) {
	for _, c := range a.chunks {
		allocated += len(c.b)
		dead += c.dead
	}
	return allocated, dead
}
