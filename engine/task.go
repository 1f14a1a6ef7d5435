package engine

import (
	"errors"
	"strconv"
	"time"

	"github.com/asmp-dev/asmp/store"
)

var errTaskStale = errors.New("engine: the run left the task's state")

// taskID names the task of one entry into a state: the run and the version
// it had right after entering. Every attempt of that task shares it.
func taskID(runID string, version int64) string {
	return runID + "." + strconv.FormatInt(version, 10)
}

// entryTaskID is the id of the task that entered t's state for t's entry
// (the idempotency key of every attempt): t's own for a first attempt. A
// retry's task is enqueued by a commit made at once on the version of the
// failed attempt's task (and a task runs only while its run is at its
// version), so the task of attempt n carries the entry's version + n-1.
func entryTaskID(t store.Task) string {
	return taskID(t.RunID, t.Version-int64(taskAttempt(t)-1))
}

// taskAttempt is t's attempt under its state's retry policy, from 1.
func taskAttempt(t store.Task) int { return max(t.Attempt, 1) }

func (e *Engine) newTask(runID, state string, version int64, now time.Time) *store.Task {
	return &store.Task{
		ID: taskID(runID, version), RunID: runID, State: state, Version: version,
		Status: store.TaskPending, CreatedAt: now, UpdatedAt: now,
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
