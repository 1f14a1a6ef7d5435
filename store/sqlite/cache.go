package sqlite

import (
	"hash/maphash"
	"sync"

	"github.com/asmp-dev/asmp/store"
)

// maxCachedRuns bounds the runs the store keeps in memory.
const maxCachedRuns = 1 << 16

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
type runCache struct {
	mu   sync.Mutex
	runs map[string]store.Run
	gens [1024]uint64 // commits per bucket of run ids
	seed maphash.Seed
}

func newRunCache() *runCache {
	return &runCache{runs: map[string]store.Run{}, seed: maphash.MakeSeed()}
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
	return r, ok, c.gens[b]
}

// fill keeps r, read from the database, unless a commit in its bucket
// happened since gen was read.
func (c *runCache) fill(r store.Run, gen uint64) {
	b := c.bucket(r.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens[b] != gen {
		return
	}
	if len(c.runs) >= maxCachedRuns {
		for id := range c.runs { // drop about half, whichever come first
			delete(c.runs, id)
			if len(c.runs) < maxCachedRuns/2 {
				break
			}
		}
	}
	c.runs[r.ID] = r
}

// committed records a commit of run id: its new value r, or its deletion
// (deleted). A cached value is replaced; an uncached run stays uncached.
func (c *runCache) committed(id string, r store.Run, deleted bool) {
	b := c.bucket(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[b]++
	if _, ok := c.runs[id]; !ok {
		return
	}
	if deleted {
		delete(c.runs, id)
		return
	}
	c.runs[id] = r
}
