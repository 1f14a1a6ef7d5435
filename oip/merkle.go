package oip

import (
	"crypto/sha256"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// hashSize is the size of every tree hash (SHA-256).
const hashSize = sha256.Size

// tree is an append-only RFC 6962 Merkle tree that keeps every perfect
// subtree's hash: levels[0] holds the leaf hashes, levels[l][i] the hash of
// node (l, i), which covers leaves [i·2^l, (i+1)·2^l). A node is stored as
// soon as its subtree is complete, so the tree holds about 2n hashes (64
// bytes per leaf) and any proof for any size up to n reads O(log n) stored
// hashes: no proof or root needs more than O(log n) hashing.
//
// tree is not safe for concurrent use; Service guards it with a lock.
type tree struct {
	levels [][][hashSize]byte
}

// size returns the number of leaves.
func (t *tree) size() uint64 {
	if len(t.levels) == 0 {
		return 0
	}
	return uint64(len(t.levels[0]))
}

// append adds one leaf hash and every perfect subtree it completes.
func (t *tree) append(leaf [hashSize]byte) {
	if len(t.levels) == 0 {
		t.levels = append(t.levels, nil)
	}
	t.levels[0] = append(t.levels[0], leaf)
	h := leaf
	for l, idx := 0, len(t.levels[0])-1; idx&1 == 1; l, idx = l+1, idx>>1 {
		h = hashChildren(t.levels[l][idx-1], h)
		if l+1 == len(t.levels) {
			t.levels = append(t.levels, nil)
		}
		t.levels[l+1] = append(t.levels[l+1], h)
	}
}

// node returns the stored hash of a perfect subtree.
func (t *tree) node(id compact.NodeID) ([hashSize]byte, error) {
	if int(id.Level) >= len(t.levels) || id.Index >= uint64(len(t.levels[id.Level])) {
		return [hashSize]byte{}, fmt.Errorf("oip: merkle node (%d, %d) is not in a tree of %d leaves", id.Level, id.Index, t.size())
	}
	return t.levels[id.Level][id.Index], nil
}

// root returns the root hash of the tree's first size leaves.
func (t *tree) root(size uint64) ([]byte, error) {
	if size > t.size() {
		return nil, fmt.Errorf("oip: tree size %d is beyond %d", size, t.size())
	}
	if size == 0 {
		h := sha256.Sum256(nil)
		return h[:], nil
	}
	ids := compact.RangeNodes(0, size, nil)
	h, err := t.node(ids[len(ids)-1])
	if err != nil {
		return nil, err
	}
	for i := len(ids) - 2; i >= 0; i-- {
		l, err := t.node(ids[i])
		if err != nil {
			return nil, err
		}
		h = hashChildren(l, h)
	}
	return h[:], nil
}

// inclusion returns the RFC 6962 inclusion proof of leaf index in the tree
// of the given size.
func (t *tree) inclusion(index, size uint64) ([][]byte, error) {
	if size > t.size() {
		return nil, fmt.Errorf("oip: tree size %d is beyond %d", size, t.size())
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("oip: inclusion proof: %w", err)
	}
	return t.rehash(nodes)
}

// consistency returns the RFC 6962 consistency proof between two sizes.
func (t *tree) consistency(size1, size2 uint64) ([][]byte, error) {
	if size2 > t.size() {
		return nil, fmt.Errorf("oip: tree size %d is beyond %d", size2, t.size())
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("oip: consistency proof: %w", err)
	}
	return t.rehash(nodes)
}

func (t *tree) rehash(nodes proof.Nodes) ([][]byte, error) {
	hs := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		h, err := t.node(id)
		if err != nil {
			return nil, err
		}
		hs[i] = h[:]
	}
	out, err := nodes.Rehash(hs, func(l, r []byte) []byte {
		h := hashChildren([hashSize]byte(l), [hashSize]byte(r))
		return h[:]
	})
	if err != nil {
		return nil, fmt.Errorf("oip: merkle proof: %w", err)
	}
	return out, nil
}

// hashChildren is the RFC 6962 interior node hash SHA-256(0x01 || l || r).
func hashChildren(l, r [hashSize]byte) [hashSize]byte {
	var buf [1 + 2*hashSize]byte
	buf[0] = 1
	copy(buf[1:], l[:])
	copy(buf[1+hashSize:], r[:])
	return sha256.Sum256(buf[:])
}
