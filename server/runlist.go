package server

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/internal/edge/paging"
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

var runListParams = []string{"workflow_id", "state", "status", "updated_after", "due_before", "limit", "cursor"}

// clampStoredTime brings t into the range a store keeps (nanoseconds
// since 1970 in 64 bits, years 1678 to 2261): a time beyond it compares
// with stored times as the range's end does.
func clampStoredTime(t time.Time) time.Time {
	lo, hi := time.Unix(0, math.MinInt64).UTC(), time.Unix(0, math.MaxInt64).UTC()
	switch {
	case t.Before(lo):
		return lo
	case t.After(hi):
		return hi
	}
	return t
}

// msTime formats t as RFC 3339 UTC with millisecond precision.
func msTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// listRuns serves GET /runs: the stored runs, newest first, filtered and
// keyset-paged (SPEC section 13).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	if err := paging.Only(q, "GET /runs", runListParams...); err != nil {
		return err
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
		defs = []*workflow.Definition{def}
	}
	if f.State != "" {
		known, err := s.stateKnown(r, defs, f.State)
		if err != nil {
			return err
		}
		if !known && f.WorkflowID != "" {
			return protocol.Errorf(protocol.EInvalid, "Workflow %q has no state %q; its states are %s.", defs[0].ID, protocol.Truncate(f.State, 64), strings.Join(stateNames(defs[0]), ", ")).With("field", "state")
		}
		if !known {
			return protocol.Errorf(protocol.EInvalid, "No workflow here has a state %q (in the served version or a stored one); the served states are %s. Add workflow_id to narrow the list to one workflow.", protocol.Truncate(f.State, 64), strings.Join(allStateNames(defs), ", ")).With("field", "state")
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRunPage {
			return protocol.Errorf(protocol.EInvalid, "limit must be an integer from 1 to %d, not %q.", maxRunPage, protocol.Truncate(v, 20)).With("field", "limit")
		}
		f.Limit = n
	}
	if v := q.Get("updated_after"); v != "" {
		t, err := parseTime(v)
		if err != nil {
			return protocol.Errorf(protocol.EInvalid, "updated_after must be an RFC 3339 time such as 2026-01-02T15:04:05.000Z (a run's updated_at), not %q.", protocol.Truncate(v, 40)).With("field", "updated_after")
		}
		switch {
		case t.Year() > 2261:
			// Beyond what a stored time can hold (nanoseconds since 1970
			// in 64 bits): no run can have changed after it.
			return protocol.Errorf(protocol.EInvalid, "updated_after %q is later than any time a run can have (before 2262); pass a run's updated_at.", protocol.Truncate(v, 40)).With("field", "updated_after")
		case t.Year() < 1678:
			// Earlier than any stored time: every run changed after it.
		default:
			f.UpdatedAfter = t
		}
	}
	if q.Has("due_before") && q.Get("due_before") == "" {
		// Left empty, it would list every run: a script whose variable
		// was unset meant a time.
		return protocol.Errorf(protocol.EInvalid, "due_before is empty: give an RFC 3339 time such as 2026-01-02T15:04:05Z, or leave due_before out to list runs whatever their timers.").With("field", "due_before")
	}
	if v := q.Get("due_before"); v != "" {
		t, err := parseTime(v)
		if err != nil {
			return protocol.Errorf(protocol.EInvalid, "due_before must be an RFC 3339 time such as 2026-01-02T15:04:05Z (the runs with a pending timer due before it are listed), not %q.", protocol.Truncate(v, 40)).With("field", "due_before")
		}
		f.DueBefore = clampStoredTime(t)
	}
	if v := q.Get("cursor"); v != "" {
		cur, err := decodeRunCursor(v)
		if err != nil {
			return protocol.Errorf(protocol.EInvalid, "cursor %q is not a cursor of this list: pass the next_cursor of the previous page unchanged, or leave cursor out to start from the newest run.", protocol.Truncate(v, 40)).With("field", "cursor")
		}
		f.Before = cur
	}
	status := q.Get("status")
	vdefs, err := s.versionDefs(r, defs, status)
	if err != nil {
		return err
	}
	subs, err := statusFilters(f, status, vdefs)
	if err != nil {
		return err
	}
	var keep func(store.Run) bool
	if status != "" {
		// A derived status is the pinned version's: a state may show
		// another status in another version of the workflow.
		keep = func(sr store.Run) bool { return s.statusOf(r, sr) == status }
	}
	runs, next, err := s.listMerged(r, subs, f.Limit, keep)
	if err != nil {
		return err
	}
	page := runPage{Runs: make([]listedRun, 0, len(runs))}
	for _, sr := range runs {
		page.Runs = append(page.Runs, s.listed(r, sr, c.base))
	}
	if !next.IsZero() {
		cur := encodeRunCursor(next)
		page.NextCursor = &cur
	}
	w.Header()["Cache-Control"] = noStore
	httpx.WriteJSON(w, http.StatusOK, page)
	return nil
}

