package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// WorkerOptions configure the background task workers.
type WorkerOptions struct {
	// Workers is the number of tasks run at once (0 = 4).
	Workers int
	// Lease is how long a claimed task stays owned without renewal
	// (0 = DefaultLease). Leases are renewed every Lease/3 while a task runs;
	// a task whose worker died is claimed again once its lease passes.
	Lease time.Duration
	// Poll is how often idle workers look for tasks enqueued by other
	// processes or left by a crash (0 = 1s). Tasks enqueued by this process
	// wake a worker at once, and the retries it schedules wake one when
	// they are due by the engine's clock (Options.Clock); a retry another
	// process scheduled (or this one, before a restart) is found on the
	// first look after it is due.
	Poll time.Duration
	// Owner names this process in task leases (default: a random id).
	Owner string
}

// Workers runs background tasks until Stop.
type Workers struct {
	e        *Engine
	opts     WorkerOptions
	wake     chan struct{}
	stop     chan struct{}      // closed by Stop: no new claims
	ctx      context.Context    // cancelled by Stop after the grace period
	cancel   context.CancelFunc //
	wg       sync.WaitGroup
	stopOnce sync.Once

	dueMu sync.Mutex
	dues  []time.Time // not-before times of the retries this process scheduled, sorted
}

// maxDues bounds the retry times a Workers remembers; retries beyond them
// are found by polling.
const maxDues = 4096

// addDue remembers that a retry is claimable from at, to wake a worker
// then.
func (w *Workers) addDue(at time.Time) {
	w.dueMu.Lock()
	defer w.dueMu.Unlock()
	i, _ := slices.BinarySearchFunc(w.dues, at, time.Time.Compare)
	if i >= maxDues {
		return
	}
	w.dues = slices.Insert(w.dues, i, at)
	if len(w.dues) > maxDues {
		w.dues = w.dues[:maxDues]
	}
}

// nextDue forgets the retry times at or before now (a claim at now found
// nothing claimable: those tasks were claimed, or are done) and returns the
// earliest one left.
func (w *Workers) nextDue(now time.Time) (time.Time, bool) {
	w.dueMu.Lock()
	defer w.dueMu.Unlock()
	i := 0
	for i < len(w.dues) && !w.dues[i].After(now) {
		i++
	}
	w.dues = w.dues[i:]
	if len(w.dues) == 0 {
		return time.Time{}, false
	}
	return w.dues[0], true
}

// StartWorkers starts the task workers. Stop them with Stop before closing
// the store.
func (e *Engine) StartWorkers(opts *WorkerOptions) *Workers {
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Owner == "" {
		o.Owner = "worker-" + uuid.NewString()[:8]
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Workers{e: e, opts: o, wake: make(chan struct{}, o.Workers), stop: make(chan struct{}), ctx: ctx, cancel: cancel}
	e.setWake(w.notify)
	for i := 0; i < o.Workers; i++ {
		w.wg.Add(1)
		go w.loop()
	}
	return w
}

func (w *Workers) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stop asks running tasks to end and waits up to grace for them. Tasks that
// do not finish in time are handed back to the store (their lease released)
// so another process, or this one after a restart, runs them again.
func (w *Workers) Stop(grace time.Duration) {
	w.e.setWake(nil)
	w.stopOnce.Do(func() { close(w.stop) })
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	// First let tasks finish on their own for the grace period.
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	w.cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.e.log.Warn("task workers did not stop in time")
	}
}

// stopping reports whether Stop has begun (no new claims).
func (w *Workers) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *Workers) loop() {
	defer w.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if w.stopping() || w.ctx.Err() != nil {
			return
		}
		now := w.e.now()
		task, ok, err := w.e.store.ClaimTask(w.ctx, w.opts.Owner, now, w.opts.Lease, w.e.workflowIDs)
		if err != nil && w.ctx.Err() == nil {
			w.e.log.Error("claiming a task failed", "err", err)
		}
		if ok {
			w.run(task)
			continue
		}
		// Wait for a wake-up, the poll (wall time: it looks for other
		// processes' tasks), or the next retry this process scheduled, by
		// the engine's clock (a fake one in tests).
		var due <-chan time.Time
		var dueTimer clock.Timer
		if at, ok := w.nextDue(now); ok {
			d := at.Sub(w.e.clock.Now())
			if d <= 0 {
				continue // due since the claim: look again
			}
			dueTimer = w.e.clock.NewTimer(d)
			due = dueTimer.C()
		}
		t.Reset(w.opts.Poll)
		select {
		case <-w.ctx.Done():
		case <-w.stop:
		case <-w.wake:
		case <-t.C:
		case <-due:
		}
		if dueTimer != nil {
			dueTimer.Stop()
		}
	}
}

