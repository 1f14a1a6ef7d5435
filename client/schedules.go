package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// Schedule is a stored schedule (GET /schedules): it starts a run of
// WorkflowID with Data at every tick of Cron in Timezone.
type Schedule struct {
	ScheduleID string          `json:"schedule_id"`
	WorkflowID string          `json:"workflow_id"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone"`
	Data       json.RawMessage `json:"data"`
	// Source is "file" (a workflow file's schedules: entry, not deletable
	// through the API) or "api".
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"` // RFC 3339
	// LastTick is the latest tick that started a run; nil until one has.
	LastTick *string `json:"last_tick"`
	// NextTick is the first tick after the last; nil when there is none
	// within five years.
	NextTick *string `json:"next_tick"`
	// LastFailure is the latest tick whose run could not be started (its
	// data over the server's run data limit, its workflow no longer
	// served, …) and why; nil while none has failed. It stays after later
	// ticks start runs: compare its Tick with LastTick.
	LastFailure *ScheduleFailure `json:"last_failure"`
	Href        string           `json:"href"`
}

// ScheduleFailure is a schedule's tick whose run could not be started.
type ScheduleFailure struct {
	Tick  string `json:"tick"` // RFC 3339
	Error string `json:"error"`
}

// SchedulePage is one page of the schedule list, by schedule id.
type SchedulePage struct {
	Schedules []Schedule `json:"schedules"`
	// NextCursor continues the list (ListSchedulesOptions.Cursor); nil on
	// the last page.
	NextCursor *string `json:"next_cursor"`
}

// ListSchedulesOptions page the schedule list; nil means the first page
// of the server's default size.
type ListSchedulesOptions struct {
	Limit  int    // 0: the server's default
	Cursor string // the previous page's NextCursor
}

// NewSchedule is the body of POST /schedules.
type NewSchedule struct {
	WorkflowID string         `json:"workflow_id"`
	Cron       string         `json:"cron"`
	Timezone   string         `json:"timezone,omitempty"` // "": UTC
	Data       map[string]any `json:"data,omitempty"`
}

// ListSchedules returns one page of the server's schedules: GET
// /schedules (the token needs the admin scope).
func (c *Client) ListSchedules(ctx context.Context, opts *ListSchedulesOptions) (*SchedulePage, error) {
	q := url.Values{}
	if opts != nil {
		if opts.Cursor != "" {
			q.Set("cursor", opts.Cursor)
		}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	u := c.baseStr + "/schedules"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	r, err := c.do(ctx, http.MethodGet, u, nil, nil)
	if err != nil {
		return nil, err
	}
	var p SchedulePage
	if err := decodeInto(r, &p, "schedule list"); err != nil {
		return nil, err
	}
	if p.Schedules == nil {
		p.Schedules = []Schedule{}
	}
	return &p, nil
}

// AddSchedule creates a schedule: POST /schedules (admin scope). A bad
// cron expression, time zone or workflow is an *Error with the server's
// hint.
func (c *Client) AddSchedule(ctx context.Context, s NewSchedule) (*Schedule, error) {
	r, err := c.do(ctx, http.MethodPost, c.baseStr+"/schedules", s, nil)
	if err != nil {
		return nil, err
	}
	var out Schedule
	if err := decodeInto(r, &out, "schedule"); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSchedule reads one schedule: GET /schedules/{id} (admin scope).
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	r, err := c.do(ctx, http.MethodGet, c.baseStr+"/schedules/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return nil, err
	}
	var out Schedule
	if err := decodeInto(r, &out, "schedule"); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule deletes a schedule created through the API: DELETE
// /schedules/{id} (admin scope). A file schedule is refused (409) with a
// hint.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, c.baseStr+"/schedules/"+url.PathEscape(id), nil, nil)
	return err
}
