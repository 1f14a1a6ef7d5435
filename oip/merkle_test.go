package oip

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/asmp-dev/asmp/store/memstore"
)

func testLeaf(i uint64) [hashSize]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return leafHash(b[:])
}

func buildTree(n uint64) *tree {
	t := &tree{}
	for i := range n {
		t.append(testLeaf(i))
	}
	return t
}

// refRoot computes a root with the library's compact range, independently
// of tree.
func refRoot(t *testing.T, n uint64) []byte {
	t.Helper()
	if n == 0 {
		return rfc6962.DefaultHasher.EmptyRoot()
	}
	f := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := f.NewEmptyRange(0)
	for i := range n {
		h := testLeaf(i)
		if err := r.Append(h[:], nil); err != nil {
			t.Fatal(err)
		}
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestHashesMatchRFC6962(t *testing.T) {
	data := []byte(`{"a":1}`)
	h := leafHash(data)
	if !bytes.Equal(h[:], rfc6962.DefaultHasher.HashLeaf(data)) {
		t.Fatal("leaf hash differs from rfc6962")
	}
	l, r := testLeaf(1), testLeaf(2)
	c := hashChildren(l, r)
	if !bytes.Equal(c[:], rfc6962.DefaultHasher.HashChildren(l[:], r[:])) {
		t.Fatal("children hash differs from rfc6962")
	}
}

func TestTreeRootsMatchReference(t *testing.T) {
	tr := buildTree(300)
	for _, n := range []uint64{0, 1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300} {
		got, err := tr.root(n)
		if err != nil {
			t.Fatal(err)
		}
		if want := refRoot(t, n); !bytes.Equal(got, want) {
			t.Fatalf("root(%d) = %x, want %x", n, got, want)
		}
	}
	if _, err := tr.root(301); err == nil {
		t.Fatal("root beyond the size must fail")
	}
	if _, err := tr.inclusion(0, 301); err == nil {
		t.Fatal("inclusion beyond the size must fail")
	}
}

func verifyIncl(t *testing.T, tr *tree, index, size uint64, roots [][]byte) {
	t.Helper()
	p, err := tr.inclusion(index, size)
	if err != nil {
		t.Fatalf("inclusion(%d, %d): %v", index, size, err)
	}
	leaf := testLeaf(index)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leaf[:], p, roots[size]); err != nil {
		t.Fatalf("inclusion(%d, %d) does not verify: %v", index, size, err)
	}
}

func TestInclusionProofsAllLeavesAllSizes(t *testing.T) {
	const n = 300
	tr := buildTree(n)
	roots := make([][]byte, n+1)
	for s := range uint64(n + 1) {
		roots[s], _ = tr.root(s)
	}
	for size := uint64(1); size <= n; size++ {
		for i := range size {
			verifyIncl(t, tr, i, size, roots)
		}
	}
	// A proof for one leaf does not prove another, nor a tampered one.
	p, _ := tr.inclusion(5, 100)
	other := testLeaf(6)
	if proof.VerifyInclusion(rfc6962.DefaultHasher, 5, 100, other[:], p, roots[100]) == nil {
		t.Fatal("a proof verified for the wrong leaf")
	}
	bad := testLeaf(5)
	bad[0] ^= 1
	if proof.VerifyInclusion(rfc6962.DefaultHasher, 5, 100, bad[:], p, roots[100]) == nil {
		t.Fatal("a proof verified for a tampered leaf")
	}
}

func TestInclusionProofsSampledLarge(t *testing.T) {
	const n = 5000
	tr := buildTree(n)
	roots := make([][]byte, n+1)
	for s := range uint64(n + 1) {
		roots[s], _ = tr.root(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		size := 1 + rng.Uint64N(n)
		verifyIncl(t, tr, rng.Uint64N(size), size, roots)
	}
	for _, size := range []uint64{1024, 2048, 4096, 4097, n} {
		verifyIncl(t, tr, 0, size, roots)
		verifyIncl(t, tr, size-1, size, roots)
	}
}

func verifyCons(t *testing.T, tr *tree, a, b uint64, roots [][]byte) {
	t.Helper()
	p, err := tr.consistency(a, b)
	if err != nil {
		t.Fatalf("consistency(%d, %d): %v", a, b, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, a, b, p, roots[a], roots[b]); err != nil {
		t.Fatalf("consistency(%d, %d) does not verify: %v", a, b, err)
	}
}

func TestConsistencyProofs(t *testing.T) {
	const n = 3000
	tr := buildTree(n)
	roots := make([][]byte, n+1)
	for s := range uint64(n + 1) {
		roots[s], _ = tr.root(s)
	}
	for a := uint64(1); a <= 200; a++ {
		for b := a; b <= 200; b++ {
			verifyCons(t, tr, a, b, roots)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a := 1 + rng.Uint64N(n)
		b := a + rng.Uint64N(n-a+1)
		verifyCons(t, tr, a, b, roots)
	}
	// A proof does not link a different old root.
	p, _ := tr.consistency(10, 20)
	wrong := sha256.Sum256([]byte("not the root"))
	if proof.VerifyConsistency(rfc6962.DefaultHasher, 10, 20, p, wrong[:], roots[20]) == nil {
		t.Fatal("consistency verified against a wrong old root")
	}
}

// Leaves reported out of seq order enter the tree in seq order.
func TestAddLeafOrdersBySeq(t *testing.T) {
	svc := newService(t, memstore.New(), nil)
	order := []int64{3, 5, 2, 1, 4, 1, 7, 6}
	for _, seq := range order {
		svc.addLeaf(seq, testLeaf(uint64(seq-1)))
	}
	if got := svc.size(); got != 7 {
		t.Fatalf("tree has %d leaves, want 7", got)
	}
	root, _ := svc.root(7)
	if want := refRoot(t, 7); !bytes.Equal(root, want) {
		t.Fatal("leaves entered out of order")
	}
	if len(svc.pending) != 0 {
		t.Fatalf("pending not drained: %v", svc.pending)
	}
}
