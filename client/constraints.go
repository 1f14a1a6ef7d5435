package client

import (
	"context"
	"net/http"
	"net/url"
	"sync"

	"github.com/asmp-dev/asmp/protocol"
)

// Constraints are the bounds, beyond their types, of what the actions and
// stage tools of one state expect (field -> constraint): the workflow
// file's minimum, maximum, enum, pattern and maxLength. Frames carry only
// the types; the stored definition of the run's workflow version carries
// these. The zero value bounds nothing.
type Constraints struct {
	Actions map[string]map[string]protocol.Constraint // action -> field -> constraint
	Tools   map[string]map[string]protocol.Constraint // stage tool -> field -> constraint
}

// versionDoc is what Constraints reads of a stored definition (GET
// /workflows/{id}/versions/{version}).
type versionDoc struct {
	Definition struct {
		States map[string]struct {
			Tools []struct {
				Name        string                         `json:"name"`
				Constraints map[string]protocol.Constraint `json:"constraints"`
			} `json:"tools"`
		} `json:"states"`
		Transitions []struct {
			From        string                         `json:"from"`
			Action      string                         `json:"action"`
			Constraints map[string]protocol.Constraint `json:"constraints"`
		} `json:"transitions"`
	} `json:"definition"`
}

// versionCache keeps stored definitions by URL: a version names one
// document for good, so an entry never goes stale.
type versionCache struct {
	mu   sync.Mutex
	docs map[string]*versionDoc
}

// maxCachedVersions bounds the cache; past it, the oldest half is dropped.
const maxCachedVersions = 64

// Constraints returns the constraints of frame's state, read from the
// workflow version the frame links (_links.workflow_version, cached per
// version). A frame without that link (a server that keeps no versions,
// such as the reference servers) has none: the zero Constraints and no
// error. The token goes only to the server's own origin.
func (c *Client) Constraints(ctx context.Context, frame protocol.Frame) (Constraints, error) {
	link, ok := frame.Links["workflow_version"]
	if !ok || link.Href == "" {
		return Constraints{}, nil
	}
	u, err := url.Parse(link.Href)
	if err != nil {
		return Constraints{}, &Error{Status: http.StatusBadGateway, Code: protocol.EInternal, Hint: "The frame's workflow_version link is not a URL: " + err.Error()}
	}
	if !u.IsAbs() {
		u = c.base.ResolveReference(u)
	}
	key := u.String()
	c.versions.mu.Lock()
	doc := c.versions.docs[key]
	c.versions.mu.Unlock()
	if doc == nil {
		r, err := c.do(ctx, http.MethodGet, key, nil, nil)
		if err != nil {
			return Constraints{}, err
		}
		doc = &versionDoc{}
		if err := decodeInto(r, doc, "workflow version"); err != nil {
			return Constraints{}, err
		}
		c.versions.mu.Lock()
		if c.versions.docs == nil || len(c.versions.docs) >= maxCachedVersions {
			c.versions.docs = map[string]*versionDoc{}
		}
		c.versions.docs[key] = doc
		c.versions.mu.Unlock()
	}
	var out Constraints
	for _, t := range doc.Definition.Transitions {
		if t.From == frame.State && len(t.Constraints) > 0 {
			if out.Actions == nil {
				out.Actions = map[string]map[string]protocol.Constraint{}
			}
			out.Actions[t.Action] = t.Constraints
		}
	}
	for _, t := range doc.Definition.States[frame.State].Tools {
		if len(t.Constraints) > 0 {
			if out.Tools == nil {
				out.Tools = map[string]map[string]protocol.Constraint{}
			}
			out.Tools[t.Name] = t.Constraints
		}
	}
	return out, nil
}