// versionDefs returns, for each workflow of defs, its served definition
// followed by its other stored versions when a status filter needs them
// (a derived status is read from the version a run is pinned to).
func (s *Server) versionDefs(r *http.Request, defs []*workflow.Definition, status string) ([][]*workflow.Definition, error) {
	out := make([][]*workflow.Definition, len(defs))
	for i, d := range defs {
		out[i] = []*workflow.Definition{d}
		if status == "" {
			continue
		}
		older, err := s.olderVersions(r, d)
		if err != nil {
			return nil, err
		}
		out[i] = append(out[i], older...)
	}
	return out, nil
}

// olderVersions returns the stored versions of the served definition d
// other than d itself (those that can be read).
func (s *Server) olderVersions(r *http.Request, d *workflow.Definition) ([]*workflow.Definition, error) {
	stored, err := s.e.StoredDefinitions(r.Context(), d.ID)
	if err != nil {
		return nil, err
	}
	var out []*workflow.Definition
	for _, sd := range stored {
		if sd.Version == d.Version() {
			continue
		}
		if vd, err := s.e.DefinitionAt(r.Context(), d.ID, sd.Version); err == nil {
			out = append(out, vd)
		}
	}
	return out, nil
}

// statusFilters turns a status filter into store filters whose union
// holds the runs with that status: a stored override (processing,
// failed) is one filter, and a status derived from the definition is one
// filter per state that shows it in some version of the workflow
// (versions[i]: the served definition first, then stored ones), limited
// to runs without an override. No status: f alone.
func statusFilters(f store.RunFilter, status string, versions [][]*workflow.Definition) ([]store.RunFilter, error) {
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
	for _, vs := range versions {
		var states []string
		for _, d := range vs {
			for _, st := range d.States {
				shown := d.StatusOf(st)
				if !slices.Contains(known, shown) {
					known = append(known, shown)
				}
				if shown != status || f.State != "" && st.Name != f.State || slices.Contains(states, st.Name) {
					continue
				}
				states = append(states, st.Name)
				o := f
				o.WorkflowID, o.State, o.Override = d.ID, st.Name, &derived
				subs = append(subs, o)
			}
		}
	}
	if !slices.Contains(known, status) {
		return nil, protocol.Errorf(protocol.EInvalid, "Unknown status %q; runs here have one of: %s.", protocol.Truncate(status, 40), strings.Join(known, ", ")).With("field", "status")
	}
	return subs, nil
}

// maxListRounds bounds the store reads of one page when keep drops runs:
// past it the page ends early, with a cursor.
const maxListRounds = 8

