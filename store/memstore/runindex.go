package memstore

import (
	"bytes"
	"cmp"
)

// runIndex is an ordered index of the runs, a B+tree whose nodes sit in
// slabs and link by int32 index, so it holds no pointer the garbage
// collector would trace. Each run has one entry per group it belongs to
// (all runs; its workflow; its state; its stored status; its workflow and
// state: the filters of a run list), ordered by group, then updated_at,
// then id; a list walks one group backwards from its cursor, so a page
// costs O(log n + its length) whatever else is stored.
type runIndex struct {
	leaves slab[leaf]
	inners slab[inner]
	root   int32
	height int // 0: the root is a leaf
	// id returns the id of the run in slot, to order entries that tie on
	// group and time.
	id func(slot int32) []byte
}

// ikey is one entry: a run (its slot) in a group at a time.
type ikey struct {
	group uint64
	sec   int64 // updated_at: Unix seconds, then nanoseconds
	nsec  int32
	slot  int32
}

const (
	leafMax  = 64
	innerMax = 64
	leafMin  = leafMax / 4
	innerMin = innerMax / 4
)

type leaf struct {
	n          int32
	prev, next int32 // neighbours in key order; -1: none
	keys       [leafMax]ikey
}

type inner struct {
	n    int32
	kids [innerMax]int32
	mins [innerMax]ikey // the least key under each kid
}

// probe is a position to look up: a key, or the position of a run id at
// a time (slot < 0), or the start of a group (groupOnly).
type probe struct {
	ikey
	id        []byte
	groupOnly bool
}

func newRunIndex(id func(int32) []byte) runIndex {
	t := runIndex{leaves: newSlab[leaf](6), inners: newSlab[inner](5), id: id}
	t.root = t.newLeaf()
	return t
}

func (t *runIndex) newLeaf() int32 {
	i := t.leaves.alloc()
	*t.leaves.at(i) = leaf{prev: -1, next: -1}
	return i
}

func (t *runIndex) newInner() int32 {
	i := t.inners.alloc()
	t.inners.at(i).n = 0
	return i
}

// cmp orders entry e against p.
func (t *runIndex) cmp(e ikey, p *probe) int {
	switch {
	case e.group < p.group:
		return -1
	case e.group > p.group || p.groupOnly:
		return 1 // every entry of the group is at or after its start
	case e.sec != p.sec:
		return cmp.Compare(e.sec, p.sec)
	case e.nsec != p.nsec:
		return cmp.Compare(e.nsec, p.nsec)
	}
	if p.slot >= 0 {
		if e.slot == p.slot {
			return 0
		}
		return bytes.Compare(t.id(e.slot), t.id(p.slot))
	}
	return bytes.Compare(t.id(e.slot), p.id)
}

// minOf returns the least key under node at height h.
func (t *runIndex) minOf(node int32, h int) ikey {
	if h == 0 {
		return t.leaves.at(node).keys[0]
	}
	return t.inners.at(node).mins[0]
}

func (t *runIndex) count(node int32, h int) int32 {
	if h == 0 {
		return t.leaves.at(node).n
	}
	return t.inners.at(node).n
}

