package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a host without a zone database (a minimal container) still resolves time zones; a host's own comes first

	"github.com/gowebpki/jcs"
	"github.com/robfig/cron/v3"
)

// Schedule starts a run of its workflow at every tick of a cron
// expression, in a time zone, with Data as the run's initial data.
//
// Schedules are not part of the workflow's version: they decide when runs
// start, not how a run goes, so changing one makes no new version.
type Schedule struct {
	// Cron is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week, e.g. "0 9 * * MON") or a descriptor
	// (@yearly, @monthly, @weekly, @daily, @hourly).
	Cron string
	// Timezone is an IANA time zone name (e.g. Europe/Berlin) the
	// expression is read in; "" means UTC.
	Timezone string
	// Data is the initial data of each run it starts (JSON values).
	Data map[string]any

	spec *cron.SpecSchedule
	key  string
}

// Key identifies the schedule among all schedules of all workflows:
// "sched:" + a hash of its workflow's id, cron expression, time zone and
// data (spaces in the expression and "" or "UTC" for the zone do not
// count), so every replica that serves the same file names it the same (a
// store can record its last tick under it). Editing any of them makes a
// new schedule. Set by validation ("" before).
func (s *Schedule) Key() string { return s.key }

// KeyFor returns what makes the schedule a duplicate of another of
// workflow id: two schedules start the same runs at the same instants
// exactly when their KeyFor values are equal. It compares the ticks, not
// the text: "@daily", "0 0 * * *", "0 0 ? * *" and "0 0 * * SUN-SAT" are
// one schedule, and so are the zones UTC, Etc/UTC and their other aliases
// (other zones compare by name); and the data, as JSON values. Check it
// first.
func (s *Schedule) KeyFor(id string) (string, error) { return duplicateKey(id, s) }

// duplicateKey is KeyFor's value: a hash of the workflow's id, the ticks
// (each field's set of values; the days as the day-of-month and
// day-of-week fields select them together) and the zone, and the data.
func duplicateKey(id string, s *Schedule) (string, error) {
	if s.spec == nil {
		if _, err := s.compile(); err != nil {
			return "", err
		}
	}
	return hashKey("ticks:", map[string]any{"workflow_id": id, "ticks": ticksOf(s.spec), "timezone": zoneName(s.Location()), "data": s.Data})
}

// hashKey is prefix and a hash of v's RFC 8785 canonical JSON.
func hashKey(prefix string, v map[string]any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return prefix + hex.EncodeToString(sum[:16]), nil
}

// ticksOf describes the instants spec fires at, the same for every
// spelling of them. robfig/cron marks a * field with a star bit; it picks
// days by day-of-month AND day-of-week when either is *, and by either OR
// the other when neither is (as Vixie cron does).
func ticksOf(spec *cron.SpecSchedule) string {
	const star = uint64(1) << 63
	bits := func(lo, hi uint) uint64 { return (^uint64(0) >> (63 - hi)) &^ (uint64(1)<<lo - 1) }
	allDom, allDow := bits(1, 31), bits(0, 6)
	dom, dow := spec.Dom&^star, spec.Dow&^star
	var days string
	switch {
	case spec.Dom&star != 0 && spec.Dow&star != 0:
		days = "every day"
	case spec.Dom&star != 0:
		days = fmt.Sprintf("dow %x", dow)
	case spec.Dow&star != 0:
		days = fmt.Sprintf("dom %x", dom)
	default:
		days = fmt.Sprintf("dom %x or dow %x", dom, dow)
	}
	switch days {
	case fmt.Sprintf("dow %x", allDow), fmt.Sprintf("dom %x", allDom):
		days = "every day"
	}
	if spec.Dom&star == 0 && spec.Dow&star == 0 && (dom == allDom || dow == allDow) {
		days = "every day"
	}
	return fmt.Sprintf("s %x m %x h %x mon %x %s", spec.Second&^star, spec.Minute&^star, spec.Hour&^star, spec.Month&^star, days)
}

