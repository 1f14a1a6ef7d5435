package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// schedT0 is 30s past a five-minute tick: a schedule synced then has its
// first tick at 09:05.
var schedT0 = time.Date(2026, 5, 4, 9, 0, 30, 0, time.UTC)

// reportFlow is started by a schedule every five minutes, with data.
func reportFlow(t testing.TB, cron string) *workflow.Definition {
	t.Helper()
	b := workflow.New("report-v1", "COLLECT")
	b.State("COLLECT")
	b.State("SENT")
	b.Transition("COLLECT", "send", "SENT")
	if cron != "" {
		b.Schedule(workflow.Schedule{Cron: cron, Timezone: "Europe/Berlin", Data: map[string]any{"kind": "weekly"}})
	}
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type schedRig struct {
	eng   *engine.Engine
	st    engine.Store
	def   *workflow.Definition
	clock *clock.Fake
}

func newSchedRig(t testing.TB, st engine.Store, fc *clock.Fake, cron string) *schedRig {
	t.Helper()
	def := reportFlow(t, cron)
	eng, err := engine.New(st, []*workflow.Definition{def}, &engine.Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.SyncFileSchedules(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &schedRig{eng: eng, st: st, def: def, clock: fc}
}

// key is the id of the rig's file schedule.
func (r *schedRig) key() string { return r.def.Schedules[0].Key() }

func (r *schedRig) fire(t testing.TB) int {
	t.Helper()
	n, err := r.eng.FireDueSchedules(context.Background(), r.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runs returns the stored runs, oldest first.
func (r *schedRig) runs(t testing.TB) []store.Run {
	t.Helper()
	rs, err := r.st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(rs)
	return rs
}

func runIDsOf(rs []store.Run) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// A file schedule starts one run per tick, as actor "schedule", with the
// schedule's data, under the tick's run id; not before the tick, and not
// twice for one.
func TestScheduleOneRunPerTick(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		r := newSchedRig(t, b.New(t).Open(t), clock.NewFake(schedT0), "*/5 * * * *")
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d runs started before the first tick", n)
		}
		r.clock.Advance(4*time.Minute + 29*time.Second) // 09:04:59
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d runs started a second before the tick", n)
		}
		r.clock.Advance(time.Second) // 09:05
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d runs started at the tick, want 1", n)
		}
		if n := r.fire(t); n != 0 {
			t.Fatalf("%d runs started again for the same tick", n)
		}
		r.clock.Advance(5 * time.Minute) // 09:10
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d runs started at the second tick, want 1", n)
		}
		tick1, tick2 := time.Date(2026, 5, 4, 9, 5, 0, 0, time.UTC), time.Date(2026, 5, 4, 9, 10, 0, 0, time.UTC)
		want := []string{engine.ScheduleRunID(r.key(), tick1), engine.ScheduleRunID(r.key(), tick2)}
		rs := r.runs(t)
		if got := runIDsOf(rs); !slices.Equal(got, want) {
			t.Fatalf("runs = %v, want %v (one per tick)", got, want)
		}
		run, err := r.eng.GetRun(context.Background(), rs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Data["kind"] != "weekly" || run.State != "COLLECT" {
			t.Fatalf("scheduled run: state %s, data %v", run.State, run.Data)
		}
		evs, err := r.eng.Events(context.Background(), run.ID, 0, 0)
		if err != nil || len(evs) != 1 || evs[0].Actor != engine.ActorSchedule {
			t.Fatalf("events = %+v, %v; want one created by %q", evs, err, engine.ActorSchedule)
		}
		s, err := r.eng.GetSchedule(context.Background(), r.key())
		if err != nil {
			t.Fatal(err)
		}
		if !s.Ran || !s.LastTick.Equal(tick2) || !s.NextTick.Equal(tick2.Add(5*time.Minute)) || s.Source != store.ScheduleFile {
			t.Fatalf("schedule = %+v; want last tick %s, next %s", s, tick2, tick2.Add(5*time.Minute))
		}
	})
}

