package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// RunsAndTimers is a TimerStore with the RunStore over the same data:
// timers are stored and voided by run commits, so the timer suite needs
// both.
type RunsAndTimers interface {
	store.RunStore
	store.TimerStore
}

// TimerStore runs the suite of store.TimerStore against stores made by
// newStore.
func TimerStore(t *testing.T, newStore func(t *testing.T) RunsAndTimers) {
	suite(t, newStore, []test[RunsAndTimers]{
		{"TimersStoredWithTheRun", testTimersStoredWithTheRun},
		{"TimersReplacedByEntering", testTimersReplacedByEntering},
		{"TimersNeedReplace", testTimersNeedReplace},
		{"TimersClaimDueInOrder", testTimersClaimDueInOrder},
		{"TimerLeaseExpiry", testTimerLeaseExpiry},
		{"TimerReleaseAndComplete", testTimerReleaseAndComplete},
		{"TimersVoidedAreNotClaimed", testTimersVoidedAreNotClaimed},
		{"TimersDeletedWithRun", testTimersDeletedWithRun},
		{"TimersOfNestedRunIDs", testTimersOfNestedRunIDs},
		{"ListRunsDueBefore", testListRunsDueBefore},
		{"TimersClaimedOnce", testTimersClaimedOnce},
	})
}

// At returns a timer of action due at at, with data (nil: none), for a
// commit to store (the store fills in the rest).
func At(action string, at time.Time, data string) store.Timer {
	t := store.Timer{Action: action, DueAt: at}
	if data != "" {
		t.Data = json.RawMessage(data)
	}
	return t
}

// Enter returns the commit that moves r into state, replacing its timers
// with ts.
func Enter(r store.Run, action, state string, ts ...store.Timer) store.Commit {
	c := Next(r, action, state, `{}`)
	c.ReplaceTimers = true
	c.Timers = ts
	return c
}

