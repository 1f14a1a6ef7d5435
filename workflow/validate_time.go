package workflow

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// timers checks s's timers: each has after (a duration > 0) or at (an
// expression that can yield a time), fires a transition from s, at most
// one timer per action, and its data fits the action's expects.
func (v *validator) timers(s *State) {
	d := v.def
	seen := map[string]bool{}
	for i, t := range s.Timers {
		tp := fmt.Sprintf("states.%s.timers[%d]", s.Name, i)
		hasAfter, parsed := t.After != 0 || t.afterText != "", true
		if t.afterText != "" {
			dur, err := ParseDuration(t.afterText)
			if err != nil {
				v.errf(tp+".after", "%v", err)
				parsed = false
			} else {
				t.After = dur
			}
		}
		switch {
		case hasAfter && t.At != "":
			v.errf(tp, "a timer has after (a duration) or at (an expression yielding a time), not both")
		case !hasAfter && strings.TrimSpace(t.At) == "":
			v.errf(tp, "a timer needs after (a duration, e.g. 10m or 2d) or at (an expression yielding a time, e.g. data.due_at)")
		case hasAfter && parsed && t.After <= 0:
			v.errf(tp+".after", "after must be more than 0, got %s", t.After)
		case hasAfter && parsed && t.After > MaxDelay:
			v.errf(tp+".after", "after %s is more than 36500d (100 years), the longest a timer may wait: its due time could not be stored", t.After)
		case t.At != "":
			prog, err := compileAt(t.At)
			if err != nil {
				v.errf(tp+".at", "at expression cannot yield a time: %s", oneLine(err.Error()))
			}
			t.prog = prog
		}
		tr, ok := d.Transition(s.Name, t.Action)
		switch {
		case t.Action == "":
			v.errf(tp+".action", "a timer needs an action: the transition from state %s it fires (it has: %s)", s.Name, strings.Join(actionsOf(d.from[s.Name]), ", "))
		case !ok:
			v.errf(tp+".action", "timer names action %q, but state %s has no such transition (it has: %s)", t.Action, s.Name, strings.Join(actionsOf(d.from[s.Name]), ", "))
		case seen[t.Action]:
			v.errf(tp+".action", "state %s has a timer for action %q already; give each action at most one timer", s.Name, t.Action)
		case s.Task != nil && (t.Action == s.Task.OnSuccess || t.Action == s.Task.OnFailure):
			v.errf(tp+".action", "action %q is the task's; only the task fires it. To give up on a task that takes too long, give the timer a transition of its own (e.g. abandon)", t.Action)
		}
		seen[t.Action] = true
		data, err := jsonObject(t.Data)
		if err != nil {
			v.errf(tp+".data", "%v", err)
			continue
		}
		t.Data = data
		if ok {
			v.timerData(tp+".data", tr, data)
		}
	}
}

// timerData checks that a timer's data fits what its action expects: only
// expected fields (the others would never reach the run's data), each of
// its type and within its bounds. Fields it leaves out may come from the
// run's data when the timer fires.
func (v *validator) timerData(p string, tr *Transition, data map[string]any) {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		typ, ok := tr.Expects[k]
		switch {
		case !ok && len(tr.Expects) == 0:
			v.errf(p+"."+k, "action %q expects no input, so field %q would never reach the run's data", tr.Action, k)
		case !ok:
			v.errf(p+"."+k, "action %q does not expect field %q, so it would never reach the run's data (it expects %s)", tr.Action, k, protocol.DescribeExpects(tr.Expects))
		case !protocol.CheckType(typ, data[k]):
			v.errf(p+"."+k, "action %q expects field %q to be %s, got %s", tr.Action, k, typ, protocol.TypeOf(data[k]))
		}
	}
	if err := protocol.CheckConstraints(tr.Constraints, data); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if f, ok := pe.Fields["field"].(string); ok {
				p += "." + f
			}
			v.errf(p, "%s", pe.Hint)
		} else {
			v.errf(p, "%v", err)
		}
	}
}

// retry checks a task's retry policy and fills in its default cap.
func (v *validator) retry(p string, r *RetryPolicy) {
	if r == nil {
		return
	}
	switch {
	case r.maxAttemptsFrac != 0:
		v.errf(p+".max_attempts", "max_attempts must be a whole number of attempts, got %g", r.maxAttemptsFrac)
	case r.MaxAttempts < 1:
		v.errf(p+".max_attempts", "max_attempts must be at least 1 (it counts every attempt, the first included; 1 means no retry), got %d", r.MaxAttempts)
	case r.MaxAttempts > MaxRetryAttempts:
		v.errf(p+".max_attempts", "max_attempts must be at most %d", MaxRetryAttempts)
	}
	okBackoff, okMax := true, true
	if r.backoffText != "" {
		dur, err := ParseDuration(r.backoffText)
		if err != nil {
			v.errf(p+".backoff", "%v", err)
			okBackoff = false
		} else {
			r.Backoff = dur
		}
	}
	if r.maxBackoffText != "" {
		dur, err := ParseDuration(r.maxBackoffText)
		if err != nil {
			v.errf(p+".max_backoff", "%v", err)
			okMax = false
		} else {
			r.MaxBackoff = dur
		}
	}
	if okBackoff && r.Backoff <= 0 {
		v.errf(p+".backoff", "backoff must be more than 0: the wait before the first retry (e.g. 2s), doubled for each retry after it")
		return
	}
	if okBackoff && r.Backoff > MaxDelay {
		v.errf(p+".backoff", "backoff %s is more than 36500d (100 years), the longest a retry may wait", r.Backoff)
		okBackoff = false
	}
	if okMax && r.MaxBackoff > MaxDelay {
		v.errf(p+".max_backoff", "max_backoff %s is more than 36500d (100 years), the longest a retry may wait", r.MaxBackoff)
		okMax = false
	}
	switch {
	case !okBackoff || !okMax:
	case r.maxBackoffText == "" && r.MaxBackoff == 0:
		r.MaxBackoff = r.maxBackoff()
	case r.MaxBackoff < r.Backoff:
		v.errf(p+".max_backoff", "max_backoff %s is less than backoff %s; it caps the doubling waits, so it is at least backoff", r.MaxBackoff, r.Backoff)
	}
}

// schedules checks each schedule's cron expression, time zone and data.
// Two identical schedules are refused: they would be one schedule (one
// Key) that was meant to start two runs a tick.
func (v *validator) schedules() {
	seen := map[string]int{}
	for i, s := range v.def.Schedules {
		p := fmt.Sprintf("schedules[%d]", i)
		field, cerr := s.compile()
		if cerr != nil {
			v.errf(p+"."+field, "%v", cerr)
		}
		data, err := jsonObject(s.Data)
		if err != nil {
			v.errf(p+".data", "%v", err)
			continue
		}
		s.Data = data
		key, err := scheduleKey(v.def.ID, s)
		if err != nil {
			v.errf(p+".data", "data must be JSON values: %s", oneLine(err.Error()))
			continue
		}
		if cerr != nil {
			continue // its key holds what did not compile (an unknown zone counts as UTC): not compared
		}
		same, err := duplicateKey(v.def.ID, s)
		if err != nil {
			v.errf(p+".data", "data must be JSON values: %s", oneLine(err.Error()))
			continue
		}
		if j, dup := seen[same]; dup {
			v.errf(p, "schedule is the same as schedules[%d] (the same ticks in the same zone, and the same data); to start two runs a tick, give them different data", j)
		}
		seen[same] = i
		s.key = key
	}
}