// A server down for a week with a daily schedule starts one catch-up run,
// for the latest missed tick, when it comes back; not seven.
func TestScheduleCatchUpOneRun(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		place := b.New(t)
		fc := clock.NewFake(schedT0)
		st := place.Open(t)
		newSchedRig(t, st, fc, "0 9 * * *") // stores the schedule; 09:00 in Berlin: 07:00 UTC in May
		if b.Durable {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = place.Open(t)
		}
		fc.Advance(7 * 24 * time.Hour) // down for a week
		r := newSchedRig(t, st, fc, "0 9 * * *")
		loop := r.eng.StartSchedules(context.Background(), &engine.ScheduleOptions{Poll: time.Hour})
		defer loop.Stop()
		latest := time.Date(2026, 5, 11, 7, 0, 0, 0, time.UTC)
		want := []string{engine.ScheduleRunID(r.key(), latest)}
		deadline := time.Now().Add(10 * time.Second)
		for len(r.runs(t)) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // the loop's goroutine, not the clock
		}
		// The loop waits on the clock again once it has started the run.
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		loop.Stop()
		if got := runIDsOf(r.runs(t)); !slices.Equal(got, want) {
			t.Fatalf("runs after a week down = %v, want one, for the latest tick (%s): %v", got, latest, want)
		}
	})
}

// A restart within a tick's window does not start a second run for the
// tick the first process started.
func TestScheduleRestartNoSecondRun(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		if !b.Durable {
			t.Skip("the in-memory store keeps nothing across a restart")
		}
		place := b.New(t)
		fc := clock.NewFake(schedT0)
		st := place.Open(t)
		r := newSchedRig(t, st, fc, "*/5 * * * *")
		fc.Advance(4*time.Minute + 30*time.Second) // 09:05
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d runs at the tick, want 1", n)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Minute) // 09:06: restarted before the next tick
		r2 := newSchedRig(t, place.Open(t), fc, "*/5 * * * *")
		if n := r2.fire(t); n != 0 {
			t.Fatalf("the restarted server started %d runs for a tick already started", n)
		}
		if rs := r2.runs(t); len(rs) != 1 {
			t.Fatalf("%d runs after the restart, want 1", len(rs))
		}
		fc.Advance(4 * time.Minute) // 09:10
		if n := r2.fire(t); n != 1 {
			t.Fatalf("%d runs at the next tick after the restart, want 1", n)
		}
	})
}

// createCountingStore counts the runs the engine tries to create, and can let
// every caller past the compare-and-set of a schedule's tick (a store
// whose compare-and-set did not hold).
type createCountingStore struct {
	engine.Store
	creates    *atomic.Int32
	advanceAll bool
	// meet holds each compare-and-set until both replicas have read the
	// schedule, so both saw the same last tick and race for the same
	// tick (the interleaving the compare-and-set is there for).
	meet *sync.WaitGroup
}

func (s createCountingStore) CreateRun(ctx context.Context, c store.Commit) error {
	s.creates.Add(1)
	return s.Store.CreateRun(ctx, c)
}

func (s createCountingStore) AdvanceSchedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	s.meet.Done()
	s.meet.Wait()
	ok, err := s.Store.AdvanceSchedule(ctx, id, from, to)
	if s.advanceAll && err == nil {
		return true, nil
	}
	return ok, err
}

// twoReplicas fires the schedule on two engines sharing one store, at
// once, for five ticks, and returns the runs started and how many each
// tick tried to create.
func twoReplicas(t *testing.T, a, b engine.Store, advanceAll bool) (runs []store.Run, creates []int32) {
	fc := clock.NewFake(schedT0)
	var n atomic.Int32
	var meet sync.WaitGroup
	r1 := newSchedRig(t, createCountingStore{a, &n, advanceAll, &meet}, fc, "*/5 * * * *")
	r2 := newSchedRig(t, createCountingStore{b, &n, advanceAll, &meet}, fc, "*/5 * * * *")
	fc.Advance(4*time.Minute + 30*time.Second)
	for range 5 {
		n.Store(0)
		meet.Add(2)
		var wg sync.WaitGroup
		var started atomic.Int32
		for _, r := range []*schedRig{r1, r2} {
			wg.Go(func() {
				k, err := r.eng.FireDueSchedules(context.Background(), fc.Now())
				if err != nil {
					t.Error(err)
				}
				started.Add(int32(k))
			})
		}
		wg.Wait()
		if k := started.Load(); k != 1 {
			t.Fatalf("the replicas started %d runs for one tick, want 1", k)
		}
		creates = append(creates, n.Load())
		fc.Advance(5 * time.Minute)
	}
	return r1.runs(t), creates
}

