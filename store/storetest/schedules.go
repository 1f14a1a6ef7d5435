package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/asmp-dev/asmp/store"
)

// ScheduleStore runs the suite of store.ScheduleStore against stores made
// by newStore.
func ScheduleStore(t *testing.T, newStore func(t *testing.T) store.ScheduleStore) {
	suite(t, newStore, []test[store.ScheduleStore]{
		{"SchedulePutGet", testSchedulePutGet},
		{"SchedulePutDuplicate", testSchedulePutDuplicate},
		{"ScheduleDelete", testScheduleDelete},
		{"ScheduleFileNotDeletable", testScheduleFileNotDeletable},
		{"ScheduleListPaging", testScheduleListPaging},
		{"ScheduleFileSync", testScheduleFileSync},
		{"ScheduleAdvanceCAS", testScheduleAdvanceCAS},
		{"ScheduleAdvanceOnce", testScheduleAdvanceOnce},
		{"ScheduleFailure", testScheduleFailure},
	})
}

// APISchedule returns an API schedule of workflow wf created at t0.
func APISchedule(id, wf string) store.Schedule {
	return store.Schedule{ID: id, WorkflowID: wf, Cron: "*/5 * * * *", Timezone: "Europe/Berlin", Data: json.RawMessage(`{"k":"v"}`),
		Source: store.ScheduleAPI, CreatedAt: t0, LastTick: t0}
}

func fileSchedule(id, wf string) store.Schedule {
	s := APISchedule(id, wf)
	s.Source, s.Timezone, s.Data = store.ScheduleFile, "", nil
	return s
}

func mustGetSchedule(t *testing.T, s store.ScheduleStore, id string) store.Schedule {
	t.Helper()
	got, err := s.GetSchedule(ctx(), id)
	if err != nil {
		t.Fatalf("GetSchedule(%s): %v", id, err)
	}
	return got
}

func scheduleIDs(t *testing.T, s store.ScheduleStore) []string {
	t.Helper()
	ss, err := s.ListSchedules(ctx(), "", 0)
	if err != nil {
		t.Fatalf("ListSchedules: %v", err)
	}
	out := []string{}
	for _, sc := range ss {
		out = append(out, sc.ID)
	}
	return out
}

func testSchedulePutGet(t *testing.T, s store.ScheduleStore) {
	want := APISchedule("s1", "wf")
	want.CreatedAt = t0.Add(1234567 * time.Nanosecond) // kept to the microsecond
	want.LastTick = want.CreatedAt
	if err := s.PutSchedule(ctx(), want); err != nil {
		t.Fatal(err)
	}
	got := mustGetSchedule(t, s, "s1")
	want.CreatedAt = t0.Add(1234 * time.Microsecond)
	want.LastTick = want.CreatedAt
	var gd, wd any
	_ = json.Unmarshal(got.Data, &gd)
	_ = json.Unmarshal(want.Data, &wd)
	if !reflect.DeepEqual(gd, wd) {
		t.Fatalf("data = %s, want %s", got.Data, want.Data)
	}
	got.Data, want.Data = nil, nil
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.LastTick.Equal(want.LastTick) {
		t.Fatalf("times = %v, %v; want %v", got.CreatedAt, got.LastTick, want.CreatedAt)
	}
	got.CreatedAt, got.LastTick, want.CreatedAt, want.LastTick = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetSchedule = %+v, want %+v", got, want)
	}
	// No data is stored as {}.
	f := fileSchedule("s2", "wf")
	if err := s.PutSchedule(ctx(), f); err != nil {
		t.Fatal(err)
	}
	if d := mustGetSchedule(t, s, "s2").Data; string(d) != `{}` {
		t.Fatalf("data of a schedule without = %q, want {}", d)
	}
	if _, err := s.GetSchedule(ctx(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSchedule(unknown) = %v, want ErrNotFound", err)
	}
}

func testSchedulePutDuplicate(t *testing.T, s store.ScheduleStore) {
	if err := s.PutSchedule(ctx(), APISchedule("s1", "wf")); err != nil {
		t.Fatal(err)
	}
	other := APISchedule("s1", "other")
	if err := s.PutSchedule(ctx(), other); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second PutSchedule = %v, want ErrExists", err)
	}
	if got := mustGetSchedule(t, s, "s1"); got.WorkflowID != "wf" {
		t.Fatalf("the duplicate replaced the schedule: %+v", got)
	}
}

