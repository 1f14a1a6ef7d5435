package workflow_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/workflow"
)

const scheduleYAML = `workflow_id: report-v1
initial_state: WRITE
schedules:
  - {cron: "0 9 * * MON", timezone: Europe/Berlin, data: {kind: weekly, top: 10}}
  - {cron: "@daily"}
states:
  WRITE: {}
  DONE: {}
transitions:
  - {from: WRITE, action: done, to: DONE}
`

func loadSchedules(t *testing.T) []*workflow.Schedule {
	t.Helper()
	d, err := workflow.Load("report.yaml", []byte(scheduleYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.Schedules
}

func TestSchedulesLoad(t *testing.T) {
	ss := loadSchedules(t)
	if len(ss) != 2 || ss[0].Cron != "0 9 * * MON" || ss[0].Timezone != "Europe/Berlin" || ss[1].Timezone != "" {
		t.Fatalf("schedules = %+v", ss)
	}
	if want := map[string]any{"kind": "weekly", "top": int64(10)}; !reflect.DeepEqual(ss[0].Data, want) {
		t.Errorf("data = %#v, want %#v", ss[0].Data, want)
	}
	if ss[0].Location().String() != "Europe/Berlin" || ss[1].Location() != time.UTC {
		t.Errorf("locations %v, %v", ss[0].Location(), ss[1].Location())
	}
	// Schedules start runs; they are not how a run goes, so not part of
	// the version.
	d, _ := workflow.Load("report.yaml", []byte(scheduleYAML), nil)
	bare, err := workflow.Load("report.yaml", []byte(strings.Replace(scheduleYAML, `  - {cron: "0 9 * * MON", timezone: Europe/Berlin, data: {kind: weekly, top: 10}}
  - {cron: "@daily"}
`, "  []\n", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != bare.Version() || strings.Contains(string(d.Canonical()), "schedule") {
		t.Error("schedules changed the version")
	}
	// The builder gives the same.
	b := workflow.New("report-v1", "WRITE").Schedule(workflow.Schedule{Cron: "0 9 * * MON", Timezone: "Europe/Berlin", Data: map[string]any{"kind": "weekly", "top": 10}})
	b.State("WRITE")
	b.State("DONE")
	b.Transition("WRITE", "done", "DONE")
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Schedules[0].Data, ss[0].Data) || g.Schedules[0].Location().String() != "Europe/Berlin" {
		t.Errorf("builder schedule = %+v", g.Schedules[0])
	}
}

func TestScheduleNextFollowsTheTimeZone(t *testing.T) {
	weekly := loadSchedules(t)[0]
	for _, tc := range []struct{ after, want time.Time }{
		// Winter: Berlin is UTC+1, so Monday 09:00 there is 08:00 UTC.
		{time.Date(2026, 1, 7, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 12, 8, 0, 0, 0, time.UTC)},
		// Summer: UTC+2.
		{time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 6, 7, 0, 0, 0, time.UTC)},
		// Strictly after: at a tick, the next is a week on.
		{time.Date(2026, 1, 12, 8, 0, 0, 0, time.UTC), time.Date(2026, 1, 19, 8, 0, 0, 0, time.UTC)},
	} {
		if got := weekly.Next(tc.after); !got.Equal(tc.want) {
			t.Errorf("Next(%v) = %v, want %v", tc.after, got, tc.want)
		}
	}
	leap := &workflow.Schedule{Cron: "0 0 29 2 *"}
	if _, err := leap.Check(); err != nil {
		t.Errorf("29 February: %v, want it accepted (it comes every four years)", err)
	}
	never := &workflow.Schedule{Cron: "0 0 30 2 *"}
	if got := never.Next(time.Now()); !got.IsZero() {
		t.Errorf("30 February: Next = %v, want zero", got)
	}
}

func TestScheduleMissedReturnsTheLatestMissedTick(t *testing.T) {
	daily := &workflow.Schedule{Cron: "0 9 * * *"}
	mon9 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	// Down from Monday's tick to Thursday 10:00: one catch-up run, for
	// Thursday's tick.
	if got, ok := daily.Missed(mon9, time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC)); !ok || !got.Equal(time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("Missed = %v %v, want Thursday 09:00", got, ok)
	}
	// Nothing missed before the next tick; a tick exactly at now counts.
	if got, ok := daily.Missed(mon9, mon9.Add(23*time.Hour)); ok {
		t.Errorf("Missed before the next tick = %v", got)
	}
	if got, ok := daily.Missed(mon9, mon9.Add(24*time.Hour)); !ok || !got.Equal(mon9.Add(24*time.Hour)) {
		t.Errorf("Missed at the tick = %v %v", got, ok)
	}
	if _, ok := daily.Missed(mon9, mon9); ok {
		t.Error("Missed of an empty interval")
	}
	if _, ok := daily.Missed(mon9, mon9.Add(-time.Hour)); ok {
		t.Error("Missed with now before last")
	}
	// A year down with a tick a minute: the latest minute, without
	// walking half a million ticks.
	minutely := &workflow.Schedule{Cron: "* * * * *"}
	now := time.Date(2027, 3, 2, 9, 17, 42, 0, time.UTC)
	if got, ok := minutely.Missed(mon9, now); !ok || !got.Equal(time.Date(2027, 3, 2, 9, 17, 0, 0, time.UTC)) {
		t.Errorf("minutely Missed = %v %v", got, ok)
	}
	// Against walking every tick, for uneven schedules and windows.
	day := 24 * time.Hour
	for expr, longest := range map[string]time.Duration{
		"0 9 * * MON": 3 * 365 * day, "30 2 1 * *": 3 * 365 * day, "0 0 29 2 *": 9 * 365 * day,
		"*/7 9-11 * * *": 60 * day, "15 * * * *": 60 * day,
	} {
		s := &workflow.Schedule{Cron: expr, Timezone: "America/New_York"}
		last := time.Date(2025, 12, 30, 23, 59, 0, 0, time.UTC)
		for _, span := range []time.Duration{time.Minute, 90 * time.Minute, 26 * time.Hour, 9 * day, 60 * day, 400 * day, longest} {
			if span > longest {
				continue
			}
			now := last.Add(span)
			var want time.Time
			for t := s.Next(last); !t.IsZero() && !t.After(now); t = s.Next(t) {
				want = t
			}
			got, ok := s.Missed(last, now)
			if ok != !want.IsZero() || !got.Equal(want) {
				t.Errorf("%q over %v: Missed = %v %v, want %v", expr, span, got, ok, want)
			}
		}
	}
}

func TestScheduleProblems(t *testing.T) {
	src := func(sched string) string {
		return strings.Replace(scheduleYAML, `{cron: "0 9 * * MON", timezone: Europe/Berlin, data: {kind: weekly, top: 10}}`, sched, 1)
	}
	for name, tc := range map[string]struct{ sched, want string }{
		"no cron":      {`{timezone: UTC}`, `schedules[0].cron: a schedule needs a cron expression`},
		"bad cron":     {`{cron: "61 * * * *"}`, `schedules[0].cron: "61 * * * *" is not a cron expression`},
		"six fields":   {`{cron: "0 0 9 * * MON"}`, `schedules[0].cron: "0 0 9 * * MON" is not a cron expression`},
		"zone in cron": {`{cron: "CRON_TZ=Europe/Berlin 0 9 * * *"}`, `schedules[0].cron: give the time zone as timezone:`},
		"every":        {`{cron: "@every 1h"}`, `schedules[0].cron: @every is not supported`},
		"unknown zone": {`{cron: "0 9 * * *", timezone: Europe/Atlantis}`, `schedules[0].timezone: unknown time zone "Europe/Atlantis"`},
		"local zone":   {`{cron: "0 9 * * *", timezone: Local}`, `schedules[0].timezone: timezone Local depends on the host`},
		"30 February":  {`{cron: "0 0 30 2 *"}`, `schedules[0].cron: "0 0 30 2 *" never fires`},
		"31 April":     {`{cron: "0 0 31 4 *"}`, `schedules[0].cron: "0 0 31 4 *" never fires`},
		"too long":     {`{cron: "0 0 1` + strings.Repeat(",1", 200) + ` * *"}`, `schedules[0].cron: the cron expression is 409 bytes, over 256`},
	} {
		wantProblem(t, name, src(tc.sched), tc.want)
	}
	b := workflow.New("report-v1", "WRITE").Schedule(workflow.Schedule{Cron: "0 9 * * *", Timezone: "Mars/Olympus"})
	b.State("WRITE")
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), `schedules[0].timezone: unknown time zone "Mars/Olympus"`) {
		t.Errorf("builder schedule: %v", err)
	}
}

