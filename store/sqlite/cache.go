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
// goes through the store's writer, which updates a cached run right after
// its commit and before answering the write: a read that starts after a
// write was acknowledged never gets an older value.
//
// A read that misses fills the cache with what it read unless a commit of
// a run in the same bucket happened meanwhile (gens), so a value read just
// before a commit can never be kept after it. Creating runs does not fill
// the cache; reading them does.
//
// A kept run also keeps its row's rowid, which never changes while the
// store is open (nothing here renumbers rows: no VACUUM), so that a commit
// finds the row without a walk of the id index.
type runCache struct {
	mu    sync.Mutex
	runs  map[string]cachedRun
	bytes int          // runSize of the kept runs
	gens  [1024]uint64 // commits per bucket of run ids
	seed  maphash.Seed
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
	if c.gens[b] != gen {
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

// committed records a commit of run id: its new value r, or its deletion
// (deleted). A cached value is replaced; an uncached run stays uncached.
func (c *runCache) committed(id string, r store.Run, deleted bool) {
	b := c.bucket(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[b]++
	old, ok := c.runs[id]
	if !ok {
		return
	}
	if deleted {
		delete(c.runs, id)
		c.bytes -= runSize(old.run)
		return
	}
	c.put(r, old.rowid)
}
