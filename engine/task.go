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

func (e *Engine) newTask(runID, state string, version int64, now time.Time) *store.Task {
	return &store.Task{
		ID: taskID(runID, version), RunID: runID, State: state, Version: version,
		Status: store.TaskPending, CreatedAt: now, UpdatedAt: now,
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