// zoneName is loc's name, every name of UTC as UTC.
func zoneName(loc *time.Location) string {
	switch loc.String() {
	case "", "UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu",
		"GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0", "Greenwich", "Etc/Greenwich":
		return "UTC"
	}
	return loc.String()
}

// scheduleKey computes Key for the schedule of workflow id.
func scheduleKey(id string, s *Schedule) (string, error) {
	return hashKey("sched:", map[string]any{"workflow_id": id, "cron": strings.Join(strings.Fields(s.Cron), " "), "timezone": s.Location().String(), "data": s.Data})
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// MaxCron bounds a schedule's cron expression, in bytes: five fields with
// long lists of values fit; it bounds what a schedule stores and each
// tick parses.
const MaxCron = 256

// Check parses the schedule's cron expression and time zone as validating
// a file does (the same rules: five fields or a descriptor, no @every, an
// IANA zone or UTC), for a schedule that comes from elsewhere (POST
// /schedules). field is "cron" or "timezone", the one to fix; the error
// says how.
func (s *Schedule) Check() (field string, err error) { return s.compile() }

// compile parses the expression and the zone; the error says what to fix.
func (s *Schedule) compile() (field string, err error) {
	expr := strings.TrimSpace(s.Cron)
	switch {
	case expr == "":
		return "cron", fmt.Errorf("a schedule needs a cron expression, e.g. \"0 9 * * MON\" (09:00 every Monday)")
	case len(expr) > MaxCron:
		return "cron", fmt.Errorf("the cron expression is %d bytes, over %d: list fewer values (ranges and steps, e.g. 1-5 or */10, say the same in less)", len(expr), MaxCron)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return "cron", fmt.Errorf("give the time zone as timezone: (e.g. timezone: Europe/Berlin), not in the cron expression")
	case strings.HasPrefix(expr, "@every"):
		return "cron", fmt.Errorf("@every is not supported: its ticks depend on when counting started, so replicas would not agree on them; use a cron expression (e.g. \"*/15 * * * *\")")
	}
	sched, err := cronParser.Parse(sundayAsSeven(expr))
	if err != nil {
		return "cron", fmt.Errorf("%q is not a cron expression (minute hour day-of-month month day-of-week, e.g. \"0 9 * * MON\"): %v", s.Cron, err)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return "cron", fmt.Errorf("%q is not a cron expression with fixed ticks", s.Cron)
	}
	loc := time.UTC
	switch s.Timezone {
	case "", "UTC":
	case "Local":
		return "timezone", fmt.Errorf("timezone Local depends on the host; name the zone (e.g. Europe/Berlin, America/New_York, UTC)")
	default:
		l, err := time.LoadLocation(s.Timezone)
		if err != nil {
			return "timezone", fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin, America/New_York or UTC", s.Timezone)
		}
		loc = l
	}
	spec.Location = loc
	if spec.Next(time.Now()).IsZero() {
		// robfig/cron looks five years ahead: a day that exists comes
		// round within four.
		return "cron", fmt.Errorf("%q never fires: no month has that day (e.g. 30 February, 31 April)", s.Cron)
	}
	s.spec = spec
	return "", nil
}

// sundayAsSeven returns expr with 7 in its day-of-week field read as
// Sunday (0), as Vixie cron and cronie read it: "0 9 * * 7" and
// "0 9 * * 1-7" parse. Descriptors and other fields are left as they are;
// what is not a plain number, range or step is left to the parser.
func sundayAsSeven(expr string) string {
	fields := strings.Fields(expr)
	if len(fields) != 5 || !strings.Contains(fields[4], "7") {
		return expr
	}
	parts := strings.Split(fields[4], ",")
	for i, p := range parts {
		rng, step, hasStep := strings.Cut(p, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		if hi != "7" {
			continue
		}
		a, err1 := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		st := 1
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n < 1 {
				continue
			}
			st = n
		}
		if err1 != nil || a < 0 || a > b {
			continue
		}
		var vals []string
		for v := a; v <= b; v += st {
			vals = append(vals, strconv.Itoa(v%7))
		}
		parts[i] = strings.Join(vals, ",")
	}
	fields[4] = strings.Join(parts, ",")
	return strings.Join(fields, " ")
}

// Location is the time zone the schedule's expression is read in.
func (s *Schedule) Location() *time.Location {
	if s.spec == nil {
		return time.UTC
	}
	return s.spec.Location
}

// Next returns the schedule's first tick strictly after t (the zero time
// when there is none within five years, e.g. "0 0 30 2 *").
//
// Daylight saving time is handled as cron (Vixie, ISC) does: a tick whose
// wall-clock time does not exist on the day the clocks go forward (02:30
// when 02:00 jumps to 03:00) falls at the end of the gap (03:00), once;
// on the day they go back, a wall-clock time that happens twice gives one
// tick, the first, unless the schedule fires every hour (its hour field
// is * or names all 24 hours), whose ticks follow the real hours.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.spec == nil {
		if _, err := s.compile(); err != nil {
			return time.Time{}
		}
	}
	from := t
	for range maxRepeatedTicks {
		n := s.spec.Next(from)
		if !n.After(from) {
			// None within five years; or a tick that does not move
			// forward, which would make a caller walking the ticks loop
			// forever.
			return time.Time{}
		}
		if o, ok := oddShiftTick(s.spec, from, n); ok {
			n = o
		}
		if g, ok := gapTick(s.spec, from, n); ok {
			return g.In(t.Location())
		}
		if !s.hourly() && repeatedWallTime(s.spec.Location, n) {
			from = n // the second time this wall-clock time happens
			continue
		}
		return n.In(t.Location())
	}
	return time.Time{}
}