// Two engines on one Postgres database: one run per tick, and only one
// replica tries to start it (the other lost the compare-and-set).
func TestScheduleTwoReplicasOneRunPerTick(t *testing.T) {
	b := backends.All()[2]
	place := b.New(t)
	runs, creates := twoReplicas(t, place.Open(t), place.Open(t), false)
	if len(runs) != 5 {
		t.Fatalf("%d runs for 5 ticks, want 5", len(runs))
	}
	if !slices.Equal(creates, []int32{1, 1, 1, 1, 1}) {
		t.Fatalf("runs created per tick = %v, want one try per tick: the replica that lost the compare-and-set starts nothing", creates)
	}
}

// Should two replicas both get past the compare-and-set, the tick's run
// id makes the second start fail: still one run per tick.
func TestScheduleRunIDRefusesASecondStart(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		if b.Name == "sqlite" {
			t.Skip("one process per SQLite file")
		}
		place := b.New(t)
		runs, creates := twoReplicas(t, place.Open(t), place.Open(t), true)
		if len(runs) != 5 {
			t.Fatalf("%d runs for 5 ticks, want 5", len(runs))
		}
		if !slices.Equal(creates, []int32{2, 2, 2, 2, 2}) {
			t.Fatalf("runs created per tick = %v, want two tries (both past the compare-and-set)", creates)
		}
	})
}

