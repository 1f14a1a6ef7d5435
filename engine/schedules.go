package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Schedules (SPEC section 17) start a run of their workflow at every tick
// of a cron expression, as actor "schedule", with the schedule's data as
// the run's initial data. They come from the served workflow files
// (SyncFileSchedules writes them at start) or from the API
// (CreateSchedule). Each stored schedule keeps the last tick that started
// a run; a schedule loop (StartSchedules) looks at them and, for each one
// with a tick due:
//
//   - It advances the last tick, by a compare-and-set in the store
//     (store.ScheduleStore.AdvanceSchedule), to the latest tick due: of
//     the replicas looking at once, one wins and the others move on. So a
//     schedule whose ticks fell due while no server ran starts one
//     catch-up run, for the latest of them, not one per missed tick (a
//     server down for a week with a daily schedule starts one run at
//     start, for today's tick).
//   - The winner starts the run with an id derived from the schedule and
//     the tick (ScheduleRunID), so that a second start of the same tick,
//     however it came about, is refused by the store as a run that exists.
//
// A new schedule's last tick is its creation time: it starts runs for the
// ticks after it, never for earlier ones. A schedule of a workflow this
// engine does not serve is left to the processes that serve it.
//
// Should the store fail to create the run after the compare-and-set was
// won, the last tick is set back, so the next look tries again (with the
// same run id). Should the process be killed between the two writes, the
// next look of any process (this one after its restart, or another
// replica) finds the last tick's run missing and starts it, under the
// same id (recoverTick): each process checks each schedule's last tick
// once, a read of one run.

// ActorSchedule is the actor of runs started by schedules.
const ActorSchedule = "schedule"

// scheduleRunNS is the UUID namespace of ScheduleRunID.
var scheduleRunNS = uuid.MustParse("5b0f2c4e-8f0a-4c1e-9d57-3a2f1c0e7d11")

// ScheduleRunID is the id of the run schedule id starts for tick: a
// UUIDv5 of the two, the same on every replica.
func ScheduleRunID(id string, tick time.Time) string {
	return uuid.NewSHA1(scheduleRunNS, []byte(id+"\n"+tick.UTC().Format(time.RFC3339Nano))).String()
}

// Schedule is a stored schedule as the engine sees it: with its next tick.
type Schedule struct {
	store.Schedule
	// NextTick is the first tick after LastTick: when the schedule starts
	// its next run. When it has passed (no server ran then), the next
	// look starts one run for the latest tick due. Zero when the
	// expression has no tick within five years.
	NextTick time.Time
	// Ran reports whether a tick has started a run (LastTick is that
	// tick's; otherwise LastTick is CreatedAt).
	Ran bool
}

// ScheduleSpec is a schedule to create (CreateSchedule).
type ScheduleSpec struct {
	WorkflowID string
	Cron       string
	Timezone   string // "" = UTC
	Data       map[string]any
}

// compiled returns the workflow.Schedule of s, checked; field names what
// is wrong when err is set.
func compiled(cron, tz string) (*workflow.Schedule, string, error) {
	ws := &workflow.Schedule{Cron: cron, Timezone: tz}
	field, err := ws.Check()
	return ws, field, err
}

func (e *Engine) scheduleView(s store.Schedule) *Schedule {
	v := &Schedule{Schedule: s, Ran: !s.LastTick.Equal(s.CreatedAt)}
	if ws, _, err := compiled(s.Cron, s.Timezone); err == nil {
		if n := ws.Next(s.LastTick.In(ws.Location())); !n.IsZero() {
			v.NextTick = n.UTC()
		}
	}
	return v
}

