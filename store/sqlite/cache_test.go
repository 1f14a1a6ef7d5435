package sqlite

import (
	"strconv"
	"testing"

	"github.com/asmp-dev/asmp/store"
)

// commit records one whole commit of run id: r is its new value, nil when
// deleted.
func commit(c *runCache, id string, r *store.Run) {
	c.done(id, r, c.committing(id))
}

// A value read before a commit is not kept once the commit is recorded,
// and a commit replaces a kept value but does not add an absent one.
func TestRunCacheNeverKeepsAValueOlderThanACommit(t *testing.T) {
	t.Parallel()
	c := newRunCache()
	_, ok, gen := c.get("a")
	if ok {
		t.Fatal("empty cache hit")
	}
	commit(c, "a", &store.Run{ID: "a", Version: 2}) // commit lands between the read and the fill
	c.fill(store.Run{ID: "a", Version: 1}, 1, gen)
	if r, ok, _ := c.get("a"); ok {
		t.Fatalf("kept version %d read before a later commit", r.Version)
	}

	_, _, gen = c.get("a")
	c.fill(store.Run{ID: "a", Version: 2}, 1, gen)
	if r, ok, _ := c.get("a"); !ok || r.Version != 2 {
		t.Fatalf("fill without a commit in between: %v %v", r, ok)
	}
	commit(c, "a", &store.Run{ID: "a", Version: 3})
	if r, _, _ := c.get("a"); r.Version != 3 {
		t.Fatalf("a commit did not replace the kept value: %d", r.Version)
	}
	commit(c, "a", nil)
	if _, ok, _ := c.get("a"); ok {
		t.Fatal("a deleted run is still kept")
	}
	commit(c, "b", &store.Run{ID: "b", Version: 5})
	if _, ok, _ := c.get("b"); ok {
		t.Fatal("a commit added a run nobody read")
	}
}

// While a commit is in flight (after committing, before done: the COMMIT
// may already be visible to a read of the database), the cache answers no
// read from the old value and keeps no value a read fills in, so nobody
// gets a value older than one another read has seen in the database. Two
// commits of one run in one group keep the last value.
func TestRunCacheServesNoOldValueWhileACommitIsInFlight(t *testing.T) {
	t.Parallel()
	c := newRunCache()
	_, _, gen := c.get("a")
	c.fill(store.Run{ID: "a", Version: 1}, 7, gen)

	rowid := c.committing("a")
	if rowid != 7 {
		t.Fatalf("committing returned rowid %d, kept with 7", rowid)
	}
	if r, ok, _ := c.get("a"); ok {
		t.Fatalf("read got kept version %d during its commit", r.Version)
	}
	_, _, gen = c.get("a")
	c.fill(store.Run{ID: "a", Version: 1}, 7, gen) // read from the database just before COMMIT
	if r, ok, _ := c.get("a"); ok {
		t.Fatalf("kept version %d filled during a commit", r.Version)
	}
	c.done("a", &store.Run{ID: "a", Version: 2}, rowid)
	if r, ok, _ := c.get("a"); !ok || r.Version != 2 || c.rowid("a") != 7 {
		t.Fatalf("after the commit: %v %v rowid %d, want version 2 kept with rowid 7", r.Version, ok, c.rowid("a"))
	}

	// Two commits of a in one group, then a failed COMMIT of a third.
	r1, r2 := c.committing("a"), c.committing("a")
	c.done("a", &store.Run{ID: "a", Version: 3}, r1)
	_, _, gen = c.get("a")
	c.fill(store.Run{ID: "a", Version: 2}, 7, gen) // still in flight: refused
	c.done("a", &store.Run{ID: "a", Version: 4}, r2)
	if r, ok, _ := c.get("a"); !ok || r.Version != 4 {
		t.Fatalf("after two commits in one group: %v %v, want version 4", r.Version, ok)
	}
	c.done("a", nil, c.committing("a"))
	if _, ok, _ := c.get("a"); ok {
		t.Fatal("a run whose COMMIT failed is still kept")
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
		commit(c, id, &store.Run{ID: id, Version: 2, Snapshot: store.Snapshot{Data: data[:len(data)/2]}})
	}
	check()
	_, _, gen := c.get("huge")
	c.fill(store.Run{ID: "huge", Snapshot: store.Snapshot{Data: make([]byte, maxCachedRun)}}, 1, gen)
	if _, ok, _ := c.get("huge"); ok {
		t.Fatal("kept a run larger than maxCachedRun")
	}
	check()
}
