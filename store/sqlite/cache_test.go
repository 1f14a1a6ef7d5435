package sqlite

import (
	"strconv"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// A value read before a commit is not kept once the commit is recorded,
// and a commit replaces a kept value but does not add an absent one.
func TestRunCacheNeverKeepsAValueOlderThanACommit(t *testing.T) {
	c := newRunCache()
	_, ok, gen := c.get("a")
	if ok {
		t.Fatal("empty cache hit")
	}
	c.committed("a", store.Run{ID: "a", Version: 2}, false) // commit lands between the read and the fill
	c.fill(store.Run{ID: "a", Version: 1}, gen)
	if r, ok, _ := c.get("a"); ok {
		t.Fatalf("kept version %d read before a later commit", r.Version)
	}

	_, _, gen = c.get("a")
	c.fill(store.Run{ID: "a", Version: 2}, gen)
	if r, ok, _ := c.get("a"); !ok || r.Version != 2 {
		t.Fatalf("fill without a commit in between: %v %v", r, ok)
	}
	c.committed("a", store.Run{ID: "a", Version: 3}, false)
	if r, _, _ := c.get("a"); r.Version != 3 {
		t.Fatalf("a commit did not replace the kept value: %d", r.Version)
	}
	c.committed("a", store.Run{}, true)
	if _, ok, _ := c.get("a"); ok {
		t.Fatal("a deleted run is still kept")
	}
	c.committed("b", store.Run{ID: "b", Version: 5}, false)
	if _, ok, _ := c.get("b"); ok {
		t.Fatal("a commit added a run nobody read")
	}
}

// The cache stays within its bound.
func TestRunCacheIsBounded(t *testing.T) {
	c := newRunCache()
	for i := range 2 * maxCachedRuns {
		id := strconv.Itoa(i)
		_, _, gen := c.get(id)
		c.fill(store.Run{ID: id, Version: 1}, gen)
	}
	if n := len(c.runs); n > maxCachedRuns || n == 0 {
		t.Fatalf("%d runs kept, bound %d", n, maxCachedRuns)
	}
}