// SyncFileSchedules stores the schedules of the served workflows' files
// (their `schedules:` entries, each under its workflow.Schedule.Key): the
// new ones from now, the ones stored before with their last tick, and the
// stored file schedules of served workflows that the files no longer have
// are deleted. Servers call it at start, before StartSchedules. A
// schedule whose data is over the run data limit (Options.MaxRunData) is
// ETooLarge, and nothing is stored.
func (e *Engine) SyncFileSchedules(ctx context.Context) error {
	now := store.ScheduleTime(e.clock.Now())
	var ss []store.Schedule
	for _, d := range e.order {
		for _, s := range d.Schedules {
			if s.Key() == "" {
				return protocol.Errorf(protocol.EInternal, "workflow %q has a schedule that was not validated", d.ID)
			}
			data := json.RawMessage(`{}`)
			if len(s.Data) > 0 {
				b, err := json.Marshal(s.Data)
				if err != nil {
					return internal("could not store a schedule's data", err)
				}
				if int64(len(b)) > e.maxData {
					// Every tick would be refused: say so now, as POST
					// /schedules does.
					return protocol.Errorf(protocol.ETooLarge, "A schedule of workflow %q (cron %q) has data of %d bytes of JSON, but a run's data is at most %d (asmp serve --max-run-data): no tick could start its run. Make the data smaller or raise the limit.",
						d.ID, s.Cron, len(b), e.maxData).With("limit_bytes", e.maxData).With("size_bytes", len(b))
				}
				data = b
			}
			ss = append(ss, store.Schedule{ID: s.Key(), WorkflowID: d.ID, Cron: s.Cron, Timezone: s.Timezone, Data: data,
				Source: store.ScheduleFile, CreatedAt: now, LastTick: now})
		}
	}
	if err := e.store.PutFileSchedules(ctx, e.WorkflowIDs(), ss); err != nil {
		return internal("could not store the workflows' schedules", err)
	}
	e.warnOversizedSchedules(ctx)
	e.wakeSchedules()
	return nil
}

// warnOversizedSchedules logs a warning for each stored API schedule
// whose data is over the run data limit (created under a larger
// --max-run-data than this server's): its ticks cannot start runs, and
// without this only each tick would say so.
func (e *Engine) warnOversizedSchedules(ctx context.Context) {
	const page = 500
	for after := ""; ; {
		ss, err := e.store.ListSchedules(ctx, after, page)
		if err != nil {
			e.log.Warn("could not read the schedules to check their data against the run data limit", "err", err)
			return
		}
		for _, s := range ss {
			if s.Source == store.ScheduleAPI && int64(len(s.Data)) > e.maxData {
				e.log.Warn("a schedule's data is over the run data limit, so its ticks start no run: DELETE /schedules/ID and create it again with less data, or raise asmp serve --max-run-data",
					"schedule", s.ID, "workflow", s.WorkflowID, "size_bytes", len(s.Data), "limit_bytes", e.maxData)
			}
		}
		if len(ss) < page {
			return
		}
		after = ss[len(ss)-1].ID
	}
}

// CreateSchedule stores a new API schedule of a served workflow. Its cron
// expression and time zone are checked as a file's are; a bad one, or a
// workflow not served, is EInvalid with a hint (and the field).
func (e *Engine) CreateSchedule(ctx context.Context, spec ScheduleSpec) (*Schedule, error) {
	if _, ok := e.defs[spec.WorkflowID]; !ok {
		return nil, protocol.Errorf(protocol.EInvalid, "Unknown workflow_id %q: a schedule starts runs of a served workflow (%s).",
			protocol.Truncate(spec.WorkflowID, 64), strings.Join(e.WorkflowIDs(), ", ")).With("field", "workflow_id").With("workflows", e.WorkflowIDs())
	}
	ws, field, err := compiled(spec.Cron, spec.Timezone)
	if err != nil {
		return nil, protocol.Errorf(protocol.EInvalid, "%s.", strings.TrimSuffix(err.Error(), ".")).With("field", field)
	}
	data := json.RawMessage(`{}`)
	if len(spec.Data) > 0 {
		b, err := json.Marshal(spec.Data)
		if err != nil {
			return nil, protocol.Errorf(protocol.EInvalid, "data cannot be stored as JSON: %v.", err).With("field", "data")
		}
		if int64(len(b)) > e.maxData {
			return nil, protocol.Errorf(protocol.ETooLarge, "data is %d bytes of JSON; a run's data is at most %d.", len(b), e.maxData).With("field", "data")
		}
		data = b
	}
	e.schedCreate.Lock()
	defer e.schedCreate.Unlock()
	if dup, err := e.sameSchedule(ctx, spec.WorkflowID, ws, data); err != nil {
		return nil, err
	} else if dup != "" {
		return nil, protocol.Errorf(protocol.EConflict, "Schedule %s already starts runs of %s on %q in %s with this data: two would start two runs a tick. GET /schedules/%s shows it; give different data to start two runs a tick.",
			dup, spec.WorkflowID, spec.Cron, ws.Location(), dup).With("schedule_id", dup)
	}
	now := store.ScheduleTime(e.clock.Now())
	s := store.Schedule{ID: "sched_" + uuid.Must(uuid.NewV7()).String(), WorkflowID: spec.WorkflowID, Cron: spec.Cron, Timezone: spec.Timezone,
		Data: data, Source: store.ScheduleAPI, CreatedAt: now, LastTick: now}
	if err := e.store.PutSchedule(ctx, s); err != nil {
		return nil, internal("could not store the schedule", err)
	}
	e.wakeSchedules()
	return e.scheduleView(s), nil
}

