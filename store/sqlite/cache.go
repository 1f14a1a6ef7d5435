package sqlite

import (
	"hash/maphash"
	"sync"

	"github.com/asmp-dev/asmp/store"
)

// Bounds of the runs the store keeps in memory: how many, how many bytes
// in all, and the largest run kept (a run's data may be up to the request
// body limit).
const (
	maxCachedRuns  = 1 << 16
	maxCachedBytes = 64 << 20
	maxCachedRun   = 256 << 10
)

// runSize approximates the memory a kept run holds.
func runSize(r store.Run) int {
	n := 256 + len(r.ID) + len(r.WorkflowID) + len(r.WorkflowVersion) + len(r.State) + len(r.Status) + len(r.Error) + len(r.Data)
	for _, m := range r.Milestones {
		n += 16 + len(m)
	}
	return n
}

// runCache keeps the current value of recently read runs, so that reading
// a run again costs a map lookup instead of a query. Only one process
// uses a database file (Open takes an exclusive lock), and every write
// goes through the store's writer, which drops a run's kept value before
// the COMMIT that changes it (committing) and keeps the new value once
// the COMMIT is done (done), before answering the write. So no read gets
// a value older than one another read has already seen in the database:
// while a commit is in flight its run is read from the database, which
// holds the old value until COMMIT and the new one from then on.
//
// A read that misses fills the cache with what it read unless a commit of
// a run in the same bucket began or ended meanwhile (gens) or is in
// flight (pending), so a value read just before a commit can never be
// kept after it. Creating runs does not fill the cache; reading them does.
//
// A kept run also keeps its row's rowid, which never changes while the
// store is open (nothing here renumbers rows: no VACUUM), so that a commit
// finds the row without a walk of the id index.
type runCache struct {
	mu    sync.Mutex
	runs  map[string]cachedRun
	bytes int          // runSize of the kept runs
	gens  [1024]uint64 // commits begun and ended per bucket of run ids
	// pending counts the commits in flight per bucket: between
	// committing and done, no read fills the bucket.
	pending [1024]int32
	seed    maphash.Seed
}

// cachedRun is a kept run and its row's rowid.
type cachedRun struct {
	run   store.Run
	rowid int64
}

func newRunCache() *runCache {
	return &runCache{runs: map[string]cachedRun{}, seed: maphash.MakeSeed()}
}

func (c *runCache) bucket(id string) int {
	return int(maphash.String(c.seed, id) % uint64(len(c.gens)))
}

// get returns the cached value of run id, and the bucket's generation to
// give fill when it is not cached.
func (c *runCache) get(id string) (store.Run, bool, uint64) {
	b := c.bucket(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.runs[id]
	return r.run, ok, c.gens[b]
}

// rowid returns the rowid of run id's row, or 0 when the run is not kept.
func (c *runCache) rowid(id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id].rowid
}

// fill keeps r, read from the database in the row rowid, unless a commit
// in its bucket happened since gen was read.
func (c *runCache) fill(r store.Run, rowid int64, gen uint64) {
	b := c.bucket(r.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens[b] != gen || c.pending[b] != 0 {
		return
	}
	c.put(r, rowid)
}

// put keeps r, making room first when a bound would be passed. Runs too
// large to keep are forgotten instead. The caller holds mu.
func (c *runCache) put(r store.Run, rowid int64) {
	if old, ok := c.runs[r.ID]; ok {
		c.bytes -= runSize(old.run)
		delete(c.runs, r.ID)
	}
	size := runSize(r)
	if size > maxCachedRun {
		return
	}
	if len(c.runs) >= maxCachedRuns || c.bytes+size > maxCachedBytes {
		for id, old := range c.runs { // drop about half, whichever come first
			delete(c.runs, id)
			c.bytes -= runSize(old.run)
			if len(c.runs) < maxCachedRuns/2 && c.bytes < maxCachedBytes/2 {
				break
			}
		}
	}
	c.runs[r.ID] = cachedRun{run: r, rowid: rowid}
	c.bytes += size
}

// committing records that a commit of run id is about to be made
// durable: its kept value is dropped and, until done, no read keeps one.
// It returns the rowid the run was kept with (0 when it was not kept),
// for done.
func (c *runCache) committing(id string) (rowid int64) {
	b := c.bucket(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[b]++
	c.pending[b]++
	old, ok := c.runs[id]
	if !ok {
		return 0
	}
	delete(c.runs, id)
	c.bytes -= runSize(old.run)
	return old.rowid
}

// done records the end of a commit of run id begun with committing, which
// returned rowid: r is the run's new value, nil when the run was deleted
// or the COMMIT failed. The new value is kept when the run was kept
// before the commit (rowid != 0) or is kept now (by an earlier commit of
// the same group); a run nobody read stays uncached.
func (c *runCache) done(id string, r *store.Run, rowid int64) {
	b := c.bucket(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[b]++
	c.pending[b]--
	old, ok := c.runs[id]
	if ok {
		delete(c.runs, id)
		c.bytes -= runSize(old.run)
		if rowid == 0 {
			rowid = old.rowid
		}
	}
	if r != nil && rowid != 0 {
		c.put(*r, rowid)
	}
}

// hook is the commitHook of one commit of run id: r is its new value, nil
// when the commit deletes it.
func (c *runCache) hook(id string, r *store.Run) *commitHook {
	var rowid int64
	return &commitHook{
		before: func() { rowid = c.committing(id) },
		after: func(ok bool) {
			if !ok {
				r = nil
			}
			c.done(id, r, rowid)
		},
	}
}
