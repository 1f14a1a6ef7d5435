package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/internal/edge/paging"
	"github.com/asmp-dev/asmp/protocol"
)

// Schedules (SPEC section 17): POST/GET/DELETE /schedules, admin scope,
// at the root only (a schedule names its workflow; it is not a run of the
// scoping one).

// scheduleList pages GET /schedules, by schedule id.
var scheduleList = paging.List{Name: "schedules", Default: 50, Max: 500}

// scheduleJSON is a schedule as the API shows it.
type scheduleJSON struct {
	ScheduleID string          `json:"schedule_id"`
	WorkflowID string          `json:"workflow_id"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone"`
	Data       json.RawMessage `json:"data"`
	// Source is "file" (a workflow file's schedules: entry) or "api".
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
	// LastTick is the latest tick that started a run; null until one has.
	LastTick *string `json:"last_tick"`
	// NextTick is the first tick after the last (or after creation); null
	// when the expression has none within five years.
	NextTick *string `json:"next_tick"`
	// LastFailure is the latest tick whose run could not be started, and
	// why; null while none has failed.
	LastFailure *scheduleFailureJSON `json:"last_failure"`
	Href        string               `json:"href"`
}

// scheduleFailureJSON is a schedule's last failed tick.
type scheduleFailureJSON struct {
	Tick  string `json:"tick"`
	Error string `json:"error"`
}

// schedulePage is the answer of GET /schedules.
type schedulePage struct {
	Schedules  []scheduleJSON `json:"schedules"`
	NextCursor *string        `json:"next_cursor"`
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := msTime(t)
	return &s
}

func scheduleOut(root string, s *engine.Schedule) scheduleJSON {
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	out := scheduleJSON{ScheduleID: s.ID, WorkflowID: s.WorkflowID, Cron: s.Cron, Timezone: tz, Data: s.Data, Source: s.Source,
		CreatedAt: msTime(s.CreatedAt), NextTick: optTime(s.NextTick), Href: root + "/schedules/" + url.PathEscape(s.ID)}
	if s.Ran {
		out.LastTick = optTime(s.LastTick)
	}
	if f := s.LastFailure; !f.Tick.IsZero() {
		out.LastFailure = &scheduleFailureJSON{Tick: msTime(f.Tick), Error: f.Error}
	}
	if len(out.Data) == 0 {
		out.Data = json.RawMessage(`{}`)
	}
	return out
}

// scheduleRoutes are the routes of /schedules.
func (s *Server) scheduleRoutes() []httpx.Route {
	return []httpx.Route{
		{Method: http.MethodPost, Path: "/schedules", Scope: auth.ScopeAdmin, Handle: s.api(s.createSchedule)},
		{Method: http.MethodGet, Path: "/schedules", Scope: auth.ScopeAdmin, Handle: s.api(s.listSchedules)},
		{Method: http.MethodGet, Path: "/schedules/{schedule_id}", Scope: auth.ScopeAdmin, Handle: s.api(s.getSchedule)},
		{Method: http.MethodDelete, Path: "/schedules/{schedule_id}", Scope: auth.ScopeAdmin, Handle: s.api(s.deleteSchedule)},
	}
}

var scheduleFields = []string{"workflow_id", "cron", "timezone", "data"}

// createSchedule serves POST /schedules {workflow_id, cron, timezone?,
// data?}: 201 with the schedule.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var spec engine.ScheduleSpec
	for k, v := range body {
		switch k {
		case "workflow_id", "cron", "timezone":
			str, ok := v.(string)
			if !ok {
				return protocol.Errorf(protocol.EInvalid, "%s must be a string.", k).With("field", k)
			}
			switch k {
			case "workflow_id":
				spec.WorkflowID = str
			case "cron":
				spec.Cron = str
			default:
				spec.Timezone = str
			}
		case "data":
			m, ok := v.(map[string]any)
			if !ok && v != nil {
				return protocol.Errorf(protocol.EInvalid, "data must be a JSON object: the initial data of each run the schedule starts.").With("field", "data")
			}
			spec.Data = m
		default:
			return protocol.Errorf(protocol.EInvalid, "Unknown field %q: the body of POST /schedules takes %s.", protocol.Truncate(k, 64), strings.Join(scheduleFields, ", ")).With("field", k)
		}
	}
	if spec.WorkflowID == "" {
		return protocol.Errorf(protocol.EInvalid, "workflow_id is required: the workflow whose runs the schedule starts (served: %s).", strings.Join(s.e.WorkflowIDs(), ", ")).With("field", "workflow_id")
	}
	sc, err := s.e.CreateSchedule(r.Context(), spec)
	if err != nil {
		return err
	}
	out := scheduleOut(c.root, sc)
	w.Header().Set("Location", out.Href)
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// listSchedules serves GET /schedules: every stored schedule (file and
// API), by id, paged with limit and cursor.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	if err := paging.Only(q, "GET /schedules", "limit", "cursor"); err != nil {
		return err
	}
	p, err := scheduleList.Parse(q)
	if err != nil {
		return err
	}
	ss, err := s.e.ListSchedules(r.Context(), p.After, p.Limit+1)
	if err != nil {
		return err
	}
	more := len(ss) > p.Limit
	if more {
		ss = ss[:p.Limit]
	}
	page := schedulePage{Schedules: make([]scheduleJSON, 0, len(ss))}
	for _, sc := range ss {
		page.Schedules = append(page.Schedules, scheduleOut(c.root, sc))
	}
	if len(ss) > 0 {
		page.NextCursor = scheduleList.Next(ss[len(ss)-1].ID, more)
	}
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// getSchedule serves GET /schedules/{schedule_id}.
func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request, c *call) error {
	sc, err := s.e.GetSchedule(r.Context(), r.PathValue("schedule_id"))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, scheduleOut(c.root, sc))
	return nil
}

// deleteSchedule serves DELETE /schedules/{schedule_id}: 204; a file
// schedule is 409 (it lives in its workflow file).
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.e.DeleteSchedule(r.Context(), r.PathValue("schedule_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