// sameSchedule returns the id of a stored schedule (from the API or a
// file) that is the same as the one of workflow wf on ws with data: the
// same workflow.Schedule key, as a file's schedules are compared ("" when
// there is none).
func (e *Engine) sameSchedule(ctx context.Context, wf string, ws *workflow.Schedule, data json.RawMessage) (string, error) {
	want, err := scheduleKeyOf(wf, ws, data)
	if err != nil {
		return "", internal("could not key the schedule", err)
	}
	after := ""
	for {
		ss, err := e.store.ListSchedules(ctx, after, 256)
		if err != nil {
			return "", internal("could not read the schedules", err)
		}
		for _, s := range ss {
			if s.WorkflowID != wf {
				continue
			}
			other, _, err := compiled(s.Cron, s.Timezone)
			if err != nil {
				continue
			}
			if key, err := scheduleKeyOf(s.WorkflowID, other, s.Data); err == nil && key == want {
				return s.ID, nil
			}
		}
		if len(ss) < 256 {
			return "", nil
		}
		after = ss[len(ss)-1].ID
	}
}

// scheduleKeyOf is ws's key (workflow.Schedule.KeyFor) with data, a
// stored schedule's JSON data.
func scheduleKeyOf(wf string, ws *workflow.Schedule, data json.RawMessage) (string, error) {
	d, err := decodeData(data)
	if err != nil {
		return "", err
	}
	ws.Data = d
	if len(d) == 0 {
		ws.Data = nil // no data and {} start the same runs
	}
	return ws.KeyFor(wf)
}

// GetSchedule returns the stored schedule id; ENotFound when there is
// none.
func (e *Engine) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	s, err := e.store.GetSchedule(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, scheduleNotFound(id)
	}
	if err != nil {
		return nil, internal("could not read the schedule", err)
	}
	return e.scheduleView(s), nil
}

func scheduleNotFound(id string) error {
	return protocol.Errorf(protocol.ENotFound, "Schedule not found: no schedule has id %q. GET /schedules lists them.", protocol.Truncate(id, 80))
}

// ListSchedules returns up to limit stored schedules (every workflow's,
// file and API) with an id after after, ordered by id (limit <= 0: all).
func (e *Engine) ListSchedules(ctx context.Context, after string, limit int) ([]*Schedule, error) {
	ss, err := e.store.ListSchedules(ctx, after, limit)
	if err != nil {
		return nil, internal("could not list the schedules", err)
	}
	out := make([]*Schedule, 0, len(ss))
	for _, s := range ss {
		out = append(out, e.scheduleView(s))
	}
	return out, nil
}

// DeleteSchedule deletes an API schedule: ENotFound when there is none,
// EConflict when it is a file schedule (it lives in its workflow file and
// goes when the file no longer has it).
func (e *Engine) DeleteSchedule(ctx context.Context, id string) error {
	err := e.store.DeleteSchedule(ctx, id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return scheduleNotFound(id)
	case errors.Is(err, store.ErrFileSchedule):
		wf := ""
		if s, gerr := e.store.GetSchedule(ctx, id); gerr == nil {
			wf = s.WorkflowID
		}
		return protocol.Errorf(protocol.EConflict, "Schedule %s lives in the schedules: list of workflow %q's file: remove it there and restart the servers that serve that file.", id, wf).
			With("field", "schedule_id")
	default:
		return internal("could not delete the schedule", err)
	}
}

// ScheduleOptions configure the schedule loop (StartSchedules).
type ScheduleOptions struct {
	// Poll bounds the wait between two looks at the stored schedules
	// (0 = 1s), so schedules created by other processes start on time;
	// the loop also wakes at the earliest next tick, and when this
	// engine stores a schedule.
	Poll time.Duration
	// Page is how many schedules one store read takes (0 = 256).
	Page int
}

