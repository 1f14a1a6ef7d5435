package sqlite

import (
	"strconv"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// A value read before a commit is not kept once the commit is recorded,
// and a commit replaces a kept value but does not add an absent one.
func TestRunCacheNeverKeepsAValueOlderThanACommit(t *testing.T) {
	t.Parallel()
	c := newRunCache()
	_, ok, gen := c.get("a")
	if ok {
		t.Fatal("empty cache hit")
	}
	c.committed("a", store.Run{ID: "a", Version: 2}, false) // commit lands between the read and the fill
	c.fill(store.Run{ID: "a", Version: 1}, 1, gen)
	if r, ok, _ := c.get("a"); ok {
		t.Fatalf("kept version %d read before a later commit", r.Version)
	}

	_, _, gen = c.get("a")
	c.fill(store.Run{ID: "a", Version: 2}, 1, gen)
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

// The cache stays within its bounds: runs, bytes, and the largest run.
func TestRunCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newRunCache()
	check := func() {
		t.Helper()
		sum := 0
		for _, r := range c.runs {
			sum += runSize(r.run)
		}
		if n := len(c.runs); n > maxCachedRuns || n == 0 || sum != c.bytes || c.bytes > maxCachedBytes {
			t.Fatalf("%d runs, %d bytes kept (counted %d); bounds %d runs, %d bytes", n, sum, c.bytes, maxCachedRuns, maxCachedBytes)
		}
	}
	for i := range 2 * maxCachedRuns {
		id := strconv.Itoa(i)
		_, _, gen := c.get(id)
		c.fill(store.Run{ID: id, Version: 1}, int64(i+1), gen)
	}
	check()
	data := make([]byte, 100<<10)
	for i := range 2 * maxCachedBytes / len(data) {
		id := "big" + strconv.Itoa(i)
		_, _, gen := c.get(id)
		c.fill(store.Run{ID: id, Version: 1, Snapshot: store.Snapshot{Data: data}}, int64(i+1), gen)
		c.committed(id, store.Run{ID: id, Version: 2, Snapshot: store.Snapshot{Data: data[:len(data)/2]}}, false)
	}
	check()
	_, _, gen := c.get("huge")
	c.fill(store.Run{ID: "huge", Snapshot: store.Snapshot{Data: make([]byte, maxCachedRun)}}, 1, gen)
	if _, ok, _ := c.get("huge"); ok {
		t.Fatal("kept a run larger than maxCachedRun")
	}
	check()
}
