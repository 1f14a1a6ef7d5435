// Package encoded keeps the API's answers encoded, for package server: the
// State Frames and CLI objects of recently read runs, so that reading an
// unchanged run again costs one store read and no building or encoding,
// and the stream lines of published events, so that the subscribers of a
// run share one encoding of each event. The engine builds frames; it
// neither encodes nor keeps the HTTP answers.
package encoded

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
)

// Answer is a run's State Frame or CLI object encoded as the API answers
// it: JSON and a newline. It is shared and must not be modified.
type Answer struct {
	RunID      string
	WorkflowID string
	Version    int64
	ETag       string // the version as a quoted entity tag
	Base       string // the base URL the hrefs are under ("" for a CLI object)
	Body       []byte
}

// Bounds of each cache of encoded answers: how many, how many bytes in
// all, and the largest answer kept (a frame carries the run's data).
const (
	maxCachedFrames     = 4096
	maxCachedFrameBytes = 32 << 20
	maxCachedFrame      = 64 << 10
)

// Cache keeps the last encoded frame and CLI object of recently read runs
// of one engine. An answer is valid for one (version, base URL): any commit
// makes it stale. Only answers that are a function of the stored run alone
// are kept (engine.PureState): not when a transition leaving the run's
// state has a guard that may change its verdict without the data changing
// (a Go function, or an expression calling now()). It is safe for
// concurrent use.
type Cache struct {
	e      *engine.Engine
	frames answers // encoded State Frames
	clis   answers // encoded CLI objects
}

// New returns an empty cache of e's answers.
func New(e *engine.Engine) *Cache { return &Cache{e: e} }

// Frame returns the encoded State Frame of run runID, as a caller in scope
// sees it (engine.Lookup), for the base URL base, from the cache when the
// run has not changed since it was last encoded for that base.
func (c *Cache) Frame(ctx context.Context, runID, scope, base string) (*Answer, error) {
	return c.answer(ctx, &c.frames, runID, scope, base, func(r *engine.Run) ([]byte, error) {
		return c.e.Frame(r, base).AppendJSON(nil)
	})
}

// CLI returns the encoded CLI object of run runID as a caller in scope
// sees it, from the cache when the run has not changed since it was last
// encoded.
func (c *Cache) CLI(ctx context.Context, runID, scope string) (*Answer, error) {
	return c.answer(ctx, &c.clis, runID, scope, "", func(r *engine.Run) ([]byte, error) {
		return c.e.CLI(r).AppendJSON(nil)
	})
}

// Forget drops what the cache keeps of run runID (a deleted run: its id
// may be given to a new run).
func (c *Cache) Forget(runID string) {
	c.frames.forget(runID)
	c.clis.forget(runID)
}

// answer reads run runID and returns its answer from a, or encodes it (and
// keeps it when the run's state is pure).
func (c *Cache) answer(ctx context.Context, a *answers, runID, scope, base string, encode func(*engine.Run) ([]byte, error)) (*Answer, error) {
	sr, err := c.e.LookupStored(ctx, runID, scope)
	if err != nil {
		return nil, err
	}
	if f := a.get(runID, sr.Version, base); f != nil {
		return f, nil
	}
	r, err := c.e.ViewRun(ctx, sr)
	if err != nil {
		return nil, err
	}
	body, err := encode(r)
	if err != nil {
		return nil, &protocol.Error{Code: protocol.EInternal, Hint: "could not encode the answer", Err: err}
	}
	f := &Answer{RunID: r.ID, WorkflowID: r.WorkflowID, Version: r.Version, ETag: r.ETag(), Base: base, Body: append(body, '\n')}
	if c.e.PureRun(r) {
		a.put(f)
	}
	return f, nil
}

// answers is one bounded map of encoded answers, by run id.
type answers struct {
	m     sync.Map // run id -> *Answer
	n     atomic.Int64
	bytes atomic.Int64
}

func (c *answers) get(runID string, version int64, base string) *Answer {
	v, ok := c.m.Load(runID)
	if !ok {
		return nil
	}
	f := v.(*Answer)
	if f.Version != version || f.Base != base {
		return nil
	}
	return f
}

func (c *answers) put(f *Answer) {
	if len(f.Body) > maxCachedFrame {
		c.forget(f.RunID) // an older, smaller answer of the run is stale anyway
		return
	}
	if old, loaded := c.m.Swap(f.RunID, f); loaded {
		c.bytes.Add(int64(len(f.Body) - len(old.(*Answer).Body)))
	} else {
		c.n.Add(1)
		c.bytes.Add(int64(len(f.Body)))
	}
	if c.n.Load() <= maxCachedFrames && c.bytes.Load() <= maxCachedFrameBytes {
		return
	}
	// Over a bound: forget about half, whichever the map yields first.
	c.m.Range(func(k, v any) bool {
		if c.m.CompareAndDelete(k, v) {
			c.n.Add(-1)
			c.bytes.Add(-int64(len(v.(*Answer).Body)))
		}
		return c.n.Load() > maxCachedFrames/2 || c.bytes.Load() > maxCachedFrameBytes/2
	})
}

// forget drops runID's entry.
func (c *answers) forget(runID string) {
	if v, ok := c.m.LoadAndDelete(runID); ok {
		c.n.Add(-1)
		c.bytes.Add(-int64(len(v.(*Answer).Body)))
	}
}