func scheduleDefaults(opts *ScheduleOptions) ScheduleOptions {
	var o ScheduleOptions
	if opts != nil {
		o = *opts
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Page <= 0 {
		o.Page = 256
	}
	return o
}

// ScheduleLoop starts the runs of due schedule ticks until Stop.
type ScheduleLoop struct {
	e      *Engine
	opts   ScheduleOptions
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
}

// StartSchedules starts the loop that starts the runs of due schedule
// ticks on the engine's clock, until ctx ends or Stop. A tick that fell
// due while no server ran starts its (one) catch-up run at once. Stop it
// before closing the store.
func (e *Engine) StartSchedules(ctx context.Context, opts *ScheduleOptions) *ScheduleLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &ScheduleLoop{e: e, opts: scheduleDefaults(opts), ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	e.schedMu.Lock()
	e.schedLoops = append(e.schedLoops, l)
	e.schedMu.Unlock()
	go l.run()
	return l
}

// Stop ends the loop; a run being started is started first.
func (l *ScheduleLoop) Stop() {
	l.e.schedMu.Lock()
	for i, o := range l.e.schedLoops {
		if o == l {
			l.e.schedLoops = append(l.e.schedLoops[:i], l.e.schedLoops[i+1:]...)
			break
		}
	}
	l.e.schedMu.Unlock()
	l.cancel()
	<-l.done
}

// wakeSchedules makes the schedule loops look again (a schedule was
// stored).
func (e *Engine) wakeSchedules() {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	for _, l := range e.schedLoops {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *ScheduleLoop) run() {
	defer close(l.done)
	e := l.e
	failed := 0 // looks in a row that failed
	for l.ctx.Err() == nil {
		looked := e.clock.Now()
		_, next, err := e.fireSchedules(l.ctx, looked, l.opts.Page)
		// fireSchedules logged what failed, naming the schedule.
		if err != nil {
			failed = min(failed+1, 5)
		} else {
			failed = 0
		}
		wait := l.opts.Poll
		if !next.IsZero() {
			wait = min(wait, next.Sub(e.clock.Now()))
		}
		if wait <= 0 && next.After(looked) && err == nil {
			continue // it fell due while this look ran: look again now
		}
		if wait <= 0 {
			// Due and not started (a store error, or another replica's
			// start seen late): do not spin; after failures, back off
			// (50 ms, 100 ms, … up to the poll).
			wait = min(l.opts.Poll, 50*time.Millisecond<<failed)
		}
		t := e.clock.NewTimer(wait)
		select {
		case <-l.ctx.Done():
		case <-l.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// FireDueSchedules starts the runs of the schedule ticks due at now: for
// each stored schedule of a served workflow whose next tick after its
// last one is at or before now, one run, for the latest tick due (see the
// compare-and-set above). It returns how many runs it started; an error
// is the first that stopped a read of the schedules or a start (the
// others are still tried). The schedule loop calls it at every look; a
// test with a fake clock may call it directly.
func (e *Engine) FireDueSchedules(ctx context.Context, now time.Time) (int, error) {
	n, _, err := e.fireSchedules(ctx, now, scheduleDefaults(nil).Page)
	return n, err
}

// fireSchedules is FireDueSchedules, also returning the earliest next tick
// of the schedules it saw (zero when none).
func (e *Engine) fireSchedules(ctx context.Context, now time.Time, page int) (started int, next time.Time, first error) {
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	after := ""
	for ctx.Err() == nil {
		ss, err := e.store.ListSchedules(ctx, after, page)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error("reading the schedules failed", "err", err)
			}
			keep(internal("could not read the schedules", err))
			return started, next, first
		}
		for _, s := range ss {
			if ctx.Err() != nil {
				break
			}
			if _, ok := e.defs[s.WorkflowID]; !ok {
				continue // left to the processes that serve it
			}
			ws, _, err := compiled(s.Cron, s.Timezone)
			if err != nil {
				e.log.Warn("a stored schedule does not parse; it starts no runs", "schedule", s.ID, "err", err)
				continue
			}
			if err := e.recoverTick(ctx, s); err != nil {
				keep(err)
				e.log.Error("checking the run of a schedule's last tick failed", "schedule", s.ID, "err", err)
			}
			n, err := e.fireSchedule(ctx, s, ws, now)
			if err != nil {
				keep(err)
				e.log.Error("starting a schedule's run failed", "schedule", s.ID, "err", err)
			}
			if n {
				started++
			}
			// The next tick to wake for: after the one just started, or
			// the first one after the last when none was due.
			from := maxTime(s.LastTick, now)
			if err != nil {
				from = s.LastTick // due still: look again soon
			}
			if t := ws.Next(from.In(ws.Location())); !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if len(ss) < page {
			break
		}
		after = ss[len(ss)-1].ID
	}
	return started, next, first
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// recoverTick makes sure the run of s's last tick exists: the process
// that won that tick's compare-and-set may have died before it started
// the run. It reads the run once per schedule and tick (then remembers
// it), and starts it, under the tick's run id, when it is missing and
// cannot have been pruned (the tick is after every Prune bound this engine
// used). Another process starting it at the same moment is refused as a
// run that exists: one run either way.
func (e *Engine) recoverTick(ctx context.Context, s store.Schedule) error {
	if s.LastTick.IsZero() || !s.LastTick.After(s.CreatedAt) {
		return nil // no tick has started a run yet
	}
	if seen, ok := e.schedSeen.Load(s.ID); ok && seen.(time.Time).Equal(s.LastTick) {
		return nil
	}
	if pb := e.prunedBefore.Load(); pb != 0 && !s.LastTick.After(time.Unix(0, pb)) {
		e.schedSeen.Store(s.ID, s.LastTick)
		return nil
	}
	id := ScheduleRunID(s.ID, s.LastTick)
	_, err := e.storedRun(ctx, id)
	switch {
	case err == nil:
		e.schedSeen.Store(s.ID, s.LastTick)
		return nil
	case protocol.ErrorCode(err) != protocol.ENotFound:
		return err
	}
	data, err := decodeData(s.Data)
	if err != nil {
		e.schedSeen.Store(s.ID, s.LastTick)
		return nil
	}
	_, err = e.StartRun(context.WithoutCancel(ctx), s.WorkflowID, data, StartOptions{Actor: ActorSchedule, ID: id})
	switch {
	case err == nil:
		e.log.Warn("started a scheduled run its process did not start (it stopped between its tick and the run)", "schedule", s.ID, "tick", s.LastTick, "run", id)
	case protocol.ErrorCode(err) == protocol.EInternal:
		return err
	}
	e.schedSeen.Store(s.ID, s.LastTick)
	return nil
}

// fireSchedule starts s's run of its latest tick due at now, if one is
// due and this process wins the compare-and-set on its last tick.
func (e *Engine) fireSchedule(ctx context.Context, s store.Schedule, ws *workflow.Schedule, now time.Time) (bool, error) {
	tick, ok := ws.Missed(s.LastTick.In(ws.Location()), now.In(ws.Location()))
	if !ok {
		return false, nil
	}
	tick = tick.UTC()
	won, err := e.store.AdvanceSchedule(ctx, s.ID, s.LastTick, tick)
	if err != nil {
		return false, internal("could not advance a schedule", err)
	}
	if !won {
		return false, nil // another process starts this tick's run
	}
	data, err := decodeData(s.Data)
	if err != nil {
		e.log.Error("a schedule's data is not a JSON object; its tick starts no run", "schedule", s.ID, "tick", tick, "err", err)
		e.scheduleFailed(ctx, s.ID, tick, "The schedule's stored data is not a JSON object, so its tick started no run.")
		return false, nil
	}
	// Once the tick is ours, start its run whatever ctx says: a loop
	// stopping now would otherwise lose it.
	_, err = e.StartRun(context.WithoutCancel(ctx), s.WorkflowID, data, StartOptions{Actor: ActorSchedule, ID: ScheduleRunID(s.ID, tick)})
	if err == nil {
		e.schedSeen.Store(s.ID, tick)
		return true, nil
	}
	switch protocol.ErrorCode(err) {
	case protocol.EConflict:
		return false, nil // started already (a second start of the tick)
	case protocol.EInternal:
		// The store failed: give the tick back, so the next look (here or
		// on another replica) starts it, under the same run id.
		if _, rerr := e.store.AdvanceSchedule(context.WithoutCancel(ctx), s.ID, tick, s.LastTick); rerr != nil {
			e.log.Error("could not give a schedule's tick back; that tick starts no run", "schedule", s.ID, "tick", tick, "err", rerr)
			e.scheduleFailed(ctx, s.ID, tick, "The store failed while the tick's run was started, and the tick could not be given back: it started no run (the server log has the store's errors).")
		}
		return false, err
	default:
		// Refused (the data is too large for a run, …): trying again
		// would be refused again. The tick is spent.
		e.log.Error("a schedule's run was refused; the tick starts no run", "schedule", s.ID, "tick", tick, "err", err)
		e.scheduleFailed(ctx, s.ID, tick, "The tick's run was refused ("+protocol.ErrorCode(err)+"): "+err.Error())
		return false, nil
	}
}

// scheduleFailed records that the run of schedule id's tick could not be
// started, and why (the schedule's last_failure), whatever ctx says.
func (e *Engine) scheduleFailed(ctx context.Context, id string, tick time.Time, msg string) {
	if err := e.store.FailSchedule(context.WithoutCancel(ctx), id, store.ScheduleFailure{Tick: tick, Error: msg}); err != nil {
		e.log.Error("could not record a schedule's failed tick", "schedule", id, "tick", tick, "err", err)
	}
}