// The loop sleeps on the clock until the next tick and starts its run
// when the clock gets there.
func TestScheduleLoopWakesAtTheTick(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(schedT0)
		r := newSchedRig(t, b.New(t).Open(t), fc, "*/5 * * * *")
		loop := r.eng.StartSchedules(context.Background(), &engine.ScheduleOptions{Poll: time.Hour})
		defer loop.Stop()
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if rs := r.runs(t); len(rs) != 0 {
			t.Fatalf("%d runs before the tick", len(rs))
		}
		fc.Advance(4*time.Minute + 30*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for len(r.runs(t)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no run 10s after the clock reached the tick")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// An API schedule starts runs for the ticks after its creation only, and
// is refused with a hint when its expression, zone or workflow is wrong;
// a file schedule cannot be deleted through the API, and goes when its
// file no longer has it.
func TestScheduleAPI(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		ctx := context.Background()
		place := b.New(t)
		fc := clock.NewFake(schedT0.Add(2 * time.Minute)) // 09:02:30
		st := place.Open(t)
		r := newSchedRig(t, st, fc, "*/5 * * * *")
		for _, bad := range []struct {
			spec  engine.ScheduleSpec
			field string
		}{
			{engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "61 * * * *"}, "cron"},
			{engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "@every 1m"}, "cron"},
			{engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 9 * * *", Timezone: "Mars/Olympus"}, "timezone"},
			{engine.ScheduleSpec{WorkflowID: "nope", Cron: "0 9 * * *"}, "workflow_id"},
		} {
			_, err := r.eng.CreateSchedule(ctx, bad.spec)
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.EInvalid || pe.Fields["field"] != bad.field || pe.Hint == "" {
				t.Fatalf("CreateSchedule(%+v) = %v, want EInvalid on %s with a hint", bad.spec, err, bad.field)
			}
		}
		s, err := r.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 * * * *", Data: map[string]any{"n": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Source != store.ScheduleAPI || s.Ran || !s.NextTick.Equal(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)) {
			t.Fatalf("new schedule = %+v; want an API schedule next at 10:00, not back-filled for 09:00", s)
		}
		// The same schedule again (spaced differently, the zone named) is
		// refused, naming the first; with other data it is another one.
		_, err = r.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0  * * * *", Timezone: "UTC", Data: map[string]any{"n": 1}})
		if protocol.ErrorCode(err) != protocol.EConflict || !strings.Contains(protocol.ErrorHint(err), s.ID) {
			t.Fatalf("a duplicate schedule: %v, want EConflict naming %s", err, s.ID)
		}
		// The same ticks spelled otherwise, in another name of UTC: the
		// same schedule.
		for _, same := range []engine.ScheduleSpec{{Cron: "0 */1 * * ?"}, {Cron: "0 0-23 * * SUN-SAT", Timezone: "Etc/UTC"}, {Cron: "0 * 1-31 * 0-7"}} {
			same.WorkflowID, same.Data = "report-v1", map[string]any{"n": 1}
			if _, err := r.eng.CreateSchedule(ctx, same); protocol.ErrorCode(err) != protocol.EConflict {
				t.Fatalf("%q in %q, the ticks of %q: %v, want EConflict", same.Cron, same.Timezone, s.Cron, err)
			}
		}
		// The file's schedule again through the API: refused, naming it.
		_, err = r.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "*/5 * * * *", Timezone: "Europe/Berlin", Data: map[string]any{"kind": "weekly"}})
		if protocol.ErrorCode(err) != protocol.EConflict || !strings.Contains(protocol.ErrorHint(err), r.key()) {
			t.Fatalf("the file's schedule through the API: %v, want EConflict naming %s", err, r.key())
		}
		other, err := r.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 * * * *", Data: map[string]any{"n": 2}})
		if err != nil {
			t.Fatalf("the same cron with other data: %v", err)
		}
		if err := r.eng.DeleteSchedule(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		fc.Advance(2*time.Minute + 30*time.Second) // 09:05: the file schedule's tick only
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d runs at 09:05, want 1 (the file schedule's; the API one does not back-fill 09:00)", n)
		}
		fc.Advance(55 * time.Minute) // 10:00: both
		if n := r.fire(t); n != 2 {
			t.Fatalf("%d runs at 10:00, want 2", n)
		}
		got, err := r.eng.GetRun(ctx, engine.ScheduleRunID(s.ID, time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)))
		if err != nil || got.Data["n"] != int64(1) {
			t.Fatalf("the API schedule's run: %+v, %v", got, err)
		}
		if err := r.eng.DeleteSchedule(ctx, r.key()); protocol.ErrorCode(err) != protocol.EConflict || protocol.ErrorHint(err) == "" {
			t.Fatalf("DeleteSchedule(file schedule) = %v, want EConflict with a hint", err)
		}
		if err := r.eng.DeleteSchedule(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.GetSchedule(ctx, s.ID); protocol.ErrorCode(err) != protocol.ENotFound {
			t.Fatalf("GetSchedule after delete = %v, want ENotFound", err)
		}
		if err := r.eng.DeleteSchedule(ctx, s.ID); protocol.ErrorCode(err) != protocol.ENotFound {
			t.Fatalf("second DeleteSchedule = %v, want ENotFound", err)
		}
		// The file loses its schedule: the next start removes it.
		r2 := newSchedRig(t, st, fc, "")
		if ss, err := r2.eng.ListSchedules(ctx, "", 0); err != nil || len(ss) != 0 {
			t.Fatalf("schedules after the file dropped its own = %+v, %v; want none", ss, err)
		}
		fc.Advance(time.Hour)
		if n := r2.fire(t); n != 0 {
			t.Fatalf("%d runs started by a removed schedule", n)
		}
	})
}

// failOnceStore fails the first run creation, as a store that is briefly
// down would.
type failOnceStore struct {
	engine.Store
	failed *atomic.Bool
}

func (s failOnceStore) CreateRun(ctx context.Context, c store.Commit) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("disk unplugged")
	}
	return s.Store.CreateRun(ctx, c)
}

// A tick whose run the store failed to create is given back: the next
// look starts it, under the same id.
func TestScheduleStoreFailureGivesTheTickBack(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(schedT0)
		r := newSchedRig(t, failOnceStore{b.New(t).Open(t), new(atomic.Bool)}, fc, "*/5 * * * *")
		fc.Advance(4*time.Minute + 30*time.Second) // 09:05
		if n, err := r.eng.FireDueSchedules(context.Background(), fc.Now()); err == nil || n != 0 {
			t.Fatalf("FireDueSchedules with the store failing = %d, %v; want the error", n, err)
		}
		if s, err := r.eng.GetSchedule(context.Background(), r.key()); err != nil || s.Ran {
			t.Fatalf("schedule after the failed start = %+v, %v; want its tick given back", s, err)
		}
		fc.Advance(time.Second)
		if n := r.fire(t); n != 1 {
			t.Fatalf("%d runs on the next look, want 1", n)
		}
		tick := time.Date(2026, 5, 4, 9, 5, 0, 0, time.UTC)
		if got := runIDsOf(r.runs(t)); !slices.Equal(got, []string{engine.ScheduleRunID(r.key(), tick)}) {
			t.Fatalf("runs = %v, want the 09:05 run", got)
		}
	})
}