// maxRepeatedTicks bounds the ticks Next passes over in a repeated hour
// (every minute of it: 60, for an hour-long shift).
const maxRepeatedTicks = 240

// hourly reports whether the schedule fires in every hour of the day.
func (s *Schedule) hourly() bool {
	const all = 1<<24 - 1
	return s.spec.Hour&all == all
}

// zoneShift is a window (a, b] in which a zone's offset changed, from
// offA to offB (seconds east of UTC).
type zoneShift struct {
	a, b       time.Time
	offA, offB int
}

// zoneShifts yields the 12-hour windows of (from, n] in which loc's offset
// changes (a zone changes it at most once in 12 hours).
func zoneShifts(loc *time.Location, from, n time.Time) iter.Seq[zoneShift] {
	return func(yield func(zoneShift) bool) {
		const step = 12 * time.Hour
		for a := from; a.Before(n); a = a.Add(step) {
			b := a.Add(step)
			if b.After(n) {
				b = n
			}
			_, offA := a.In(loc).Zone()
			_, offB := b.In(loc).Zone()
			if offA != offB && !yield(zoneShift{a, b, offA, offB}) {
				return
			}
		}
	}
}

// gapTick returns the end of a daylight saving gap in (from, n] (the
// instant the clocks jumped forward) when spec has a tick at a wall-clock
// time the gap skipped; robfig/cron's Next passes over such ticks.
func gapTick(spec *cron.SpecSchedule, from, n time.Time) (time.Time, bool) {
	loc := spec.Location
	for sh := range zoneShifts(loc, from, n) {
		a, b, offA, offB := sh.a, sh.b, sh.offA, sh.offB
		if offB <= offA {
			continue
		}
		// The clocks went forward in (a, b]: find the instant, to the
		// second (zone transitions are on whole seconds).
		lo, hi := a.Unix(), b.Unix()
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if _, off := time.Unix(mid, 0).In(loc).Zone(); off == offA {
				lo = mid
			} else {
				hi = mid
			}
		}
		at := time.Unix(hi, 0)
		// The skipped wall-clock times are those of [at, at+gap) read in
		// the offset before the jump: does spec have a tick among them?
		before := *spec
		before.Location = time.FixedZone("", offA)
		if m := before.Next(at.Add(-time.Second)); !m.IsZero() && m.Before(at.Add(time.Duration(offB-offA)*time.Second)) {
			return at, true
		}
	}
	return time.Time{}, false
}