func timerIDs(ts []store.Timer) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func runTimers(t *testing.T, s store.TimerStore, run string) []store.Timer {
	t.Helper()
	ts, err := s.RunTimers(ctx(), run)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func claim(t *testing.T, s store.TimerStore, now time.Time, limit int, owner string) []store.Timer {
	t.Helper()
	ts, err := s.ClaimDueTimers(ctx(), now, limit, owner, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func wantIDs(t *testing.T, what string, got []store.Timer, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if ids := timerIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("%s = %q, want %q", what, ids, want)
	}
}

// testTimersStoredWithTheRun: creating a run stores its first state's
// timers, complete with the run's identity and the entry's version, data
// byte for byte.
func testTimersStoredWithTheRun(t *testing.T, s RunsAndTimers) {
	c := NewRun("tm")
	c.Timers = []store.Timer{At("escalate", t0.Add(time.Hour), `{"level": 2}`), At("expire", t0.Add(time.Minute), "")}
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	got := runTimers(t, s, "tm")
	wantIDs(t, "RunTimers", got, "tm/1/expire", "tm/1/escalate")
	want := store.Timer{ID: "tm/1/escalate", RunID: "tm", WorkflowID: "wf-test", State: "START", Version: 1, Action: "escalate",
		DueAt: t0.Add(time.Hour), Data: json.RawMessage(`{"level": 2}`)}
	if g := got[1]; g.ID != want.ID || g.RunID != want.RunID || g.WorkflowID != want.WorkflowID || g.State != want.State || g.Version != want.Version ||
		g.Action != want.Action || !g.DueAt.Equal(want.DueAt) || string(g.Data) != string(want.Data) || g.Owner != "" || !g.LeaseUntil.IsZero() {
		t.Fatalf("stored timer %+v, want %+v", g, want)
	}
	if string(got[0].Data) != `{}` {
		t.Fatalf("a timer without data has data %s, want {}", got[0].Data)
	}
	if at, ok, err := s.NextTimerDue(ctx()); err != nil || !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("NextTimerDue = %v, %v, %v; want %v", at, ok, err, t0.Add(time.Minute))
	}
	wantIDs(t, "RunTimers of a run without timers", runTimers(t, s, "nobody"))
}

// testTimersReplacedByEntering: entering a state replaces the run's
// timers, a commit within the state keeps them, a self-loop re-arms them
// under new ids, a commit that ends the run leaves none, and a lost
// compare-and-set changes none.
func testTimersReplacedByEntering(t *testing.T, s RunsAndTimers) {
	c := NewRun("re")
	c.Timers = []store.Timer{At("a", t0.Add(time.Hour), "")}
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	enter := Enter(c.Run, "go", "WAIT", At("b", t0.Add(2*time.Hour), ""), At("c", t0.Add(3*time.Hour), ""))
	if err := s.CommitRun(ctx(), 1, enter).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers after entering WAIT", runTimers(t, s, "re"), "re/2/b", "re/2/c")
	if ts := runTimers(t, s, "re"); ts[0].State != "WAIT" || ts[0].Version != 2 {
		t.Fatalf("timer %+v, want state WAIT at version 2", ts[0])
	}

	within := Next(enter.Run, "note", "WAIT", `{"x": 1}`)
	if err := s.CommitRun(ctx(), 2, within).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers after a commit within the state", runTimers(t, s, "re"), "re/2/b", "re/2/c")

	loop := Enter(within.Run, "again", "WAIT", At("b", t0.Add(5*time.Hour), ""))
	if err := s.CommitRun(ctx(), 3, loop).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers after a self-loop", runTimers(t, s, "re"), "re/4/b")

	lost := Enter(within.Run, "late", "ELSE", At("z", t0, ""))
	if err := s.CommitRun(ctx(), 3, lost).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit = %v, want ErrConflict", err)
	}
	wantIDs(t, "timers after a lost compare-and-set", runTimers(t, s, "re"), "re/4/b")

	end := Enter(loop.Run, "finish", "DONE")
	if err := s.CommitRun(ctx(), 4, end).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of an ended run", runTimers(t, s, "re"))
	if _, ok, err := s.NextTimerDue(ctx()); err != nil || ok {
		t.Fatalf("NextTimerDue with no timer pending = %v, %v", ok, err)
	}
}

// testTimersNeedReplace: a commit that carries timers must say it
// replaces the run's (else the state's earlier timers would stay beside
// them), and a state has one timer per action; such commits store nothing.
func testTimersNeedReplace(t *testing.T, s RunsAndTimers) {
	r := mustCreate(t, s, "nr")
	bad := Next(r, "go", "WAIT", `{}`)
	bad.Timers = []store.Timer{At("a", t0, "")}
	if err := s.CommitRun(ctx(), 1, bad).Wait(); err == nil {
		t.Fatal("a commit with timers and without ReplaceTimers was stored")
	}
	twice := Enter(r, "go", "WAIT", At("a", t0, ""), At("a", t0.Add(time.Hour), ""))
	if err := s.CommitRun(ctx(), 1, twice).Wait(); err == nil {
		t.Fatal("two timers of one action were stored")
	}
	other := Enter(r, "go", "WAIT", store.Timer{RunID: "someone-else", Action: "a", DueAt: t0})
	if err := s.CommitRun(ctx(), 1, other).Wait(); err == nil {
		t.Fatal("a timer of another run was stored")
	}
	if got, _ := s.GetRun(ctx(), "nr"); got.Version != 1 {
		t.Fatalf("a refused commit moved the run to version %d", got.Version)
	}
	wantIDs(t, "timers after refused commits", runTimers(t, s, "nr"))
}

