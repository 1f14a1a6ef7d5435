package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// RunSummary is one run of a run list (GET /runs).
type RunSummary struct {
	RunID           string `json:"run_id"`
	WorkflowID      string `json:"workflow_id"`
	WorkflowVersion string `json:"workflow_version"`
	State           string `json:"state"`
	Status          string `json:"status"`
	CreatedAt       string `json:"created_at"` // RFC 3339, milliseconds
	UpdatedAt       string `json:"updated_at"`
	Href            string `json:"href"`
}

// RunPage is one page of a run list, newest first.
type RunPage struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor continues the list (ListRunsOptions.Cursor); nil on the
	// last page.
	NextCursor *string `json:"next_cursor"`
}

// ListRunsOptions filter and page a run list. A nil *ListRunsOptions
// means the first page of every run, of the server's default size.
type ListRunsOptions struct {
	WorkflowID   string
	State        string
	Status       string
	UpdatedAfter string // RFC 3339
	// DueBefore keeps only runs with a pending timer due before it (RFC
	// 3339; due_before).
	DueBefore string
	Limit     int    // 0: the server's default
	Cursor    string // the previous page's NextCursor
}

// ListRuns returns one page of the server's runs: GET /runs.
func (c *Client) ListRuns(ctx context.Context, opts *ListRunsOptions) (*RunPage, error) {
	q := url.Values{}
	if o := opts; o != nil {
		for k, v := range map[string]string{"workflow_id": o.WorkflowID, "state": o.State, "status": o.Status, "updated_after": o.UpdatedAfter, "due_before": o.DueBefore, "cursor": o.Cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if o.Limit > 0 {
			q.Set("limit", strconv.Itoa(o.Limit))
		}
	}
	u := c.baseStr + "/runs"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	r, err := c.do(ctx, http.MethodGet, u, nil, nil)
	if err != nil {
		return nil, err
	}
	var p RunPage
	if err := decodeInto(r, &p, "run list"); err != nil {
		return nil, err
	}
	if p.Runs == nil {
		p.Runs = []RunSummary{}
	}
	return &p, nil
}