// oddShiftTick returns the first tick in (from, n) on a day whose clocks
// moved by other than whole hours (Australia/Lord_Howe's half-hour
// daylight saving shift), when there is one: robfig/cron steps such a day
// by real hours, whose wall-clock times then end in :30, and passes over
// its ticks. The day's ticks are found by their wall-clock times instead.
func oddShiftTick(spec *cron.SpecSchedule, from, n time.Time) (time.Time, bool) {
	loc := spec.Location
	for sh := range zoneShifts(loc, from, n) {
		if (sh.offB-sh.offA)%3600 == 0 {
			continue
		}
		// The days of a and b in loc hold the shift: try each of their
		// wall-clock ticks, earliest first.
		for _, t := range []time.Time{sh.a, sh.b} {
			day := t.In(loc)
			if m, ok := dayTick(spec, day, from, n); ok {
				return m, true
			}
		}
	}
	return time.Time{}, false
}

// dayTick returns the first of spec's ticks on day's date (in its zone)
// that exists on the clocks and falls in (from, n).
func dayTick(spec *cron.SpecSchedule, day time.Time, from, n time.Time) (time.Time, bool) {
	const star = uint64(1) << 63
	loc := day.Location()
	if spec.Month&(1<<uint(day.Month())) == 0 {
		return time.Time{}, false
	}
	domMatch := spec.Dom&(1<<uint(day.Day())) != 0
	dowMatch := spec.Dow&(1<<uint(day.Weekday())) != 0
	if spec.Dom&star != 0 || spec.Dow&star != 0 {
		if !domMatch || !dowMatch {
			return time.Time{}, false
		}
	} else if !domMatch && !dowMatch {
		return time.Time{}, false
	}
	for h := range 24 {
		if spec.Hour&(1<<uint(h)) == 0 {
			continue
		}
		for m := range 60 {
			if spec.Minute&(1<<uint(m)) == 0 {
				continue
			}
			t := time.Date(day.Year(), day.Month(), day.Day(), h, m, 0, 0, loc)
			if w := t.In(loc); w.Hour() != h || w.Minute() != m {
				continue // in a gap: gapTick's to decide
			}
			if t.After(from) && t.Before(n) {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// repeatedWallTime reports whether n's wall-clock time in loc happened
// once already, before the clocks went back in the day before n.
func repeatedWallTime(loc *time.Location, n time.Time) bool {
	_, offN := n.In(loc).Zone()
	_, offP := n.Add(-24 * time.Hour).In(loc).Zone()
	if offP <= offN {
		return false
	}
	e := n.Add(-time.Duration(offP-offN) * time.Second)
	if _, offE := e.In(loc).Zone(); offE != offP {
		return false
	}
	wn, we := n.In(loc), e.In(loc)
	return wn.Year() == we.Year() && wn.YearDay() == we.YearDay() && wn.Hour() == we.Hour() && wn.Minute() == we.Minute() && wn.Second() == we.Second()
}

// Missed returns the latest tick in (last, now]: the one catch-up run a
// schedule starts for the ticks that fell due while no server was running
// (a server down from Monday to Thursday with a daily schedule starts one
// run, for Thursday's tick, not four). ok is false when no tick was
// missed. It costs about log(now - last) calls of Next, however many ticks
// there were.
func (s *Schedule) Missed(last, now time.Time) (tick time.Time, ok bool) {
	if !now.After(last) {
		return time.Time{}, false
	}
	first := s.Next(last)
	if first.IsZero() || first.After(now) {
		return time.Time{}, false
	}
	// Look back from now through windows that double until one holds a
	// tick, then walk that window's ticks forward to the last one.
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if !from.After(last) || w > 1<<62 {
			from = last
		}
		if t := s.Next(from); !t.IsZero() && !t.After(now) {
			for {
				n := s.Next(t)
				if n.IsZero() || n.After(now) {
					return t, true
				}
				t = n
			}
		}
		if from.Equal(last) {
			return first, true // not reached: first is in (last, now]
		}
	}
}