// listMerged reads one page of the union of subs (all in the same order,
// from the same cursor), keeping the runs keep accepts (nil: all): at
// most limit runs, and the cursor of the next page (zero at the end).
// Each round reads limit+1 runs of each filter; the merged runs are in
// order up to the oldest last run of the filters that returned that many
// (they may hold more beyond it), so a round that keeps too few goes on
// from there.
func (s *Server) listMerged(r *http.Request, subs []store.RunFilter, limit int, keep func(store.Run) bool) ([]store.Run, store.RunCursor, error) {
	var out []store.Run
	for round := 0; ; round++ {
		var all []store.Run
		var bound store.RunCursor // the oldest last run of a full page
		for _, f := range subs {
			runs, err := s.readRuns(r, f, limit+1)
			if err != nil {
				return nil, store.RunCursor{}, err
			}
			all = append(all, runs...)
			if len(runs) == limit+1 {
				if last := store.CursorOf(runs[len(runs)-1]); bound.IsZero() || store.NewerFirst(last, bound) {
					bound = last
				}
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
		for _, sr := range all {
			if !bound.IsZero() && store.NewerFirst(bound, store.CursorOf(sr)) {
				break // past what every full page covers
			}
			if keep != nil && !keep(sr) {
				continue
			}
			if len(out) == limit {
				return out, store.CursorOf(out[limit-1]), nil
			}
			out = append(out, sr)
		}
		if bound.IsZero() {
			return out, store.RunCursor{}, nil // every filter is read to its end
		}
		if round+1 == maxListRounds {
			return out, bound, nil // a short page; the next goes on from bound
		}
		for i := range subs {
			subs[i].Before = bound
		}
	}
}

// readRuns reads up to want runs of f (from f.Before on), without their
// data and milestones. The store hands runs over whole, data included:
// they are read in chunks and only what a page shows is kept, so that a
// page of runs with large data holds a chunk of them at once, not a page.
func (s *Server) readRuns(r *http.Request, f store.RunFilter, want int) ([]store.Run, error) {
	var out []store.Run
	chunk := listChunk(s.e.MaxRunData())
	for want > 0 {
		f.Limit = min(chunk, want)
		runs, err := s.e.ListRuns(r.Context(), f)
		if err != nil {
			return nil, err
		}
		for i := range runs {
			runs[i].Snapshot.Data, runs[i].Snapshot.Milestones = nil, nil
		}
		out = append(out, runs...)
		want -= len(runs)
		if len(runs) < f.Limit {
			break
		}
		f.Before = store.CursorOf(runs[len(runs)-1])
	}
	return out, nil
}

// statusOf is a stored run's status: its override, else what its state
// shows in the version the run is pinned to (the served one when that
// is not known).
func (s *Server) statusOf(r *http.Request, sr store.Run) string {
	if sr.Status != "" {
		return sr.Status
	}
	def, ok := s.e.Workflow(sr.WorkflowID)
	if sr.WorkflowVersion != "" && (!ok || sr.WorkflowVersion != def.Version()) {
		if d, err := s.e.DefinitionAt(r.Context(), sr.WorkflowID, sr.WorkflowVersion); err == nil {
			def, ok = d, true
		}
	}
	if ok {
		if st, ok := def.State(sr.State); ok {
			return def.StatusOf(st)
		}
	}
	return protocol.StatusActive
}

// listChunk is how many runs one store read of GET /runs asks for: as
// many as fit four page bounds (store.MaxPageBytes) at the bound on a
// run's data, at least one and at most a page and one.
func listChunk(maxRunData int64) int {
	return int(min(max(4*store.MaxPageBytes/max(maxRunData, 1), 1), maxRunPage+1))
}

// listed renders one stored run for GET /runs.
func (s *Server) listed(r *http.Request, sr store.Run, base string) listedRun {
	status := s.statusOf(r, sr)
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

// stateKnown reports whether one of defs has the state, in its served
// version or a stored one (a run pinned to an older version may still be
// in a state the served one dropped). The stored versions are read only
// when no served one has it.
func (s *Server) stateKnown(r *http.Request, defs []*workflow.Definition, state string) (bool, error) {
	for _, d := range defs {
		if _, ok := d.State(state); ok {
			return true, nil
		}
	}
	for _, d := range defs {
		older, err := s.olderVersions(r, d)
		if err != nil {
			return false, err
		}
		for _, vd := range older {
			if _, ok := vd.State(state); ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// allStateNames is the sorted union of the states of defs.
func allStateNames(defs []*workflow.Definition) []string {
	var out []string
	for _, d := range defs {
		for _, st := range d.States {
			if !slices.Contains(out, st.Name) {
				out = append(out, st.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func stateNames(d *workflow.Definition) []string {
	out := make([]string, len(d.States))
	for i, st := range d.States {
		out[i] = st.Name
	}
	return out
}

// parseTime parses an RFC 3339 time of a query, whose "T" and "Z" may be
// lower case (RFC 3339 section 5.6; Go's layout wants them upper case).
func parseTime(v string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, strings.ToUpper(v))
}
