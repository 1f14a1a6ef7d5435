package engine

import (
	"context"
	"sync"
	"sync/atomic"
)

// Encoded is a run's State Frame or CLI object encoded as the API answers
// it: JSON and a newline. It is shared and must not be modified.
type Encoded struct {
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

// frameCache keeps the last encoded frame (or CLI object) of recently read
// runs, so that reading an unchanged run again costs one store read and no
// building or encoding. An entry is valid for one (version, base URL): any
// commit makes it stale. Only frames that are a function of the stored run
// alone are kept: not when a transition leaving the run's state has a
// guard that may change its verdict without the data changing (a Go
// function, or an expression calling now()).
type frameCache struct {
	m     sync.Map // run id -> *Encoded
	n     atomic.Int64
	bytes atomic.Int64
}

func (c *frameCache) get(runID string, version int64, base string) *Encoded {
	v, ok := c.m.Load(runID)
	if !ok {
		return nil
	}
	f := v.(*Encoded)
	if f.Version != version || f.Base != base {
		return nil
	}
	return f
}

func (c *frameCache) put(f *Encoded) {
	if len(f.Body) > maxCachedFrame {
		c.forget(f.RunID) // an older, smaller answer of the run is stale anyway
		return
	}
	if old, loaded := c.m.Swap(f.RunID, f); loaded {
		c.bytes.Add(int64(len(f.Body) - len(old.(*Encoded).Body)))
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
			c.bytes.Add(-int64(len(v.(*Encoded).Body)))
		}
		return c.n.Load() > maxCachedFrames/2 || c.bytes.Load() > maxCachedFrameBytes/2
	})
}

// forget drops runID's entry.
func (c *frameCache) forget(runID string) {
	if v, ok := c.m.LoadAndDelete(runID); ok {
		c.n.Add(-1)
		c.bytes.Add(-int64(len(v.(*Encoded).Body)))
	}
}

// pureStates records, per workflow, the states whose frames are a
// function of the stored run alone (see frameCache).
func pureStates(e *Engine) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, d := range e.order {
		m := map[string]bool{}
		for _, s := range d.States {
			pure := true
			for _, t := range d.From(s.Name) {
				pure = pure && t.Guard.Pure()
			}
			m[s.Name] = pure
		}
		out[d.ID] = m
	}
	return out
}

// EncodedFrame returns the encoded State Frame of run runID for the base
// URL base, from the cache when the run has not changed since it was last
// encoded for that base.
func (e *Engine) EncodedFrame(ctx context.Context, runID, base string) (*Encoded, error) {
	return e.encoded(ctx, &e.frames, runID, base, func(r *Run) ([]byte, error) {
		return e.Frame(r, base).AppendJSON(nil)
	})
}

// EncodedCLI returns the encoded CLI object of run runID, from the cache
// when the run has not changed since it was last encoded.
func (e *Engine) EncodedCLI(ctx context.Context, runID string) (*Encoded, error) {
	return e.encoded(ctx, &e.clis, runID, "", func(r *Run) ([]byte, error) {
		return e.CLI(r).AppendJSON(nil)
	})
}

// encoded reads run runID and returns its answer from cache c, or encodes
// it (and keeps it when the run's state is pure).
func (e *Engine) encoded(ctx context.Context, c *frameCache, runID, base string, encode func(*Run) ([]byte, error)) (*Encoded, error) {
	sr, err := e.storedRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if f := c.get(runID, sr.Version, base); f != nil {
		return f, nil
	}
	r, err := e.view(sr)
	if err != nil {
		return nil, err
	}
	body, err := encode(r)
	if err != nil {
		return nil, internal("could not encode the answer", err)
	}
	f := &Encoded{RunID: r.ID, WorkflowID: r.WorkflowID, Version: r.Version, ETag: r.ETag(), Base: base, Body: append(body, '\n')}
	if e.pure[r.WorkflowID][r.State] {
		c.put(f)
	}
	return f, nil
}
