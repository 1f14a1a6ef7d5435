package store

import "time"

// Matches reports whether f selects r, paging aside (Before and Limit are
// not looked at). It is the meaning every backend's ListRuns implements.
func (f RunFilter) Matches(r Run) bool {
	switch {
	case f.WorkflowID != "" && r.WorkflowID != f.WorkflowID,
		f.State != "" && r.State != f.State,
		f.Override != nil && r.Status != *f.Override,
		!f.UpdatedAfter.IsZero() && r.UpdatedAt.Before(f.ChangedFrom()):
		return false
	}
	return true
}

// ChangedFrom is the earliest UpdatedAt a run may have to pass
// f.UpdatedAfter: the first millisecond after it. Run times are shown at
// millisecond precision (RFC 3339 with three decimals), so a run is after
// T when its UpdatedAt, truncated to the millisecond, is later than T; a
// run whose time is shown as T is not listed again by updated_after=T.
// Meaningless when UpdatedAfter is zero.
func (f RunFilter) ChangedFrom() time.Time {
	return f.UpdatedAfter.Truncate(time.Millisecond).Add(time.Millisecond)
}

// NewerFirst reports whether run a comes before run b in ListRuns' order:
// newest UpdatedAt first, ties by ID descending.
func NewerFirst(a, b RunCursor) bool {
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return a.UpdatedAt.After(b.UpdatedAt)
	}
	return a.ID > b.ID
}

// CursorOf returns the position of r in a run list.
func CursorOf(r Run) RunCursor { return RunCursor{UpdatedAt: r.UpdatedAt, ID: r.ID} }

// IsZero reports whether c is the zero cursor (the start of a list).
func (c RunCursor) IsZero() bool { return c.UpdatedAt.IsZero() && c.ID == "" }