// A schedule created while the loop sleeps (for its poll, with nothing
// stored) wakes it: its first tick starts its run on time.
func TestScheduleCreatedWakesTheLoop(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		fc := clock.NewFake(schedT0)
		r := newSchedRig(t, b.New(t).Open(t), fc, "")
		loop := r.eng.StartSchedules(context.Background(), &engine.ScheduleOptions{Poll: time.Hour})
		defer loop.Stop()
		if err := fc.BlockUntil(context.Background(), 1); err != nil { // asleep for its poll
			t.Fatal(err)
		}
		s, err := r.eng.CreateSchedule(context.Background(), engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "*/5 * * * *"})
		if err != nil {
			t.Fatal(err)
		}
		fc.Advance(4*time.Minute + 30*time.Second) // 09:05, long before the poll ends
		want := engine.ScheduleRunID(s.ID, time.Date(2026, 5, 4, 9, 5, 0, 0, time.UTC))
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := r.eng.GetRun(context.Background(), want); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the new schedule's 09:05 run was not started: the loop slept on")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// A process that won a tick's compare-and-set and died before it started
// the run: the next look (after the restart, or of another replica)
// starts that run, once, under the tick's id; later looks read nothing
// more and start nothing more.
func TestScheduleTickOfADeadProcessIsStarted(t *testing.T) {
	backends.Each(t, func(t *testing.T, b backends.Backend) {
		place := b.New(t)
		fc := clock.NewFake(schedT0)
		st := place.Open(t)
		r := newSchedRig(t, st, fc, "*/5 * * * *")
		fc.Advance(4*time.Minute + 30*time.Second) // 09:05 is due
		s, err := st.GetSchedule(context.Background(), r.key())
		if err != nil {
			t.Fatal(err)
		}
		tick := time.Date(schedT0.Year(), schedT0.Month(), schedT0.Day(), 9, 5, 0, 0, time.UTC)
		if won, err := st.AdvanceSchedule(context.Background(), s.ID, s.LastTick, tick); err != nil || !won {
			t.Fatalf("advance: %v %v", won, err) // the dead process's write
		}
		if b.Durable {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st = place.Open(t)
		}
		r2 := newSchedRig(t, st, fc, "*/5 * * * *")
		r2.fire(t)
		r2.fire(t)
		if got, want := runIDsOf(r2.runs(t)), []string{engine.ScheduleRunID(r.key(), tick)}; !slices.Equal(got, want) {
			t.Fatalf("runs = %v, want the dead process's tick started once: %v", got, want)
		}
	})
}

// failingStartStore fails every run creation and counts them.
type failingStartStore struct {
	engine.Store
	n *atomic.Int32
}

func (s failingStartStore) CreateRun(ctx context.Context, c store.Commit) error {
	s.n.Add(1)
	return errors.New("disk unplugged")
}

