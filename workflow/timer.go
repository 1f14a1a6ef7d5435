package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/asmp-dev/asmp/protocol"
)

// Timer fires one of its state's actions when a run has stayed in the
// state long enough (After), or at a time its data names (At). Exactly one
// of After and At is set. The engine fires it as actor "timer", validated
// like any request, with Data merged over the run's data for the action's
// `expects`; a run that left the state voids it.
type Timer struct {
	// After is how long after entering the state the timer is due (> 0).
	After time.Duration
	// At is an expr-lang expression over `data` (the run's data when the
	// state is entered) that yields the due time: a time (e.g.
	// date(data.due_at) - duration("1h")) or an RFC 3339 string (e.g.
	// data.due_at).
	At string
	// Action is the transition from the state the timer fires.
	Action string
	// Data is the body the action is fired with (JSON values); only the
	// action's expected fields are allowed.
	Data map[string]any

	afterText string // the file's spelling of After, parsed by validation
	prog      *vm.Program
}

// DueTimer is one timer's due time for one entry into its state.
type DueTimer struct {
	Timer *Timer
	// At is when the timer is due (zero when Err is set).
	At time.Time
	// Err, a *TimerError, says why the due time cannot be computed (an
	// `at` expression that fails or does not yield a time, a due time
	// after 2262); the engine records it and sets no timer.
	Err error
}

// TimerError is why a timer's due time cannot be computed from a run's
// data (or, for an `after` timer, from the time the state was entered).
// Its message is meant for the run's event log.
type TimerError struct {
	State, Action, At string
	// After is the timer's duration when it has no At.
	After time.Duration
	Err   error
}

func (e *TimerError) Error() string {
	if e.At == "" {
		return fmt.Sprintf("timer %q of state %s: after %s: %v", e.Action, e.State, e.After, e.Err)
	}
	return fmt.Sprintf("timer %q of state %s: at %q: %v", e.Action, e.State, e.At, e.Err)
}

func (e *TimerError) Unwrap() error { return e.Err }

// ErrNotATime is the cause of a TimerError whose expression yields
// something other than a time or an RFC 3339 string.
var ErrNotATime = errors.New("the expression does not yield a time")

// DueAt returns when t is due for a run that entered state at entered with
// data: entered+After, or the time At yields (which may be before entered:
// the timer is due at once). The error is a *TimerError; an After that
// reaches past the latest time a store keeps (2262) is one too.
func (t *Timer) DueAt(state string, data map[string]any, entered time.Time) (time.Time, error) {
	if t.At == "" {
		at := entered.Add(t.After)
		if at.After(lastDue) {
			return time.Time{}, &TimerError{State: state, Action: t.Action, After: t.After, Err: tooLate(at)}
		}
		return at, nil
	}
	fail := func(err error) (time.Time, error) {
		return time.Time{}, &TimerError{State: state, Action: t.Action, At: t.At, Err: err}
	}
	prog := t.prog
	if prog == nil {
		p, err := compileAt(t.At)
		if err != nil {
			return fail(err)
		}
		prog = p
	}
	out, bound, err := runBounded(prog, data, time.Now)
	if err != nil {
		if bound != "" {
			return fail(fmt.Errorf("the expression was stopped: %v; its bounds, a guard's, are %d steps, %s and expr-lang's memory budget of %d per evaluation", bound, GuardSteps, GuardTimeout, GuardMemory))
		}
		return fail(fmt.Errorf("the expression could not be evaluated: %s", oneLine(err.Error())))
	}
	switch v := out.(type) {
	case time.Time:
		at, err := inRange(v, entered)
		if err != nil {
			return fail(err)
		}
		return at, nil
	case string:
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fail(fmt.Errorf("%w: %q is not an RFC 3339 time (e.g. 2026-05-01T17:00:00Z)", ErrNotATime, protocol.Truncate(v, 64)))
		}
		at, err = inRange(at, entered)
		if err != nil {
			return fail(err)
		}
		return at, nil
	case nil:
		return fail(fmt.Errorf("%w: it yields nil (the run's data has no such value)", ErrNotATime))
	default:
		return fail(fmt.Errorf("%w: it yields %T", ErrNotATime, v))
	}
}

// lastDue is the latest due time a timer may have: the whole second
// before the latest time a store keeps (nanoseconds since 1970 in an
// int64, 2262-04-11T23:47:16.854775807Z), so that every due time stays
// below what GET /runs?due_before= is clamped to (a due_before past 2262
// lists every run with a timer).
var lastDue = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Second)

// inRange returns at as a timer's due time: a time before 1970 (the zero
// time among them) is long past, so the timer is due when the state is
// entered and fires at once; one after lastDue (2262) is refused.
func inRange(at, entered time.Time) (time.Time, error) {
	switch {
	case at.Before(time.Unix(0, 0)):
		return entered, nil
	case at.After(lastDue):
		return time.Time{}, fmt.Errorf("%w: %w", ErrNotATime, tooLate(at))
	}
	return at, nil
}