// run executes one claimed task and applies its outcome.
func (w *Workers) run(t store.Task) {
	e := w.e
	log := e.log.With("task", t.ID, "run", t.RunID, "state", t.State, "attempt", taskAttempt(t), "claims", t.Attempts)
	bg := context.Background()
	r, err := e.GetRun(bg, t.RunID)
	if err != nil && protocol.ErrorCode(err) != protocol.ENotFound {
		// The store is unreachable (or the run cannot be read): hand the
		// task back rather than lose it.
		log.Warn("cannot read the task's run; handing the task back", "err", err)
		if rerr := e.store.ReleaseTask(bg, t.ID, w.opts.Owner); rerr != nil {
			log.Warn("releasing the task failed; its lease will expire", "err", rerr)
		}
		return
	}
	if err != nil || r.Version != t.Version || r.State != t.State || r.Snapshot.Status != protocol.StatusProcessing {
		// The run moved on (or vanished): the task has nothing left to do.
		if ferr := e.store.FinishTask(bg, t.ID); ferr != nil {
			log.Error("finishing a stale task failed", "err", ferr)
		}
		return
	}
	st := r.StateDef()
	if st == nil || st.Task == nil {
		_ = e.store.FinishTask(bg, t.ID)
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	// Renew the lease while the task runs.
	leaseDone := make(chan struct{})
	go func() {
		tick := time.NewTicker(w.opts.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-leaseDone:
				return
			case <-tick.C:
				if err := e.store.ExtendTask(bg, t.ID, w.opts.Owner, e.now().Add(w.opts.Lease)); err != nil {
					log.Warn("lost the task's lease; stopping it", "err", err)
					cancel()
					return
				}
			}
		}
	}()
	action, output, receipt, terr := w.execute(ctx, r, st, t)
	close(leaseDone)
	if errors.Is(terr, workflow.ErrFuncMissing) {
		// The run's version names a Go task this process does not have:
		// hand the task to a process that does, never fail the run for it.
		log.Warn("the task's Go func is not registered here; handing the task back", "err", terr)
		if err := e.store.ReleaseTask(bg, t.ID, w.opts.Owner); err != nil {
			log.Warn("releasing the task failed; its lease will expire", "err", err)
		}
		return
	}
	if w.ctx.Err() != nil && (terr != nil || action == "") {
		// Shutting down: hand the task back instead of failing the run.
		if err := e.store.ReleaseTask(bg, t.ID, w.opts.Owner); err != nil {
			log.Warn("releasing the task failed; its lease will expire", "err", err)
		}
		return
	}
	w.apply(r, st, t, action, taskResult{output, receipt}, terr, log)
}

// taskResult is what a successful task leaves for the run's data: its
// output (Task.Output) and a row task's ledger record (Task.Receipt).
type taskResult struct {
	output, receipt any
}

// jsonValue turns a task's result into a value of the run's data (what
// decoding its JSON gives: maps, slices, strings, int64, float64, bool).
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeValue(b, 0)
}

// TaskOutput is implemented by a RowInvoker's result to give the value a
// row-bound task stores under its state's task output key.
type TaskOutput interface {
	TaskOutput() any
}

// TaskReceipt is implemented by a RowInvoker's result to give the value a
// row-bound task stores under its state's task receipt key (the ledger key
// and receipt of the task's invocation).
type TaskReceipt interface {
	TaskReceipt() any
}

