package store

// Matches reports whether f selects r, paging aside (Before and Limit are
// not looked at). It is the meaning every backend's ListRuns implements.
func (f RunFilter) Matches(r Run) bool {
	switch {
	case f.WorkflowID != "" && r.WorkflowID != f.WorkflowID,
		f.State != "" && r.State != f.State,
		f.Override != nil && r.Status != *f.Override,
		!f.UpdatedAfter.IsZero() && !r.UpdatedAt.After(f.UpdatedAfter):
		return false
	}
	return true
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