// Key names a schedule the same on every replica that loads the same
// file, and differently when anything about it changes.
func TestScheduleKey(t *testing.T) {
	ss := loadSchedules(t)
	again := loadSchedules(t)
	if ss[0].Key() == "" || ss[0].Key() != again[0].Key() || ss[0].Key() == ss[1].Key() {
		t.Fatalf("keys %q %q %q", ss[0].Key(), again[0].Key(), ss[1].Key())
	}
	if !strings.HasPrefix(ss[0].Key(), "sched:") {
		t.Errorf("key %q", ss[0].Key())
	}
	// The same schedule from the builder, data keys in another order.
	b := workflow.New("report-v1", "WRITE").Schedule(workflow.Schedule{Cron: "0 9 * * MON", Timezone: "Europe/Berlin", Data: map[string]any{"top": 10, "kind": "weekly"}})
	b.State("WRITE")
	b.State("DONE")
	b.Transition("WRITE", "done", "DONE")
	if g := b.MustBuild(); g.Schedules[0].Key() != ss[0].Key() {
		t.Error("file and builder name one schedule differently")
	}
	for name, edit := range map[string][2]string{
		"workflow": {"workflow_id: report-v1", "workflow_id: report-v2"},
		"cron":     {`"0 9 * * MON"`, `"0 10 * * MON"`},
		"timezone": {"Europe/Berlin", "Europe/Paris"},
		"data":     {"top: 10", "top: 11"},
	} {
		d, err := workflow.Load("report.yaml", []byte(strings.Replace(scheduleYAML, edit[0], edit[1], 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Schedules[0].Key() == ss[0].Key() {
			t.Errorf("changing the %s kept the key", name)
		}
	}
	// Two identical schedules would be one.
	wantProblem(t, "duplicate", strings.Replace(scheduleYAML, `  - {cron: "@daily"}`, `  - {cron: "@daily"}
  - {cron: " @daily ", timezone: UTC}`, 1), `schedules[2]: schedule is the same as schedules[1]`)
	if _, err := workflow.Load("report.yaml", []byte(strings.Replace(scheduleYAML, `  - {cron: "@daily"}`, `  - {cron: "@daily"}
  - {cron: "@daily", data: {kind: second}}`, 1)), nil); err != nil {
		t.Errorf("two schedules with different data: %v", err)
	}
	// Two schedules that differ only in unknown time zones are each wrong
	// for their zone, not the same schedule (an unknown zone is not UTC).
	_, err := workflow.Load("report.yaml", []byte(strings.Replace(scheduleYAML, `  - {cron: "@daily"}`, `  - {cron: "@daily", timezone: Mars/Olympus}
  - {cron: "@daily", timezone: Moon/Tycho}`, 1)), nil)
	if err == nil || !strings.Contains(err.Error(), "Moon/Tycho") || strings.Contains(err.Error(), "the same as") {
		t.Errorf("two schedules in two unknown zones: %v, want each zone refused and no duplicate", err)
	}
}

// ticks returns n ticks of s after from, as wall-clock times in s's zone.
func ticks(s *workflow.Schedule, from time.Time, n int) []string {
	var out []string
	for range n {
		from = s.Next(from)
		out = append(out, from.In(s.Location()).Format("01-02 15:04 MST"))
	}
	return out
}

// Daylight saving time as cron does it: a tick in the hour that does not
// exist fires when the clocks have jumped, once; a wall-clock time that
// happens twice gives one tick, unless the schedule fires every hour.
func TestScheduleNextAcrossDaylightSaving(t *testing.T) {
	spring := time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC)  // Berlin: 28 March 02:00 CET -> 03:00 CEST
	autumn := time.Date(2027, 10, 30, 12, 0, 0, 0, time.UTC) // 31 October 03:00 CEST -> 02:00 CET
	for _, tc := range []struct {
		cron, zone string
		from       time.Time
		want       string
	}{
		{"30 2 * * *", "Europe/Berlin", spring, "03-28 03:00 CEST|03-29 02:30 CEST|03-30 02:30 CEST"},
		{"0 2 * * *", "Europe/Berlin", spring, "03-28 03:00 CEST|03-29 02:00 CEST|03-30 02:00 CEST"},
		{"*/20 2 * * *", "Europe/Berlin", spring, "03-28 03:00 CEST|03-29 02:00 CEST|03-29 02:20 CEST"},
		{"30 1 * * *", "Europe/Berlin", spring, "03-28 01:30 CET|03-29 01:30 CEST|03-30 01:30 CEST"},
		{"30 2 * * SUN", "Europe/Berlin", spring, "03-28 03:00 CEST|04-04 02:30 CEST|04-11 02:30 CEST"},
		{"0 * * * *", "Europe/Berlin", time.Date(2027, 3, 27, 23, 30, 0, 0, time.UTC), "03-28 01:00 CET|03-28 03:00 CEST|03-28 04:00 CEST"},
		{"30 2 * * *", "Europe/Berlin", autumn, "10-31 02:30 CEST|11-01 02:30 CET|11-02 02:30 CET"},
		{"*/20 2 * * *", "Europe/Berlin", autumn, "10-31 02:00 CEST|10-31 02:20 CEST|10-31 02:40 CEST|11-01 02:00 CET"},
		{"0 * * * *", "Europe/Berlin", time.Date(2027, 10, 30, 23, 30, 0, 0, time.UTC), "10-31 02:00 CEST|10-31 02:00 CET|10-31 03:00 CET"},
		{"30 2 * * *", "America/New_York", time.Date(2027, 3, 13, 12, 0, 0, 0, time.UTC), "03-14 03:00 EDT|03-15 02:30 EDT|03-16 02:30 EDT"},
		{"30 1 * * *", "America/New_York", time.Date(2027, 11, 6, 12, 0, 0, 0, time.UTC), "11-07 01:30 EDT|11-08 01:30 EST|11-09 01:30 EST"},
		// Lord Howe Island shifts by half an hour (02:00 -> 02:30).
		{"15 2 * * *", "Australia/Lord_Howe", time.Date(2027, 10, 2, 0, 0, 0, 0, time.UTC), "10-03 02:30 +11|10-04 02:15 +11|10-05 02:15 +11"},
	} {
		s := &workflow.Schedule{Cron: tc.cron, Timezone: tc.zone}
		if _, err := s.Check(); err != nil {
			t.Fatal(err)
		}
		want := strings.Split(tc.want, "|")
		if got := ticks(s, tc.from, len(want)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s in %s after %v:\n got %q\nwant %q", tc.cron, tc.zone, tc.from, got, want)
		}
	}
	// The catch-up of a server down over the repeated hour starts the
	// run of the first 02:30, not a second one.
	daily := &workflow.Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}
	if got, ok := daily.Missed(autumn, time.Date(2027, 10, 31, 1, 45, 0, 0, time.UTC)); !ok || !got.Equal(time.Date(2027, 10, 31, 0, 30, 0, 0, time.UTC)) {
		t.Errorf("Missed over the repeated hour = %v %v, want 02:30 CEST (00:30 UTC)", got, ok)
	}
}

// KeyFor compares ticks, not text: the spellings of one set of ticks in
// one zone (UTC under any of its names) are one schedule; changing a tick,
// the zone or the data makes another. Days follow cron's rule: with
// neither day field *, a day matching either counts.
func TestScheduleKeyForComparesTicks(t *testing.T) {
	key := func(cron, tz string, data map[string]any) string {
		t.Helper()
		s := &workflow.Schedule{Cron: cron, Timezone: tz, Data: data}
		if _, err := s.Check(); err != nil {
			t.Fatalf("%q in %q: %v", cron, tz, err)
		}
		k, err := s.KeyFor("report-v1")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key("0 0 * * *", "", nil)
	for _, same := range [][2]string{{"@daily", ""}, {"@midnight", ""}, {"0 0 ? * *", ""}, {"0 0 * * SUN-SAT", ""}, {"0 0 * * 0-6", "UTC"},
		{"0 0 * * *", "Etc/UTC"}, {"0 0 * * *", "Zulu"}, {"00 00 * * *", ""}, {"0 0 1-31 * *", ""}, {"0 0 1-31 * MON", ""}, {"0 0 * 1-12 *", ""}, {"0 0 * * 1-7", ""}} {
		if got := key(same[0], same[1], nil); got != base {
			t.Errorf("%q in %q is not the same schedule as \"0 0 * * *\" in UTC", same[0], same[1])
		}
	}
	for _, other := range [][2]string{{"0 1 * * *", ""}, {"0 0 * * MON", ""}, {"0 0 13 * *", ""}, {"0 0 13 * FRI", ""}, {"0 0 * 1-11 *", ""},
		{"0 0 * * *", "Europe/London"}, {"*/30 0 * * *", ""}} {
		if got := key(other[0], other[1], nil); got == base {
			t.Errorf("%q in %q is taken for the same schedule as \"0 0 * * *\" in UTC", other[0], other[1])
		}
	}
	if key("0 0 13 * FRI", "", nil) == key("0 0 13 * *", "", nil) || key("0 0 13 * FRI", "", nil) == key("0 0 * * FRI", "", nil) {
		t.Error("13th-or-Friday is taken for the 13th or for Fridays")
	}
	if key("0 0 * * *", "", map[string]any{"k": 1}) == base {
		t.Error("other data is taken for the same schedule")
	}
	// In a file: "@daily" beside "0 0 * * *" is a duplicate.
	wantProblem(t, "duplicate ticks", strings.Replace(scheduleYAML, `  - {cron: "@daily"}`, `  - {cron: "@daily"}
  - {cron: "0 0 * * SUN-SAT", timezone: Etc/UTC}`, 1), `schedules[2]: schedule is the same as schedules[1]`)
}

// 7 in the day-of-week field is Sunday, as in Vixie cron and cronie.
func TestScheduleDayOfWeekSevenIsSunday(t *testing.T) {
	from := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // a Wednesday
	for cron, want := range map[string][]string{
		"0 9 * * 7":     {"12-06 09:00 UTC", "12-13 09:00 UTC"},
		"0 9 * * 5-7":   {"12-04 09:00 UTC", "12-05 09:00 UTC", "12-06 09:00 UTC", "12-11 09:00 UTC"},
		"0 9 * * 1-7/3": {"12-03 09:00 UTC", "12-06 09:00 UTC", "12-07 09:00 UTC"},
		"0 9 * * 3,7":   {"12-06 09:00 UTC", "12-09 09:00 UTC"},
	} {
		s := &workflow.Schedule{Cron: cron}
		if _, err := s.Check(); err != nil {
			t.Errorf("%q: %v", cron, err)
			continue
		}
		if got := ticks(s, from, len(want)); strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%q: ticks %v, want %v", cron, got, want)
		}
	}
	if _, err := (&workflow.Schedule{Cron: "0 9 * * 8"}).Check(); err == nil {
		t.Error("day-of-week 8 was accepted")
	}
}

// A zone whose clocks move by half an hour (Australia/Lord_Howe) keeps
// every day's ticks: on the day they go back (02:00 +11 → 01:30 +10:30)
// 02:00 and 03:00 happen once and fire, 01:45 (twice) fires once; on the
// day they go forward (02:00 +10:30 → 02:30 +11) 02:15, in the gap,
// fires at its end, once, and 03:00 fires.
func TestScheduleNextAcrossAHalfHourShift(t *testing.T) {
	for _, tc := range []struct {
		cron string
		from time.Time
		want []string
	}{
		{"0 2 * * *", time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC), []string{"04-04 02:00 +1100", "04-05 02:00 +1030", "04-06 02:00 +1030"}},
		{"0 3 * * *", time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC), []string{"04-04 03:00 +1100", "04-05 03:00 +1030", "04-06 03:00 +1030"}},
		{"45 1 * * *", time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC), []string{"04-04 01:45 +1100", "04-05 01:45 +1100", "04-06 01:45 +1030"}},
		{"15 2 * * *", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC), []string{"10-03 02:15 +1030", "10-04 02:30 +1100", "10-05 02:15 +1100"}},
		{"0 3 * * *", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC), []string{"10-03 03:00 +1030", "10-04 03:00 +1100", "10-05 03:00 +1100"}},
	} {
		s := &workflow.Schedule{Cron: tc.cron, Timezone: "Australia/Lord_Howe"}
		if _, err := s.Check(); err != nil {
			t.Fatal(err)
		}
		var got []string
		from := tc.from
		for range tc.want {
			from = s.Next(from)
			got = append(got, from.In(s.Location()).Format("01-02 15:04 -0700"))
		}
		if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
			t.Errorf("%q from %s: %v, want %v", tc.cron, tc.from.Format(time.DateOnly), got, tc.want)
		}
	}
}