// A schedule whose run the store keeps failing to create is tried again
// with a growing wait (50 ms, 100 ms, 200 ms, … up to the poll), not 20
// times a second for as long as the store fails.
func TestScheduleLoopBacksOffWhileTheStoreFails(t *testing.T) {
	fc := clock.NewFake(schedT0)
	st := failingStartStore{memstore.New(), new(atomic.Int32)}
	r := newSchedRig(t, st, fc, "*/5 * * * *")
	fc.Advance(4*time.Minute + 30*time.Second) // 09:05: due
	loop := r.eng.StartSchedules(context.Background(), &engine.ScheduleOptions{Poll: time.Hour})
	defer loop.Stop()
	for range 300 { // 3 s of the clock, 10 ms at a time
		if err := fc.BlockUntil(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(10 * time.Millisecond)
	}
	// Looks at 0, 0.1, 0.3, 0.7, 1.5 s (then 1.6 s apart): 5 or 6 in 3 s.
	if n := st.n.Load(); n < 3 || n > 7 {
		t.Fatalf("%d tries to start the run in 3 s of a failing store, want 5 or 6 (backing off)", n)
	}
}

// An API schedule stored under a larger run data limit than the server
// now has is named at start with a warning that says what to do (its
// ticks cannot start runs); one within the limit is not.
func TestSyncFileSchedulesWarnsOfAPIDataOverTheLimit(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	big, err := engine.New(st, []*workflow.Definition{reportFlow(t, "")}, &engine.Options{Clock: clock.NewFake(schedT0)})
	if err != nil {
		t.Fatal(err)
	}
	over, err := big.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 9 * * *", Data: map[string]any{"note": strings.Repeat("x", 100)}})
	if err != nil {
		t.Fatal(err)
	}
	within, err := big.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 10 * * *"})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	small, err := engine.New(st, []*workflow.Definition{reportFlow(t, "")}, &engine.Options{Clock: clock.NewFake(schedT0), MaxRunData: 50,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := small.SyncFileSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "schedule="+over.ID) || !strings.Contains(got, "--max-run-data") || !strings.Contains(got, "limit_bytes=50") || strings.Contains(got, within.ID) {
		t.Fatalf("logs at start:\n%s\nwant a warning naming %s and the limit, and nothing of %s", got, over.ID, within.ID)
	}
}

// A file schedule whose data is over the run data limit could never start
// a run (each tick would be refused): syncing refuses it, as POST
// /schedules does, naming the workflow and the limit, and stores nothing.
func TestSyncFileSchedulesRefusesDataOverTheLimit(t *testing.T) {
	st := memstore.New()
	eng, err := engine.New(st, []*workflow.Definition{reportFlow(t, "*/5 * * * *")}, &engine.Options{Clock: clock.NewFake(schedT0), MaxRunData: 10})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.SyncFileSchedules(context.Background())
	if protocol.ErrorCode(err) != protocol.ETooLarge || !strings.Contains(protocol.ErrorHint(err), "report-v1") || !strings.Contains(protocol.ErrorHint(err), "10") {
		t.Fatalf("SyncFileSchedules = %v, want too_large naming report-v1 and the limit", err)
	}
	if ss, err := st.ListSchedules(context.Background(), "", 10); err != nil || len(ss) != 0 {
		t.Fatalf("stored schedules %+v, %v; want none", ss, err)
	}
}

// A tick whose run is refused (here: the schedule's data is over the run
// data limit the server now has) starts no run and is shown as the
// schedule's last failure, with the tick and why, until a later failure
// replaces it; the tick is spent, so the next look starts nothing again.
func TestRefusedTickIsTheSchedulesLastFailure(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	big, err := engine.New(st, []*workflow.Definition{reportFlow(t, "")}, &engine.Options{Clock: clock.NewFake(schedT0)})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := big.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "report-v1", Cron: "0 10 * * *", Data: map[string]any{"note": strings.Repeat("x", 100)}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.LastFailure != (store.ScheduleFailure{}) {
		t.Fatalf("a new schedule has a failure: %+v", sc.LastFailure)
	}
	fc := clock.NewFake(schedT0)
	small, err := engine.New(st, []*workflow.Definition{reportFlow(t, "")}, &engine.Options{Clock: fc, MaxRunData: 50, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Hour) // 10:00:30: the 10:00 tick is due
	if n, err := small.FireDueSchedules(ctx, fc.Now()); err != nil || n != 0 {
		t.Fatalf("FireDueSchedules = %d, %v; want 0 runs started, no error", n, err)
	}
	tick := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	got, err := small.GetSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f := got.LastFailure; !f.Tick.Equal(tick) || !strings.Contains(f.Error, "too_large") || !strings.Contains(f.Error, "50") {
		t.Fatalf("LastFailure = %+v, want the 10:00 tick, too_large and the limit", f)
	}
	if rs, err := st.ListRuns(ctx, store.RunFilter{}); err != nil || len(rs) != 0 {
		t.Fatalf("runs = %v, %v; want none", rs, err)
	}
	if n, err := small.FireDueSchedules(ctx, fc.Now()); err != nil || n != 0 {
		t.Fatalf("a second look: %d, %v; want nothing (the tick is spent)", n, err)
	}
}