func testScheduleDelete(t *testing.T, s store.ScheduleStore) {
	for _, id := range []string{"a", "b"} {
		if err := s.PutSchedule(ctx(), APISchedule(id, "wf")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSchedule(ctx(), "a"); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	if _, err := s.GetSchedule(ctx(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSchedule after delete = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSchedule(ctx(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteSchedule = %v, want ErrNotFound", err)
	}
	if got := scheduleIDs(t, s); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("schedules = %v, want [b]", got)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "a", t0, t0.Add(time.Minute)); err != nil || ok {
		t.Fatalf("AdvanceSchedule of a deleted schedule = %v, %v; want false", ok, err)
	}
}

func testScheduleFileNotDeletable(t *testing.T, s store.ScheduleStore) {
	if err := s.PutFileSchedules(ctx(), []string{"wf"}, []store.Schedule{fileSchedule("f", "wf")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSchedule(ctx(), "f"); !errors.Is(err, store.ErrFileSchedule) {
		t.Fatalf("DeleteSchedule(file schedule) = %v, want ErrFileSchedule", err)
	}
	if got := mustGetSchedule(t, s, "f"); got.Source != store.ScheduleFile {
		t.Fatalf("file schedule = %+v", got)
	}
}

func testScheduleListPaging(t *testing.T, s store.ScheduleStore) {
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("s%02d", 6-i) // stored out of order
		want = append([]string{id}, want...)
		if err := s.PutSchedule(ctx(), APISchedule(id, "wf")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after, pages := "", 0
	for {
		page, err := s.ListSchedules(ctx(), after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d, want at most 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		pages++
		for _, sc := range page {
			got = append(got, sc.ID)
		}
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(got, want) || pages != 3 {
		t.Fatalf("paged = %v in %d pages, want %v in 3", got, pages, want)
	}
	if all := scheduleIDs(t, s); !reflect.DeepEqual(all, want) {
		t.Fatalf("limit 0 = %v, want %v", all, want)
	}
}

func testScheduleFileSync(t *testing.T, s store.ScheduleStore) {
	if err := s.PutSchedule(ctx(), APISchedule("api", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFileSchedules(ctx(), []string{"a", "b"}, []store.Schedule{fileSchedule("a1", "a"), fileSchedule("a2", "a"), fileSchedule("b1", "b")}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "a1", t0, t0.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("AdvanceSchedule = %v, %v", ok, err)
	}
	// A restart with a1 kept (its last tick too), a2 gone from the file,
	// a3 new; b not served by this process: its schedules stay.
	a1 := fileSchedule("a1", "a")
	a1.CreatedAt, a1.LastTick = t0.Add(24*time.Hour), t0.Add(24*time.Hour)
	a3 := fileSchedule("a3", "a")
	if err := s.PutFileSchedules(ctx(), []string{"a"}, []store.Schedule{a1, a3}); err != nil {
		t.Fatal(err)
	}
	if got := scheduleIDs(t, s); !reflect.DeepEqual(got, []string{"a1", "a3", "api", "b1"}) {
		t.Fatalf("schedules = %v, want [a1 a3 api b1]", got)
	}
	if got := mustGetSchedule(t, s, "a1"); !got.LastTick.Equal(t0.Add(time.Hour)) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("a1 after the restart: created %v, last tick %v; want it kept (%v, %v)", got.CreatedAt, got.LastTick, t0, t0.Add(time.Hour))
	}
	// A file with no schedules left removes them all (of its workflow).
	if err := s.PutFileSchedules(ctx(), []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := scheduleIDs(t, s); !reflect.DeepEqual(got, []string{"api", "b1"}) {
		t.Fatalf("schedules = %v, want [api b1]", got)
	}
	// An API schedule is not a file schedule, and a file schedule must be
	// of one of the workflows given; either refuses the whole call.
	if err := s.PutFileSchedules(ctx(), []string{"a"}, []store.Schedule{fileSchedule("a4", "a"), APISchedule("x", "a")}); err == nil {
		t.Fatal("PutFileSchedules took an API schedule")
	}
	if err := s.PutFileSchedules(ctx(), []string{"a"}, []store.Schedule{fileSchedule("a4", "a"), fileSchedule("c1", "c")}); err == nil {
		t.Fatal("PutFileSchedules took a schedule of a workflow it was not given")
	}
	if got := scheduleIDs(t, s); !reflect.DeepEqual(got, []string{"api", "b1"}) {
		t.Fatalf("schedules after refused calls = %v, want [api b1]", got)
	}
}

func testScheduleAdvanceCAS(t *testing.T, s store.ScheduleStore) {
	if err := s.PutSchedule(ctx(), APISchedule("s", "wf")); err != nil {
		t.Fatal(err)
	}
	t1, t2 := t0.Add(5*time.Minute), t0.Add(10*time.Minute)
	if ok, err := s.AdvanceSchedule(ctx(), "s", t1, t2); err != nil || ok {
		t.Fatalf("AdvanceSchedule from a tick that is not the last = %v, %v; want false", ok, err)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "s", t0, t1); err != nil || !ok {
		t.Fatalf("AdvanceSchedule = %v, %v; want true", ok, err)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "s", t0, t2); err != nil || ok {
		t.Fatalf("AdvanceSchedule from the old tick = %v, %v; want false", ok, err)
	}
	if got := mustGetSchedule(t, s, "s"); !got.LastTick.Equal(t1) {
		t.Fatalf("last tick = %v, want %v", got.LastTick, t1)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "nope", t0, t1); err != nil || ok {
		t.Fatalf("AdvanceSchedule(unknown) = %v, %v; want false", ok, err)
	}
}

// testScheduleAdvanceOnce: of many concurrent callers advancing the same
// tick, exactly one wins, tick after tick.
func testScheduleAdvanceOnce(t *testing.T, s store.ScheduleStore) {
	if err := s.PutSchedule(ctx(), APISchedule("s", "wf")); err != nil {
		t.Fatal(err)
	}
	const callers, ticks = 8, 5
	last := t0
	for i := 1; i <= ticks; i++ {
		next := t0.Add(time.Duration(i) * 5 * time.Minute)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				ok, err := s.AdvanceSchedule(ctx(), "s", last, next)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("tick %d: %d callers won the compare-and-set, want 1", i, n)
		}
		last = next
	}
}

// A schedule's last failure is stored as given (its error cut to
// store.MaxScheduleError bytes at a UTF-8 boundary), read back by Get and
// List, replaced by the next one, untouched by AdvanceSchedule and kept by
// PutFileSchedules; a failure of a schedule that is gone stores nothing.
func testScheduleFailure(t *testing.T, s store.ScheduleStore) {
	if err := s.PutSchedule(ctx(), APISchedule("api", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFileSchedules(ctx(), []string{"a"}, []store.Schedule{fileSchedule("file", "a")}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetSchedule(t, s, "api"); got.LastFailure != (store.ScheduleFailure{}) {
		t.Fatalf("a new schedule has a failure: %+v", got.LastFailure)
	}
	tick := t0.Add(5*time.Minute + 1234*time.Nanosecond)
	if err := s.FailSchedule(ctx(), "api", store.ScheduleFailure{Tick: tick, Error: "run data too large"}); err != nil {
		t.Fatal(err)
	}
	want := store.ScheduleFailure{Tick: store.ScheduleTime(tick), Error: "run data too large"}
	if got := mustGetSchedule(t, s, "api").LastFailure; !got.Tick.Equal(want.Tick) || got.Error != want.Error {
		t.Fatalf("LastFailure = %+v, want %+v", got, want)
	}
	if ok, err := s.AdvanceSchedule(ctx(), "api", t0, t0.Add(10*time.Minute)); err != nil || !ok {
		t.Fatalf("AdvanceSchedule = %v, %v", ok, err)
	}
	ss, err := s.ListSchedules(ctx(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range ss {
		if sc.ID == "api" && (!sc.LastFailure.Tick.Equal(want.Tick) || sc.LastFailure.Error != want.Error) {
			t.Fatalf("listed after an advance: LastFailure = %+v, want %+v", sc.LastFailure, want)
		}
	}

	// A longer error is cut, never inside a character; an earlier tick
	// replaces a later one (the latest failure recorded wins).
	long := strings.Repeat("é", store.MaxScheduleError) // 2 bytes each
	if err := s.FailSchedule(ctx(), "api", store.ScheduleFailure{Tick: t0, Error: "x" + long}); err != nil {
		t.Fatal(err)
	}
	got := mustGetSchedule(t, s, "api").LastFailure
	if len(got.Error) > store.MaxScheduleError || len(got.Error) < store.MaxScheduleError-1 || !utf8.ValidString(got.Error) || !strings.HasPrefix("x"+long, got.Error) || !got.Tick.Equal(t0) {
		t.Fatalf("a long failure was stored as %d bytes (valid UTF-8 %v) at %v; want a prefix of at most %d bytes at %v",
			len(got.Error), utf8.ValidString(got.Error), got.Tick, store.MaxScheduleError, t0)
	}

	// A file schedule keeps its failure across a restart's PutFileSchedules.
	if err := s.FailSchedule(ctx(), "file", store.ScheduleFailure{Tick: tick, Error: "workflow gone"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFileSchedules(ctx(), []string{"a"}, []store.Schedule{fileSchedule("file", "a")}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetSchedule(t, s, "file").LastFailure; got.Error != "workflow gone" {
		t.Fatalf("after a restart the file schedule's failure is %+v", got)
	}
	if err := s.FailSchedule(ctx(), "gone", store.ScheduleFailure{Tick: tick, Error: "x"}); err != nil {
		t.Fatalf("FailSchedule of a schedule that is gone: %v", err)
	}
	if _, err := s.GetSchedule(ctx(), "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FailSchedule created a schedule: %v", err)
	}
}
