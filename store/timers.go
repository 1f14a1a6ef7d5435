package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Timer is one pending timer of a run (SPEC section 17): when the run has
// stayed in State since it entered it at Version, the engine fires Action
// as actor "timer" once DueAt has come.
//
// Timers are written only with their run: a commit that enters a state
// (Commit.ReplaceTimers) replaces the run's pending timers with that
// state's, in the commit's transaction, and DeleteRun removes them. The
// firing side claims due ones under leases (TimerStore).
type Timer struct {
	// ID is TimerID(RunID, Version, Action); the store sets it.
	ID         string
	RunID      string
	WorkflowID string
	State      string // the state whose timer this is (the run's, when stored)
	// Version is the run's version when it entered State: the version of
	// the commit (or creation) that stored the timer.
	Version int64
	Action  string
	DueAt   time.Time
	// Data is the timer's request data, a JSON object; {} when it has none.
	Data json.RawMessage
	// Owner and LeaseUntil are set while a claimer holds the timer
	// (ClaimDueTimers); empty and zero otherwise.
	Owner      string
	LeaseUntil time.Time
}

// TimerID is the id of the timer of action for the run's entry into its
// state at version: unique, since a state has at most one timer per
// action, and never reused by a later entry (a self-loop re-entering the
// state has a new version).
func TimerID(runID string, version int64, action string) string {
	return runID + "/" + strconv.FormatInt(version, 10) + "/" + action
}

// PrepareTimers checks c's timer fields and completes the timers it
// stores: every timer belongs to c.Run, in c.Run's state, at c.Run's
// version, with a distinct action and a due time; timers come only with
// ReplaceTimers. It sets each timer's ID, RunID, WorkflowID, State and
// Version from c.Run when they are empty, its Data to {} when empty, and
// clears its lease. Backends call it first in CreateRun (where create
// says ReplaceTimers is implied) and CommitRun.
func PrepareTimers(c *Commit, create bool) error {
	if len(c.Timers) > 0 && !c.ReplaceTimers && !create {
		return fmt.Errorf("store: commit of run %s has timers but does not replace the run's (ReplaceTimers)", c.Run.ID)
	}
	if len(c.Timers) == 0 {
		return nil
	}
	ts := make([]Timer, len(c.Timers))
	seen := make(map[string]bool, len(c.Timers))
	for i, t := range c.Timers {
		switch {
		case t.RunID != "" && t.RunID != c.Run.ID,
			t.State != "" && t.State != c.Run.State,
			t.Version != 0 && t.Version != c.Run.Version,
			t.WorkflowID != "" && t.WorkflowID != c.Run.WorkflowID:
			return fmt.Errorf("store: timer %q of run %s: it names run %s in state %s at version %d, not the commit's run (%s, %s, %d)",
				t.Action, c.Run.ID, t.RunID, t.State, t.Version, c.Run.ID, c.Run.State, c.Run.Version)
		case t.Action == "":
			return fmt.Errorf("store: a timer of run %s has no action", c.Run.ID)
		case t.DueAt.IsZero():
			return fmt.Errorf("store: timer %q of run %s has no due time", t.Action, c.Run.ID)
		case seen[t.Action]:
			return fmt.Errorf("store: run %s has two timers for action %q", c.Run.ID, t.Action)
		}
		seen[t.Action] = true
		t.RunID, t.WorkflowID, t.State, t.Version = c.Run.ID, c.Run.WorkflowID, c.Run.State, c.Run.Version
		t.ID = TimerID(t.RunID, t.Version, t.Action)
		if len(t.Data) == 0 {
			t.Data = json.RawMessage(`{}`)
		}
		t.Owner, t.LeaseUntil = "", time.Time{}
		ts[i] = t
	}
	c.Timers = ts
	return nil
}

// SortTimers orders timers as ClaimDueTimers and RunTimers return them:
// by due time, ties by ID.
func SortTimers(ts []Timer) {
	slices.SortFunc(ts, func(a, b Timer) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// TimerStore hands due timers to the engine under leases. Timers enter and
// leave through the RunStore over the same data (Commit.ReplaceTimers,
// Commit.DoneTimers, DeleteRun), so a TimerStore is always the timer side
// of a RunStore. All methods are safe for concurrent use, by many
// processes for shared backends, and durable when they return nil.
//
// Finding due timers costs the number of due timers, not of pending ones:
// every backend keeps the timers ordered by the time they become
// claimable (an index on it in SQLite and Postgres, a heap in memstore).
type TimerStore interface {
	// ClaimDueTimers leases to owner, until leaseUntil (which must be
	// after now), up to limit (> 0) claimable timers and returns them
	// ordered by DueAt (ties by ID). A timer is claimable when it is due
	// (DueAt <= now) and no lease holds it: it was never claimed, was
	// released, or its lease ended (LeaseUntil <= now), whoever held it.
	// Two callers never hold the same timer for overlapping leases
	// (Postgres: FOR UPDATE SKIP LOCKED, so replicas claim disjoint sets
	// without waiting for each other).
	ClaimDueTimers(ctx context.Context, now time.Time, limit int, owner string, leaseUntil time.Time) ([]Timer, error)

	// NextTimerDue returns the earliest time at which ClaimDueTimers may
	// return a timer: the DueAt of a timer no lease holds, the end of the
	// lease of one that a lease holds. ok is false when no timer is pending.
	NextTimerDue(ctx context.Context) (at time.Time, ok bool, err error)

	// ReleaseTimer ends owner's lease on a timer, so that it is claimable
	// again at once (if due); used on shutdown. ErrConflict when owner
	// does not hold it, ErrNotFound when it is not pending (fired,
	// completed, voided).
	ReleaseTimer(ctx context.Context, id, owner string) error

	// CompleteTimer removes a pending timer that was handled without a
	// commit that voids it (a firing that was refused, or whose run had
	// moved on), so that it never fires again. Completing a timer that is
	// not pending is a no-op.
	CompleteTimer(ctx context.Context, id string) error

	// RunTimers returns the pending timers of a run (leased or not),
	// ordered by DueAt (ties by ID); empty for a run without any, or
	// unknown.
	RunTimers(ctx context.Context, runID string) ([]Timer, error)
}
