package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Run list page sizes (GET /runs).
const (
	defaultRunPage = 50
	maxRunPage     = 500
)

// listedRun is one entry of GET /runs.
type listedRun struct {
	RunID           string `json:"run_id"`
	WorkflowID      string `json:"workflow_id"`
	WorkflowVersion string `json:"workflow_version"`
	State           string `json:"state"`
	Status          string `json:"status"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
	Href            string `json:"href"`
}

// runPage is the answer of GET /runs.
type runPage struct {
	Runs       []listedRun `json:"runs"`
	NextCursor *string     `json:"next_cursor"`
}

var runListParams = []string{"workflow_id", "state", "status", "updated_after", "limit", "cursor"}

// msTime formats t as RFC 3339 UTC with millisecond precision.
func msTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// listRuns serves GET /runs: the stored runs, newest first, filtered and
// keyset-paged (SPEC section 13).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(runListParams, k) {
			return protocol.Errorf(protocol.EInvalid, "Unknown query parameter %q: GET /runs takes %s.", protocol.Truncate(k, 64), strings.Join(runListParams, ", ")).With("field", k)
		}
		if len(vs) > 1 {
			return protocol.Errorf(protocol.EInvalid, "Query parameter %s is given %d times; give it once.", k, len(vs)).With("field", k)
		}
	}
	f := store.RunFilter{WorkflowID: q.Get("workflow_id"), State: q.Get("state"), Limit: defaultRunPage}
	if c.wf != "" {
		if f.WorkflowID != "" && f.WorkflowID != c.wf {
			return protocol.Errorf(protocol.EInvalid, "This API is scoped to workflow %q; workflow_id %q does not match. Omit workflow_id here.", c.wf, f.WorkflowID).With("field", "workflow_id")
		}
		f.WorkflowID = c.wf
	}
	defs := s.e.Workflows()
	if f.WorkflowID != "" {
		def, ok := s.e.Workflow(f.WorkflowID)
		if !ok {
			return protocol.Errorf(protocol.EInvalid, "Unknown workflow_id %q. Served workflows: %s.", protocol.Truncate(f.WorkflowID, 64), strings.Join(s.e.WorkflowIDs(), ", ")).With("field", "workflow_id")
		}
		if _, ok := def.State(f.State); f.State != "" && !ok {
			return protocol.Errorf(protocol.EInvalid, "Workflow %q has no state %q; its states are %s.", def.ID, protocol.Truncate(f.State, 64), strings.Join(stateNames(def), ", ")).With("field", "state")
		}
		defs = []*workflow.Definition{def}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRunPage {
			return protocol.Errorf(protocol.EInvalid, "limit must be an integer from 1 to %d, not %q.", maxRunPage, protocol.Truncate(v, 20)).With("field", "limit")
		}
		f.Limit = n
	}
	if v := q.Get("updated_after"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return protocol.Errorf(protocol.EInvalid, "updated_after must be an RFC 3339 time such as 2026-01-02T15:04:05.000Z (a run's updated_at), not %q.", protocol.Truncate(v, 40)).With("field", "updated_after")
		}
		f.UpdatedAfter = t
	}
	if v := q.Get("cursor"); v != "" {
		cur, err := decodeRunCursor(v)
		if err != nil {
			return protocol.Errorf(protocol.EInvalid, "cursor %q is not a cursor of this list: pass the next_cursor of the previous page unchanged, or leave cursor out to start from the newest run.", protocol.Truncate(v, 40)).With("field", "cursor")
		}
		f.Before = cur
	}
	subs, err := statusFilters(f, q.Get("status"), defs)
	if err != nil {
		return err
	}
	runs, more, err := s.listMerged(r, subs, f.Limit)
	if err != nil {
		return err
	}
	page := runPage{Runs: make([]listedRun, 0, len(runs))}
	for _, sr := range runs {
		page.Runs = append(page.Runs, s.listed(sr, c.base))
	}
	if more {
		next := encodeRunCursor(store.CursorOf(runs[len(runs)-1]))
		page.NextCursor = &next
	}
	w.Header()["Cache-Control"] = noStore
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// statusFilters turns a status filter into store filters whose union is
// the runs with that status: a stored override (processing, failed) is
// one filter, and a status derived from the definition is one filter per
// state that shows it, limited to runs without an override. No status:
// f alone.
func statusFilters(f store.RunFilter, status string, defs []*workflow.Definition) ([]store.RunFilter, error) {
	if status == "" {
		return []store.RunFilter{f}, nil
	}
	known := []string{protocol.StatusActive, protocol.StatusCompleted, protocol.StatusProcessing, protocol.StatusFailed}
	var subs []store.RunFilter
	if status == protocol.StatusProcessing || status == protocol.StatusFailed {
		o := f
		o.Override = &status
		subs = append(subs, o)
	}
	derived := ""
	for _, d := range defs {
		for _, st := range d.States {
			shown := d.StatusOf(st)
			if !slices.Contains(known, shown) {
				known = append(known, shown)
			}
			if shown != status || f.State != "" && st.Name != f.State {
				continue
			}
			o := f
			o.WorkflowID, o.State, o.Override = d.ID, st.Name, &derived
			subs = append(subs, o)
		}
	}
	if !slices.Contains(known, status) {
		return nil, protocol.Errorf(protocol.EInvalid, "Unknown status %q; runs here have one of: %s.", protocol.Truncate(status, 40), strings.Join(known, ", ")).With("field", "status")
	}
	return subs, nil
}

// listMerged reads one page of each filter (all with the same cursor and
// order) and merges them: the first limit runs of the union, and whether
// more follow.
func (s *Server) listMerged(r *http.Request, subs []store.RunFilter, limit int) ([]store.Run, bool, error) {
	var all []store.Run
	chunk := listChunk(s.e.MaxRunData())
	for _, f := range subs {
		// The store hands runs over whole, data included: read them in
		// chunks and keep only what the page shows, so that a page of runs
		// with large data holds a chunk of them at once, not a page.
		for want := limit + 1; want > 0; {
			f.Limit = min(chunk, want)
			runs, err := s.e.Store().ListRuns(r.Context(), f)
			if err != nil {
				return nil, false, err
			}
			for i := range runs {
				runs[i].Snapshot.Data, runs[i].Snapshot.Milestones = nil, nil
			}
			all = append(all, runs...)
			want -= len(runs)
			if len(runs) < f.Limit {
				break
			}
			f.Before = store.CursorOf(runs[len(runs)-1])
		}
	}
	if len(subs) > 1 {
		slices.SortFunc(all, func(a, b store.Run) int {
			if store.NewerFirst(store.CursorOf(a), store.CursorOf(b)) {
				return -1
			}
			return 1
		})
	}
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

// listChunk is how many runs one store read of GET /runs asks for: as
// many as fit four page bounds (store.MaxPageBytes) at the bound on a
// run's data, at least one and at most a page and one.
func listChunk(maxRunData int64) int {
	return int(min(max(4*store.MaxPageBytes/max(maxRunData, 1), 1), maxRunPage+1))
}

// listed renders one stored run for GET /runs.
func (s *Server) listed(sr store.Run, base string) listedRun {
	status := sr.Status
	if status == "" {
		status = protocol.StatusActive
		if def, ok := s.e.Workflow(sr.WorkflowID); ok {
			if st, ok := def.State(sr.State); ok {
				status = def.StatusOf(st)
			}
		}
	}
	return listedRun{
		RunID:           sr.ID,
		WorkflowID:      sr.WorkflowID,
		WorkflowVersion: sr.WorkflowVersion,
		State:           sr.State,
		Status:          status,
		CreatedAt:       msTime(sr.CreatedAt),
		UpdatedAt:       msTime(sr.UpdatedAt),
		Href:            base + "/runs/" + sr.ID,
	}
}

func stateNames(d *workflow.Definition) []string {
	out := make([]string, len(d.States))
	for i, st := range d.States {
		out[i] = st.Name
	}
	return out
}