// tooLate says that at, after lastDue, cannot be a timer's due time.
func tooLate(at time.Time) error {
	return fmt.Errorf("%s is after %s, the latest due time a timer can have", at.UTC().Format(time.RFC3339), lastDue.Format(time.RFC3339))
}

// Body returns the request body t fires its action with, for a run whose
// data is data: each field expects names, from t.Data when it has it, else
// from the run's data (a field in neither is left out, so the action's
// usual check refuses the firing and names it). Pass the action's
// Transition.Expects.
func (t *Timer) Body(expects map[string]string, data map[string]any) map[string]any {
	body := make(map[string]any, len(expects))
	for k := range expects {
		if v, ok := t.Data[k]; ok {
			body[k] = v
		} else if v, ok := data[k]; ok {
			body[k] = v
		}
	}
	return body
}

// DueTimers returns the due time of each of s's timers, in declaration
// order, for a run that entered s at entered with data.
func (s *State) DueTimers(data map[string]any, entered time.Time) []DueTimer {
	if len(s.Timers) == 0 {
		return nil
	}
	out := make([]DueTimer, len(s.Timers))
	for i, t := range s.Timers {
		at, err := t.DueAt(s.Name, data, entered)
		out[i] = DueTimer{Timer: t, At: at, Err: err}
	}
	return out
}

// Timer returns s's timer that fires action.
func (s *State) Timer(action string) (*Timer, bool) {
	for _, t := range s.Timers {
		if t.Action == action {
			return t, true
		}
	}
	return nil, false
}

var timeType = reflect.TypeOf(time.Time{})

// compileAt compiles a timer's `at` expression in the environment guards
// use. An expression whose type is known and is neither a string nor a
// time is refused here, not when it fires. It is type-checked as written;
// what runs is the same expression with every predicate ticking an
// evaluation budget, as a guard's does (compileBounded, runBounded).
func compileAt(src string) (*vm.Program, error) {
	p, err := expr.Compile(src, exprEnv())
	if err != nil {
		return nil, err
	}
	if typ := p.Node().Type(); typ != nil {
		switch {
		case typ.Kind() == reflect.Interface, typ.Kind() == reflect.String, typ == timeType:
		default:
			return nil, fmt.Errorf("%w: it yields %s; give a time (e.g. date(data.due_at)) or an RFC 3339 string (e.g. data.due_at)", ErrNotATime, typ)
		}
	}
	return compileBounded(src)
}

// ParseDuration parses a Go duration (300ms, 90s, 10m, 1h30m) that may also
// count days: d is 24 hours (2d, 1d12h, 1.5d). A day is always 24 hours,
// whatever the time zone does.
func ParseDuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%q is not a duration: use numbers with units ns, us, ms, s, m, h or d, e.g. 90s, 10m, 2d, 1d12h", s)
	}
	tooLong := func() (time.Duration, error) {
		return 0, fmt.Errorf("%q is too long a duration: the longest is just over 106751d (292 years)", s)
	}
	rest, neg := strings.TrimSpace(s), false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg, rest = rest[0] == '-', rest[1:]
	}
	if rest == "" {
		return bad()
	}
	if rest == "0" {
		return 0, nil
	}
	var total time.Duration
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		j := i
		for j < len(rest) && !(rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.') {
			j++
		}
		num, unit := rest[:i], rest[i:j]
		rest = rest[j:]
		if num == "" || unit == "" {
			return bad()
		}
		var d time.Duration
		if unit == "d" {
			f, err := strconv.ParseFloat(num, 64)
			days := f * float64(24*time.Hour)
			if err != nil {
				return bad()
			}
			if days >= math.MaxInt64 {
				return tooLong()
			}
			d = time.Duration(days)
		} else {
			var err error
			if d, err = time.ParseDuration(num + unit); err != nil {
				if _, ferr := strconv.ParseFloat(num, 64); ferr == nil && durationUnit(unit) {
					return tooLong() // a number and a unit: too large for a time.Duration
				}
				return bad()
			}
		}
		if total > math.MaxInt64-d {
			return tooLong()
		}
		total += d
	}
	if neg {
		total = -total
	}
	return total, nil
}

// durationUnit reports whether u is a unit of time.ParseDuration.
func durationUnit(u string) bool {
	switch u {
	case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		return true
	}
	return false
}

// jsonObject returns m as decoded JSON values, the way a request body is
// decoded (numbers as int64 or float64): what a timer's or a schedule's
// data becomes, so the engine merges the same values a client would send.
func jsonObject(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("data must be JSON values: %s", oneLine(err.Error()))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("data must be JSON values: %s", oneLine(err.Error()))
	}
	v, err := protocol.NormalizeNumbers(out)
	if err != nil {
		return nil, fmt.Errorf("data must be JSON values: %s", oneLine(err.Error()))
	}
	return v.(map[string]any), nil
}

// FormatDuration spells d as a workflow file would write it, in its
// largest whole unit: 48h, 30m, 90s (not 48h0m0s); a duration with a
// fraction of a second as time.Duration spells it. ParseDuration reads
// each back.
func FormatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