// execute runs the task and returns the action it chose ("" = on_success)
// and its result (for the state's task output key).
func (w *Workers) execute(ctx context.Context, r *Run, st *workflow.State, t store.Task) (action string, output, receipt any, err error) {
	e := w.e
	attempt, maxAttempts := taskAttempt(t), 1
	if p := st.Task.Retry; p != nil {
		maxAttempts = max(p.MaxAttempts, 1)
	}
	publish, flush := e.progressReporter(r, t)
	defer flush() // after the task returned (and after a panic's recovery below)
	report := publish
	if maxAttempts > 1 {
		// Under a retry policy, say which attempt reports.
		of := "Attempt " + strconv.Itoa(attempt) + " of " + strconv.Itoa(maxAttempts)
		report = func(progress, hint string) {
			if hint == "" {
				hint = of + "."
			} else {
				hint = of + ": " + hint
			}
			publish(progress, hint)
		}
		if attempt > 1 {
			publish("attempt "+strconv.Itoa(attempt)+" of "+strconv.Itoa(maxAttempts), of+" of the task of state "+r.State+" started.")
		}
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("task panicked: %v", v)
		}
	}()
	if st.Task.Func != nil {
		tc := &workflow.TaskContext{
			RunID: r.ID, State: r.State, Data: r.Data, IdempotencyKey: entryTaskID(t), Attempt: attempt, MaxAttempts: maxAttempts, Report: report,
		}
		action, err = st.Task.Func(ctx, tc)
		return action, tc.Result, nil, err
	}
	if e.invoker == nil {
		return "", nil, nil, errors.New("this server has no OIP invoker for row-bound tasks")
	}
	res, ok, reason, err := e.invoker.InvokeRow(ctx, RowCall{
		Key: st.Task.Row, Input: r.Data, FromData: true, RunID: r.ID, State: r.State,
		TaskID: t.ID, Attempt: max(t.Attempts, 1), RetryAttempt: attempt, MaxAttempts: maxAttempts, Actor: "task", Progress: report,
	})
	if err != nil {
		return "", nil, nil, err
	}
	if !ok {
		return "", nil, nil, errors.New(reason)
	}
	if to, ok := res.(TaskOutput); ok {
		output = to.TaskOutput()
	}
	if tr, ok := res.(TaskReceipt); ok {
		receipt = tr.TaskReceipt()
	}
	return "", output, receipt, nil
}

// apply fires the task's outcome on the run through the same
// compare-and-set path as client transitions.
func (w *Workers) apply(r *Run, st *workflow.State, t store.Task, action string, res taskResult, terr error, log *slog.Logger) {
	e := w.e
	bg := context.Background()
	if terr == nil && action == "" {
		action = st.Task.OnSuccess
	}
	if terr == nil && action == "" {
		terr = errors.New("the task returned no action and the state declares no on_success")
	}
	if terr != nil && w.retry(r, st, t, terr, log) {
		return
	}
	if terr != nil {
		log.Info("task failed", "err", terr)
		action = st.Task.OnFailure
	}
	opts := TransitionOptions{Actor: "task", task: &t}
	if terr == nil && st.Task.Output != "" {
		v, err := jsonValue(res.output)
		if err != nil {
			terr = fmt.Errorf("the task's result cannot be stored as JSON under %q: %v", st.Task.Output, err)
			action = st.Task.OnFailure
		} else {
			opts.set = map[string]any{st.Task.Output: v}
		}
	}
	if terr == nil && st.Task.Receipt != "" && res.receipt != nil {
		if v, err := jsonValue(res.receipt); err == nil {
			if opts.set == nil {
				opts.set = map[string]any{}
			}
			opts.set[st.Task.Receipt] = v
		}
	}
	if terr != nil {
		opts.failure = failureReason(r.State, terr)
	}
	if action != "" {
		next, err := e.Transition(bg, r.ID, action, map[string]any{}, opts)
		if protocol.ErrorCode(err) == protocol.ETooLarge && terr == nil && st.Task.OnFailure != "" {
			// The result would make the run too large: the task failed,
			// and its result is not kept.
			terr = errors.New(protocol.ErrorHint(err))
			action = st.Task.OnFailure
			opts.set, opts.failure = nil, failureReason(r.State, terr)
			next, err = e.Transition(bg, r.ID, action, map[string]any{}, opts)
		}
		switch {
		case err == nil:
			e.settleMigration(bg, next)
			return
		case errors.Is(err, errTaskStale):
			_ = e.store.FinishTask(bg, t.ID)
			return
		default:
			if terr == nil {
				terr = fmt.Errorf("firing %q failed: %s", action, protocol.ErrorHint(err))
			} else {
				terr = fmt.Errorf("%v (and firing %q failed: %s)", terr, action, protocol.ErrorHint(err))
			}
		}
	}
	if err := e.failRun(bg, r.ID, t, terr); err != nil {
		if errors.Is(err, errTaskStale) {
			_ = e.store.FinishTask(bg, t.ID)
			return
		}
		log.Error("marking the run failed did not work", "err", err)
	}
}

// retry schedules the next attempt of t after this one failed with cause,
// when st's retry policy allows one, and reports whether it handled the
// failure: the retry is committed (or the run moved on, and t is done), or
// the store failed (t's lease ends and the attempt runs again). Only the
// failures of the task itself are retried (an error, a panic, no action
// to fire); a result that cannot be stored and a transition the run
// refuses are not, as the same result would fail the same way.
func (w *Workers) retry(r *Run, st *workflow.State, t store.Task, cause error, log *slog.Logger) bool {
	e := w.e
	bg := context.Background()
	delay, ok := st.Task.Retry.Next(taskAttempt(t), e.rand)
	if !ok {
		return false
	}
	at, err := e.retryTask(bg, r.ID, t, st.Task.Retry.MaxAttempts, delay, cause)
	switch {
	case err == nil:
		log.Info("task failed; retrying", "err", cause, "not_before", at)
		w.addDue(at)
		w.notify()
	case errors.Is(err, errTaskStale):
		_ = e.store.FinishTask(bg, t.ID)
	default:
		log.Error("scheduling the task's retry failed; the attempt runs again when its lease ends", "err", err)
	}
	return true
}

