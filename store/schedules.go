package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"
)

// Schedule sources.
const (
	// ScheduleFile: the schedule is a `schedules:` entry of a served
	// workflow file (or a Builder.Schedule); it is written by the servers
	// that serve the file (PutFileSchedules) and cannot be deleted through
	// the API.
	ScheduleFile = "file"
	// ScheduleAPI: the schedule was created with POST /schedules and lives
	// until DELETE /schedules/{id}.
	ScheduleAPI = "api"
)

// ErrFileSchedule: DeleteSchedule was asked to delete a schedule that
// lives in a workflow file (Source ScheduleFile); remove it from the file
// instead.
var ErrFileSchedule = errors.New("store: the schedule lives in a workflow file")

// Schedule is one stored schedule (SPEC section 17): a cron expression in
// a time zone that starts a run of WorkflowID with Data at every tick.
type Schedule struct {
	ID         string
	WorkflowID string
	Cron       string
	// Timezone is the IANA zone the expression is read in; "" is UTC.
	Timezone string
	// Data is the initial data of each run, a JSON object; {} when none.
	Data json.RawMessage
	// Source is ScheduleFile or ScheduleAPI.
	Source    string
	CreatedAt time.Time
	// LastTick is the latest tick that started a run, or CreatedAt while
	// none has: a new schedule starts runs for the ticks after it was
	// created, never for earlier ones. Only AdvanceSchedule moves it.
	LastTick time.Time
	// LastFailure is the latest tick whose run could not be started, and
	// why; zero while none has failed. Only FailSchedule sets it.
	LastFailure ScheduleFailure
}

// ScheduleFailure is a schedule's tick whose run could not be started.
type ScheduleFailure struct {
	Tick time.Time
	// Error says why, in at most MaxScheduleError bytes.
	Error string
}

// MaxScheduleError bounds ScheduleFailure.Error: FailSchedule keeps at
// most this many bytes of it (cut at a UTF-8 boundary).
const MaxScheduleError = 1024

// ScheduleStore keeps schedules and decides, by a compare-and-set on
// each one's last tick, which process starts the run of a tick. All
// methods are safe for concurrent use, by many processes for shared
// backends, and durable when they return nil. Times are kept at
// microsecond precision (what every backend can store).
type ScheduleStore interface {
	// PutSchedule stores a new schedule (of either source; the API's
	// come this way). ErrExists when its ID is taken.
	PutSchedule(ctx context.Context, s Schedule) error

	// PutFileSchedules makes the file schedules of the workflows named be
	// exactly ss (each of Source ScheduleFile and of one of workflows):
	// the ones not stored yet are added, the stored ones keep their
	// CreatedAt and LastTick, and the stored file schedules of those
	// workflows that ss lacks are deleted. File schedules of other
	// workflows and API schedules are untouched.
	PutFileSchedules(ctx context.Context, workflows []string, ss []Schedule) error

	// GetSchedule returns the schedule, or ErrNotFound.
	GetSchedule(ctx context.Context, id string) (Schedule, error)

	// ListSchedules returns up to limit schedules (limit <= 0: all) with
	// an ID greater than after, ordered by ID.
	ListSchedules(ctx context.Context, after string, limit int) ([]Schedule, error)

	// DeleteSchedule deletes an API schedule: ErrNotFound when there is
	// none with that ID, ErrFileSchedule (and nothing deleted) when it
	// is a file schedule.
	DeleteSchedule(ctx context.Context, id string) error

	// AdvanceSchedule sets the schedule's LastTick to to if, and only if,
	// it is still from (compare-and-set): of the processes that try to
	// start the run of one tick, exactly one gets true. It returns false
	// when LastTick is no longer from or the schedule is gone.
	AdvanceSchedule(ctx context.Context, id string, from, to time.Time) (bool, error)

	// FailSchedule records f as the schedule's LastFailure (its Error cut
	// to MaxScheduleError bytes), replacing the one before whatever their
	// ticks. A schedule that is gone is not an error: nothing is stored.
	// PutFileSchedules keeps a stored file schedule's LastFailure.
	FailSchedule(ctx context.Context, id string, f ScheduleFailure) error
}

// ScheduleError returns msg cut to MaxScheduleError bytes at a UTF-8
// boundary, as FailSchedule stores it.
func ScheduleError(msg string) string {
	if len(msg) <= MaxScheduleError {
		return msg
	}
	cut := MaxScheduleError
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// ScheduleTime is t as every backend stores a schedule's times: UTC, at
// microsecond precision.
func ScheduleTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