// route returns the kid of n under which p falls: the last whose least
// key is at or before p (the first kid when none).
func (t *runIndex) route(n *inner, p *probe) int {
	lo, hi := 1, int(n.n)
	for lo < hi {
		m := (lo + hi) / 2
		if t.cmp(n.mins[m], p) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// search returns the first position of l at or after p.
func (t *runIndex) search(l *leaf, p *probe) int {
	lo, hi := 0, int(l.n)
	for lo < hi {
		m := (lo + hi) / 2
		if t.cmp(l.keys[m], p) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// insert adds k (not in the index).
func (t *runIndex) insert(k ikey) {
	p := probe{ikey: k}
	right := t.insertAt(t.root, t.height, &p)
	if right < 0 {
		return
	}
	r := t.newInner()
	n := t.inners.at(r)
	n.n = 2
	n.kids[0], n.kids[1] = t.root, right
	n.mins[0], n.mins[1] = t.minOf(t.root, t.height), t.minOf(right, t.height)
	t.root = r
	t.height++
}

// insertAt inserts p's key under node at height h and returns the node's
// new right sibling when it split, else -1.
func (t *runIndex) insertAt(node int32, h int, p *probe) int32 {
	if h == 0 {
		l := t.leaves.at(node)
		i := t.search(l, p)
		if l.n < leafMax {
			copy(l.keys[i+1:l.n+1], l.keys[i:l.n])
			l.keys[i] = p.ikey
			l.n++
			return -1
		}
		ri := t.newLeaf()
		r := t.leaves.at(ri)
		// Split in the middle, or where the key goes when that is past
		// it: keys mostly arrive in time order, at the end of their
		// group, so the left part stays full.
		half := int32(max(leafMax/2, i))
		copy(r.keys[:], l.keys[half:])
		r.n, l.n = leafMax-half, half
		r.prev, r.next = node, l.next
		if l.next >= 0 {
			t.leaves.at(l.next).prev = ri
		}
		l.next = ri
		if i > int(half) || i == int(half) && half > leafMax/2 {
			l, i = r, i-int(half)
		}
		copy(l.keys[i+1:l.n+1], l.keys[i:l.n])
		l.keys[i] = p.ikey
		l.n++
		return ri
	}
	n := t.inners.at(node)
	j := t.route(n, p)
	right := t.insertAt(n.kids[j], h-1, p)
	n.mins[j] = t.minOf(n.kids[j], h-1)
	if right < 0 {
		return -1
	}
	kid, min := right, t.minOf(right, h-1)
	j++ // where the new kid goes
	out := int32(-1)
	if n.n == innerMax {
		out = t.newInner()
		r := t.inners.at(out)
		half := max(innerMax/2, j) // as for leaves
		copy(r.kids[:], n.kids[half:])
		copy(r.mins[:], n.mins[half:])
		r.n, n.n = int32(innerMax-half), int32(half)
		if j > half || j == half && half > innerMax/2 {
			n, j = r, j-half
		}
	}
	copy(n.kids[j+1:n.n+1], n.kids[j:n.n])
	copy(n.mins[j+1:n.n+1], n.mins[j:n.n])
	n.kids[j], n.mins[j] = kid, min
	n.n++
	return out
}

// delete removes k; it reports whether k was there.
func (t *runIndex) delete(k ikey) bool {
	p := probe{ikey: k}
	if !t.deleteAt(t.root, t.height, &p) {
		return false
	}
	if t.height > 0 && t.inners.at(t.root).n == 1 {
		old := t.root
		t.root = t.inners.at(old).kids[0]
		t.height--
		t.inners.release(old)
	}
	return true
}

func (t *runIndex) deleteAt(node int32, h int, p *probe) bool {
	if h == 0 {
		l := t.leaves.at(node)
		i := t.search(l, p)
		if i == int(l.n) || l.keys[i].slot != p.slot || t.cmp(l.keys[i], p) != 0 {
			return false
		}
		copy(l.keys[i:], l.keys[i+1:l.n])
		l.n--
		return true
	}
	n := t.inners.at(node)
	j := t.route(n, p)
	if !t.deleteAt(n.kids[j], h-1, p) {
		return false
	}
	least := int32(leafMin)
	if h-1 > 0 {
		least = innerMin
	}
	if t.count(n.kids[j], h-1) < least {
		t.rebalance(n, j, h-1)
	} else {
		n.mins[j] = t.minOf(n.kids[j], h-1)
	}
	return true
}

// move changes the entry old (in the index) into new, of the same group
// and slot, in place when no other entry lies between them (a run's
// change moves it to the end of its groups: usually in its leaf), and
// else by a removal and an insertion.
//
// When old is not its leaf's least entry and the leaf keeps more than its
// minimum without it, old is removed where the first seek found it (no
// node above changes: the leaf's least key and its size bound stay), so
// a run ticked among others (64 runs round-robin: the ticked one is the
// oldest of its groups and moves to their end) costs two descents, not
// three.
func (t *runIndex) move(old, new ikey) {
	p := probe{ikey: old}
	at := t.seek(&p)
	if t.valid(at) && at.i > 0 { // the leaf's least key stays
		l := t.leaves.at(at.leaf)
		if l.keys[at.i].slot == old.slot && t.cmp(l.keys[at.i], &p) == 0 {
			q := probe{ikey: new}
			if t.cmp(l.keys[at.i-1], &q) < 0 {
				if nx := t.next(at); !t.valid(nx) || t.cmp(t.key(nx), &q) > 0 {
					l.keys[at.i] = new
					return
				}
			}
			if t.height == 0 || l.n > leafMin {
				copy(l.keys[at.i:l.n-1], l.keys[at.i+1:l.n])
				l.n--
				t.insert(new)
				return
			}
		}
	}
	t.delete(old)
	t.insert(new)
}

// rebalance merges kid j of n (at height h, too small) with a neighbour,
// or evens their entries out when both would not fit in one node.
func (t *runIndex) rebalance(n *inner, j int, h int) {
	a := j
	if j > 0 {
		a = j - 1
	}
	b := a + 1
	if b >= int(n.n) {
		// n's only kid (a node split where its keys were appended): drop
		// it once empty, so that no node keeps a stale least key; n's
		// parent then merges n away (the root never has one kid).
		if t.count(n.kids[a], h) > 0 {
			n.mins[a] = t.minOf(n.kids[a], h)
			return
		}
		if h == 0 {
			t.unlink(n.kids[a])
		} else {
			t.inners.release(n.kids[a])
		}
		n.n = 0
		return
	}
	ka, kb := n.kids[a], n.kids[b]
	if h == 0 {
		la, lb := t.leaves.at(ka), t.leaves.at(kb)
		if la.n+lb.n <= leafMax {
			copy(la.keys[la.n:], lb.keys[:lb.n])
			la.n += lb.n
			t.unlink(kb)
			t.removeKid(n, b)
		} else {
			var all [2 * leafMax]ikey
			m := copy(all[:], la.keys[:la.n])
			m += copy(all[m:], lb.keys[:lb.n])
			la.n = int32(m / 2)
			lb.n = int32(m) - la.n
			copy(la.keys[:], all[:la.n])
			copy(lb.keys[:], all[la.n:m])
		}
	} else {
		ia, ib := t.inners.at(ka), t.inners.at(kb)
		if ia.n+ib.n <= innerMax {
			copy(ia.kids[ia.n:], ib.kids[:ib.n])
			copy(ia.mins[ia.n:], ib.mins[:ib.n])
			ia.n += ib.n
			t.inners.release(kb)
			t.removeKid(n, b)
		} else {
			var kids [2 * innerMax]int32
			var mins [2 * innerMax]ikey
			m := copy(kids[:], ia.kids[:ia.n])
			copy(mins[:], ia.mins[:ia.n])
			copy(kids[m:], ib.kids[:ib.n])
			copy(mins[m:], ib.mins[:ib.n])
			m += int(ib.n)
			ia.n = int32(m / 2)
			ib.n = int32(m) - ia.n
			copy(ia.kids[:], kids[:ia.n])
			copy(ia.mins[:], mins[:ia.n])
			copy(ib.kids[:], kids[ia.n:m])
			copy(ib.mins[:], mins[ia.n:m])
		}
	}
	n.mins[a] = t.minOf(n.kids[a], h)
	if b < int(n.n) && n.kids[b] == kb {
		n.mins[b] = t.minOf(kb, h)
	}
}

// unlink takes leaf i out of the chain of leaves and frees it.
func (t *runIndex) unlink(i int32) {
	l := t.leaves.at(i)
	if l.prev >= 0 {
		t.leaves.at(l.prev).next = l.next
	}
	if l.next >= 0 {
		t.leaves.at(l.next).prev = l.prev
	}
	t.leaves.release(i)
}

func (t *runIndex) removeKid(n *inner, b int) {
	copy(n.kids[b:], n.kids[b+1:n.n])
	copy(n.mins[b:], n.mins[b+1:n.n])
	n.n--
}

// pos is a position in the index: entry i of a leaf.
type pos struct {
	leaf int32
	i    int32
}

// seek returns the position of the first entry at or after p (its leaf
// may be at its end: see valid).
func (t *runIndex) seek(p *probe) pos {
	node := t.root
	for h := t.height; h > 0; h-- {
		n := t.inners.at(node)
		node = n.kids[t.route(n, p)]
	}
	l := t.leaves.at(node)
	return t.norm(pos{node, int32(t.search(l, p))})
}

// norm moves a position at the end of its leaf to the next leaf's first
// entry.
func (t *runIndex) norm(at pos) pos {
	for at.leaf >= 0 && at.i >= t.leaves.at(at.leaf).n {
		at = pos{t.leaves.at(at.leaf).next, 0}
	}
	return at
}

// valid reports whether at names an entry.
func (t *runIndex) valid(at pos) bool { return at.leaf >= 0 }

func (t *runIndex) key(at pos) ikey { return t.leaves.at(at.leaf).keys[at.i] }

func (t *runIndex) next(at pos) pos { return t.norm(pos{at.leaf, at.i + 1}) }

// prev returns the position before at (at may be invalid: the end), or
// an invalid one before the first entry.
func (t *runIndex) prev(at pos) pos {
	if at.leaf < 0 {
		at = pos{t.last(), 0}
		at.i = t.leaves.at(at.leaf).n
	}
	for at.i == 0 {
		if at.leaf = t.leaves.at(at.leaf).prev; at.leaf < 0 {
			return at
		}
		at.i = t.leaves.at(at.leaf).n
	}
	at.i--
	return at
}

// last returns the rightmost leaf.
func (t *runIndex) last() int32 {
	node := t.root
	for h := t.height; h > 0; h-- {
		n := t.inners.at(node)
		node = n.kids[n.n-1]
	}
	return node
}

// slab holds values of a pointer-free type T in fixed pages, addressed
// by int32 (a page never moves, so pointers into it stay valid while the
// slab grows), with a free list.
type slab[T any] struct {
	pages [][]T
	shift uint
	n     int32
	free  []int32
}

func newSlab[T any](shift uint) slab[T] { return slab[T]{shift: shift} }

func (s *slab[T]) at(i int32) *T {
	return &s.pages[i>>s.shift][i&(1<<s.shift-1)]
}

func (s *slab[T]) alloc() int32 {
	if k := len(s.free); k > 0 {
		i := s.free[k-1]
		s.free = s.free[:k-1]
		return i
	}
	if int(s.n)>>s.shift == len(s.pages) {
		s.pages = append(s.pages, make([]T, 1<<s.shift))
	}
	s.n++
	return s.n - 1
}

func (s *slab[T]) release(i int32) {
	var zero T
	*s.at(i) = zero
	s.free = append(s.free, i)
}