// retryTask commits, under the run's lock, the retry of t, whose attempt
// failed with cause: an event of kind store.EventRetry (actor "task", its
// reason naming the attempt, the failure and when the next attempt
// starts), the run staying in its state with its data, t done and the
// next attempt's task enqueued, claimable after delay (by the engine's
// clock). The run's timers are kept: a retry does not enter the state
// again. errTaskStale when the run is no longer at t's version (it moved
// on: the compare-and-set guards a change made meanwhile).
func (e *Engine) retryTask(ctx context.Context, runID string, t store.Task, maxAttempts int, delay time.Duration, cause error) (time.Time, error) {
	mu := e.lock(runID)
	mu.Lock()
	defer mu.Unlock()
	r, err := e.GetRun(ctx, runID)
	if protocol.ErrorCode(err) == protocol.ENotFound {
		return time.Time{}, errTaskStale
	}
	if err != nil {
		return time.Time{}, err
	}
	if r.Version != t.Version || r.State != t.State || r.Snapshot.Status != protocol.StatusProcessing {
		return time.Time{}, errTaskStale
	}
	now := e.now().UTC()
	at := now.Add(delay)
	attempt := taskAttempt(t)
	msg := protocol.Truncate(strings.TrimSpace(cause.Error()), maxFailureReason-200)
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	next := r.Run
	next.Version++
	next.UpdatedAt = now
	next.Snapshot.Error = fmt.Sprintf("Attempt %d of %d failed: %s Attempt %d starts at %s.", attempt, maxAttempts, msg, attempt+1, at.Format(time.RFC3339))
	task := e.newTask(r.ID, r.State, next.Version, now)
	task.Attempt, task.NotBefore = attempt+1, at
	c := store.Commit{
		Run: next,
		Event: store.Event{RunID: r.ID, Seq: next.Version, Time: now, Kind: store.EventRetry, Action: strconv.Itoa(attempt), From: r.State, To: r.State,
			Actor: "task", Reason: next.Snapshot.Error, Offered: actionNames(e.Offered(r)), Patch: noChange, Snapshot: next.Snapshot},
		Complete: t.ID,
		Enqueue:  task,
	}
	err = e.store.CommitRun(ctx, r.Version, c).Wait()
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return time.Time{}, errTaskStale
	}
	if err != nil {
		return time.Time{}, internal("could not store a task's retry", err)
	}
	e.published(r.WorkflowID, c.Event)
	return at, nil
}

// failureReason is the stored, shown reason of a task's failure.
func failureReason(state string, cause error) string {
	msg := strings.TrimSpace(cause.Error())
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return protocol.Truncate("The background task of state "+state+" failed: "+msg, maxFailureReason)
}

// maxFailureReason bounds the stored reason of a task's failure, which
// quotes the task's error (its command's output, for a row task).
const maxFailureReason = 4096

// failRun sets the run's status to failed with the task's error as hint.
func (e *Engine) failRun(ctx context.Context, runID string, t store.Task, cause error) error {
	mu := e.lock(runID)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 0; attempt < e.retries; attempt++ {
		r, err := e.GetRun(ctx, runID)
		if err != nil {
			return err
		}
		if r.Version != t.Version || r.State != t.State {
			return errTaskStale
		}
		now := e.now().UTC()
		next := r.Run
		next.Version++
		next.UpdatedAt = now
		next.Snapshot.Status = protocol.StatusFailed
		next.Snapshot.Error = failureReason(r.State, cause)
		c := store.Commit{
			Run: next,
			Event: store.Event{RunID: r.ID, Seq: next.Version, Time: now, Kind: store.EventFailed, From: r.State, To: r.State, Actor: "task",
				Reason: next.Snapshot.Error, Offered: []string{}, Patch: json.RawMessage(`{}`), Snapshot: next.Snapshot},
			Complete: t.ID,
		}
		enterTimers(&c, r.StateDef(), nil, nil, now) // a failed run has no timers
		e.outbox(r.Def, r.Status(), &c)
		err = e.store.CommitRun(ctx, r.Version, c).Wait()
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		e.outboxStored(&c)
		e.published(r.WorkflowID, c.Event)
		return nil
	}
	return errors.New("engine: could not mark the run failed: too many conflicts")
}