// testTimersClaimDueInOrder: a claim returns the due timers only, by due
// time, up to its limit, leased to the claimer.
func testTimersClaimDueInOrder(t *testing.T, s RunsAndTimers) {
	for i, due := range []time.Duration{3 * time.Second, time.Second, 10 * time.Hour, 2 * time.Second, 0} {
		c := NewRun(fmt.Sprintf("o%d", i))
		c.Timers = []store.Timer{At("fire", t0.Add(due), "")}
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(3 * time.Second)
	got := claim(t, s, now, 3, "w1")
	wantIDs(t, "first claim", got, "o4/1/fire", "o1/1/fire", "o3/1/fire")
	for _, tm := range got {
		if tm.Owner != "w1" || !tm.LeaseUntil.Equal(now.Add(time.Minute)) {
			t.Fatalf("claimed timer %+v, want leased to w1 until %v", tm, now.Add(time.Minute))
		}
	}
	wantIDs(t, "second claim", claim(t, s, now, 3, "w1"), "o0/1/fire") // due at now is due
	wantIDs(t, "claim with nothing due", claim(t, s, now, 3, "w1"))
	if at, ok, _ := s.NextTimerDue(ctx()); !ok || !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("NextTimerDue = %v, %v; want the end of the leases, %v", at, ok, now.Add(time.Minute))
	}
	if _, err := s.ClaimDueTimers(ctx(), now, 0, "w1", now.Add(time.Minute)); err == nil {
		t.Fatal("a claim with limit 0 was accepted")
	}
	if _, err := s.ClaimDueTimers(ctx(), now, 5, "w1", now); err == nil {
		t.Fatal("a claim whose lease ends at once was accepted")
	}
	wantIDs(t, "a claim in ten hours", claim(t, s, t0.Add(10*time.Hour), 10, "w2"), "o4/1/fire", "o1/1/fire", "o3/1/fire", "o0/1/fire", "o2/1/fire")
}

// testTimerLeaseExpiry: a leased timer is not claimed by another claimer
// until its lease ends; then it is.
func testTimerLeaseExpiry(t *testing.T, s RunsAndTimers) {
	c := NewRun("le")
	c.Timers = []store.Timer{At("fire", t0, "")}
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "claim", claim(t, s, t0, 10, "dead"), "le/1/fire")
	wantIDs(t, "claim under the lease", claim(t, s, t0.Add(59*time.Second), 10, "alive"))
	got := claim(t, s, t0.Add(time.Minute), 10, "alive")
	wantIDs(t, "claim once the lease ended", got, "le/1/fire")
	if got[0].Owner != "alive" {
		t.Fatalf("reclaimed timer owned by %q", got[0].Owner)
	}
	if ts := runTimers(t, s, "le"); len(ts) != 1 || ts[0].Owner != "alive" || !ts[0].LeaseUntil.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("RunTimers = %+v, want the lease of alive", ts)
	}
}

// testTimerReleaseAndComplete: the holder's release makes a timer
// claimable at once; completing removes it for good (also in a commit's
// DoneTimers) and is a no-op for a timer not pending.
func testTimerReleaseAndComplete(t *testing.T, s RunsAndTimers) {
	c := NewRun("rc")
	c.Timers = []store.Timer{At("a", t0, ""), At("b", t0, "")}
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	claim(t, s, t0, 10, "w1")
	if err := s.ReleaseTimer(ctx(), "rc/1/a", "w2"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseTimer by another = %v, want ErrConflict", err)
	}
	if err := s.ReleaseTimer(ctx(), "rc/1/a", "w1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseTimer(ctx(), "rc/1/a", "w1"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("releasing a released timer = %v, want ErrConflict", err)
	}
	if err := s.ReleaseTimer(ctx(), "rc/1/zzz", "w1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReleaseTimer(unknown) = %v, want ErrNotFound", err)
	}
	wantIDs(t, "claim after release", claim(t, s, t0, 10, "w2"), "rc/1/a")
	if err := s.CompleteTimer(ctx(), "rc/1/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTimer(ctx(), "rc/1/a"); err != nil {
		t.Fatalf("completing twice = %v, want a no-op", err)
	}
	wantIDs(t, "claim once the leases ended", claim(t, s, t0.Add(time.Hour), 10, "w3"), "rc/1/b")
	// A commit within the state that records b's firing removes it.
	within := Next(c.Run, "noted", "START", `{}`)
	within.DoneTimers = []string{"rc/1/b", "rc/1/not-a-timer"}
	if err := s.CommitRun(ctx(), 1, within).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers after completion", runTimers(t, s, "rc"))
	wantIDs(t, "claim after completion", claim(t, s, t0.Add(2*time.Hour), 10, "w3"))
}

// testTimersVoidedAreNotClaimed: a run that left the state voids its
// timers, however long due.
func testTimersVoidedAreNotClaimed(t *testing.T, s RunsAndTimers) {
	c := NewRun("vo")
	c.Timers = []store.Timer{At("fire", t0, "")}
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitRun(ctx(), 1, Enter(c.Run, "go", "WAIT", At("later", t0.Add(time.Hour), ""))).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "claim after leaving the state", claim(t, s, t0.Add(time.Minute), 10, "w"))
	wantIDs(t, "claim of the new state's timer", claim(t, s, t0.Add(time.Hour), 10, "w"), "vo/2/later")
}

// testTimersDeletedWithRun: retention's DeleteRun takes the run's timers.
func testTimersDeletedWithRun(t *testing.T, s RunsAndTimers) {
	for _, id := range []string{"keep", "gone"} {
		c := NewRun(id)
		c.Timers = []store.Timer{At("fire", t0, "")}
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRun(ctx(), "gone", 1); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of a deleted run", runTimers(t, s, "gone"))
	wantIDs(t, "claim", claim(t, s, t0, 10, "w"), "keep/1/fire")
	if err := s.CreateRun(ctx(), NewRun("gone")); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of a run re-created without any", runTimers(t, s, "gone"))
}

// testTimersOfNestedRunIDs: a run whose id begins with another run's
// id and "/" (so its timers' ids begin as the other's do) keeps its
// timers when the other run's are replaced, listed, completed or deleted.
func testTimersOfNestedRunIDs(t *testing.T, s RunsAndTimers) {
	runs := map[string]store.Run{}
	for _, id := range []string{"ns", "ns/1", "ns/1/x"} {
		c := NewRun(id)
		c.Timers = []store.Timer{At("fire", t0.Add(time.Hour), "")}
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
		runs[id] = c.Run
	}
	wantIDs(t, "timers of ns", runTimers(t, s, "ns"), "ns/1/fire")
	wantIDs(t, "timers of ns/1", runTimers(t, s, "ns/1"), "ns/1/1/fire")
	enter := Enter(runs["ns"], "go", "WAIT", At("later", t0.Add(2*time.Hour), ""))
	if err := s.CommitRun(ctx(), 1, enter).Wait(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of ns after it entered WAIT", runTimers(t, s, "ns"), "ns/2/later")
	wantIDs(t, "timers of ns/1 after ns entered WAIT", runTimers(t, s, "ns/1"), "ns/1/1/fire")
	if err := s.CompleteTimer(ctx(), "ns/1/1/fire"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of ns/1 once its timer completed", runTimers(t, s, "ns/1"))
	wantIDs(t, "timers of ns once ns/1's completed", runTimers(t, s, "ns"), "ns/2/later")
	if err := s.DeleteRun(ctx(), "ns", 2); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "timers of ns/1/x once ns was deleted", runTimers(t, s, "ns/1/x"), "ns/1/x/1/fire")
	wantIDs(t, "claim", claim(t, s, t0.Add(3*time.Hour), 10, "w"), "ns/1/x/1/fire")
}

// testListRunsDueBefore: due_before lists the runs with a timer due
// before the time (leased or not), with the other filters, paged.
func testListRunsDueBefore(t *testing.T, s RunsAndTimers) {
	for i, due := range []time.Duration{time.Minute, time.Hour, 0, 2 * time.Minute, -1, 30 * time.Second} {
		c := NewRun(fmt.Sprintf("d%d", i))
		c.Run.WorkflowID = []string{"wf-a", "wf-b"}[i%2]
		c.Run.UpdatedAt = t0.Add(time.Duration(i%3) * time.Second) // d0 and d3 tie, d1 and d4, d2 and d5
		if due >= 0 {
			c.Timers = []store.Timer{At("fire", t0.Add(due), ""), At("late", t0.Add(24*time.Hour), "")}
		}
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	claim(t, s, t0, 10, "w") // d2's timer is leased: still pending
	list := func(f store.RunFilter) []string {
		t.Helper()
		rs, err := s.ListRuns(ctx(), f)
		if err != nil {
			t.Fatal(err)
		}
		return runIDs(rs)
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s = %q, want %q", what, got, want)
		}
	}
	soon := t0.Add(2 * time.Minute)
	check("due before +2m", list(store.RunFilter{DueBefore: soon}), "d5", "d2", "d0")
	check("due before +2m, wf-b", list(store.RunFilter{DueBefore: soon, WorkflowID: "wf-b"}), "d5")
	check("due before +2m, first page", list(store.RunFilter{DueBefore: soon, Limit: 2}), "d5", "d2")
	check("due before +2m, next page", list(store.RunFilter{DueBefore: soon, Limit: 2, Before: store.RunCursor{UpdatedAt: t0.Add(2 * time.Second), ID: "d2"}}), "d0")
	check("due before the first", list(store.RunFilter{DueBefore: t0}))
	check("due before +1h1s, state START", list(store.RunFilter{DueBefore: t0.Add(time.Hour + time.Second), State: "START"}), "d5", "d2", "d1", "d3", "d0")
	check("due before +2d (runs with two timers listed once)", list(store.RunFilter{DueBefore: t0.Add(48 * time.Hour)}), "d5", "d2", "d1", "d3", "d0")
}

// testTimersClaimedOnce: 1,000 timers due at once, claimed by two
// claimers of one store at the same time, are each claimed exactly once.
func testTimersClaimedOnce(t *testing.T, s RunsAndTimers) {
	const runs, each = 100, 10
	for i := range runs {
		c := NewRun(fmt.Sprintf("many%03d", i))
		for j := range each {
			c.Timers = append(c.Timers, At(fmt.Sprintf("a%d", j), t0.Add(time.Duration(j)*time.Millisecond), ""))
		}
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	if got := ClaimAllTimers(t, []store.TimerStore{s, s}, t0.Add(time.Second)); len(got) != runs*each {
		t.Fatalf("claimed %d timers, want %d", len(got), runs*each)
	}
}

// ClaimAllTimers runs one claimer per entry of claimers (a store may
// appear more than once), each claiming due timers at now, 16 at a time,
// until none is left, and returns every claimed timer by id. A timer
// claimed twice, or a claim out of due order, fails t.
func ClaimAllTimers(t *testing.T, claimers []store.TimerStore, now time.Time) map[string]store.Timer {
	t.Helper()
	var mu sync.Mutex
	claimed := map[string]store.Timer{}
	var wg sync.WaitGroup
	for w, s := range claimers {
		wg.Go(func() {
			owner := fmt.Sprintf("c%d", w)
			for {
				ts, err := s.ClaimDueTimers(ctx(), now, 16, owner, now.Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(ts) == 0 {
					return
				}
				if !slices.IsSortedFunc(ts, func(a, b store.Timer) int { return a.DueAt.Compare(b.DueAt) }) {
					t.Errorf("claim out of due order: %q", timerIDs(ts))
				}
				mu.Lock()
				for _, tm := range ts {
					if prev, dup := claimed[tm.ID]; dup {
						t.Errorf("timer %s claimed by %s and %s", tm.ID, prev.Owner, owner)
					}
					claimed[tm.ID] = tm
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return claimed
}
