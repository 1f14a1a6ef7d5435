package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/store"
)

// RunsAndDefinitions is a DefinitionStore with the RunStore over the same
// data: runs are pinned to stored definitions, so the definition suite
// needs both.
type RunsAndDefinitions interface {
	store.RunStore
	store.DefinitionStore
}

// DefinitionStore runs the suite of store.DefinitionStore against stores
// made by newStore.
func DefinitionStore(t *testing.T, newStore func(t *testing.T) RunsAndDefinitions) {
	suite(t, newStore, []test[RunsAndDefinitions]{
		{"PutAndGet", testDefinitionPutAndGet},
		{"GetMissing", testDefinitionGetMissing},
		{"NewestFirst", testDefinitionsNewestFirst},
		{"PinCarriedByCommits", testPinCarriedByCommits},
		{"PinCountsAndPinnedRuns", testPinCountsAndPinnedRuns},
		{"PinLegacyRuns", testPinLegacyRuns},
		{"StandingMigrations", testStandingMigrations},
	})
}

func def(wf, version string, at time.Time) store.Definition {
	// Not canonical JSON on purpose: the body's bytes must come back as put.
	return store.Definition{WorkflowID: wf, Version: version, Body: json.RawMessage(`{"workflow_id":"` + wf + `", "v":"` + version + `"}`), FirstServed: at}
}

func pinnedRun(id, wf, version string) store.Commit {
	c := NewRun(id)
	c.Run.WorkflowID = wf
	c.Run.WorkflowVersion = version
	return c
}

func testDefinitionPutAndGet(t *testing.T, s RunsAndDefinitions) {
	d := def("wf-a", "sha256:aa", t0)
	got, err := s.PutDefinition(ctx(), d)
	if err != nil {
		t.Fatal(err)
	}
	if got.WorkflowID != d.WorkflowID || got.Version != d.Version || string(got.Body) != string(d.Body) || !got.FirstServed.Equal(t0) || got.LegacyRuns != 0 {
		t.Fatalf("PutDefinition = %+v, want %+v", got, d)
	}
	// A second put of the same version keeps the first (its body and time).
	again := def("wf-a", "sha256:aa", t0.Add(time.Hour))
	again.Body = json.RawMessage(`{"other":true}`)
	got, err = s.PutDefinition(ctx(), again)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(d.Body) || !got.FirstServed.Equal(t0) {
		t.Fatalf("second PutDefinition = %s at %v, want the first (%s at %v)", got.Body, got.FirstServed, d.Body, t0)
	}
	got, err = s.GetDefinition(ctx(), "wf-a", "sha256:aa")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(d.Body) || !got.FirstServed.Equal(t0) {
		t.Fatalf("GetDefinition = %s at %v, want %s at %v", got.Body, got.FirstServed, d.Body, t0)
	}
}

func testDefinitionGetMissing(t *testing.T, s RunsAndDefinitions) {
	if _, err := s.PutDefinition(ctx(), def("wf-a", "sha256:aa", t0)); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{"wf-a", "sha256:bb"}, {"wf-b", "sha256:aa"}} {
		if _, err := s.GetDefinition(ctx(), k[0], k[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetDefinition(%s, %s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
	if ds, err := s.Definitions(ctx(), "wf-none"); err != nil || len(ds) != 0 {
		t.Fatalf("Definitions of an unknown workflow = %v, %v; want none", ds, err)
	}
}

func testDefinitionsNewestFirst(t *testing.T, s RunsAndDefinitions) {
	for i, v := range []string{"sha256:01", "sha256:03", "sha256:02"} {
		if _, err := s.PutDefinition(ctx(), def("wf-a", v, t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutDefinition(ctx(), def("wf-b", "sha256:09", t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Definitions(ctx(), "wf-a")
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, d := range ds {
		vs = append(vs, d.Version)
	}
	if want := []string{"sha256:02", "sha256:03", "sha256:01"}; !slices.Equal(vs, want) {
		t.Fatalf("Definitions = %v, want %v (newest first served first, only wf-a)", vs, want)
	}
}

func testPinCarriedByCommits(t *testing.T, s RunsAndDefinitions) {
	c := pinnedRun("pin1", "wf-a", "sha256:aa")
	if err := s.CreateRun(ctx(), c); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetRun(ctx(), "pin1")
	if err != nil || r.WorkflowVersion != "sha256:aa" {
		t.Fatalf("GetRun = %+v, %v; want pinned to sha256:aa", r, err)
	}
	// A transition carries the pin.
	next := Next(r, "go", "B", `{}`)
	if err := s.CommitRun(ctx(), 1, next).Wait(); err != nil {
		t.Fatal(err)
	}
	if r, _ = s.GetRun(ctx(), "pin1"); r.WorkflowVersion != "sha256:aa" {
		t.Fatalf("after a transition the pin is %q, want sha256:aa", r.WorkflowVersion)
	}
	// A migration changes it, with a migrated event naming both versions.
	mig := Next(r, "sha256:aa", "B2", `{}`)
	mig.Run.WorkflowVersion = "sha256:bb"
	mig.Event.Kind = store.EventMigrated
	mig.Event.WorkflowVersion = "sha256:bb"
	stale := Next(c.Run, "sha256:aa", "B2", `{}`) // planned on version 1
	stale.Run.WorkflowVersion = "sha256:bb"
	if err := s.CommitRun(ctx(), 1, stale).Wait(); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a migration expecting a stale version = %v, want ErrConflict", err)
	}
	if r2, _ := s.GetRun(ctx(), "pin1"); r2.WorkflowVersion != "sha256:aa" {
		t.Fatalf("a refused migration changed the pin to %q", r2.WorkflowVersion)
	}
	if err := s.CommitRun(ctx(), 2, mig).Wait(); err != nil {
		t.Fatal(err)
	}
	if r, _ = s.GetRun(ctx(), "pin1"); r.WorkflowVersion != "sha256:bb" || r.State != "B2" || r.Version != 3 {
		t.Fatalf("after the migration: %+v, want B2 at version 3 pinned to sha256:bb", r)
	}
	evs, err := s.Events(ctx(), "pin1", 2, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Events = %v, %v", evs, err)
	}
	if e := evs[0]; e.Kind != store.EventMigrated || e.Action != "sha256:aa" || e.WorkflowVersion != "sha256:bb" || e.From != "B" || e.To != "B2" {
		t.Fatalf("migrated event = %+v", e)
	}
	// The pin survives the next transition, and earlier events have none.
	if err := s.CommitRun(ctx(), 3, Next(r, "go", "C", `{}`)).Wait(); err != nil {
		t.Fatal(err)
	}
	if r, _ = s.GetRun(ctx(), "pin1"); r.WorkflowVersion != "sha256:bb" {
		t.Fatalf("the pin after a migration and a transition is %q, want sha256:bb", r.WorkflowVersion)
	}
	evs, _ = s.Events(ctx(), "pin1", 0, 0)
	if len(evs) != 4 || evs[1].WorkflowVersion != "" || evs[3].WorkflowVersion != "" {
		t.Fatalf("events = %+v; only the migrated event names a version", evs)
	}
}

func testPinCountsAndPinnedRuns(t *testing.T, s RunsAndDefinitions) {
	for _, c := range []store.Commit{
		pinnedRun("r1", "wf-a", "sha256:aa"),
		pinnedRun("r2", "wf-a", "sha256:aa"),
		pinnedRun("r3", "wf-a", "sha256:aa"),
		pinnedRun("r4", "wf-a", "sha256:bb"),
		pinnedRun("r5", "wf-b", "sha256:aa"),
	} {
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	r3, _ := s.GetRun(ctx(), "r3")
	done := Next(r3, "finish", "DONE", `{}`)
	done.Run.Status = "failed"
	done.Event.Snapshot = done.Run.Snapshot
	if err := s.CommitRun(ctx(), 1, done).Wait(); err != nil {
		t.Fatal(err)
	}
	counts, err := s.PinCounts(ctx(), "wf-a")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(counts, func(i, j int) bool {
		a, b := counts[i], counts[j]
		return a.Version+a.State+a.Status < b.Version+b.State+b.Status
	})
	want := []store.PinCount{
		{Version: "sha256:aa", State: "DONE", Status: "failed", Runs: 1},
		{Version: "sha256:aa", State: "START", Runs: 2},
		{Version: "sha256:bb", State: "START", Runs: 1},
	}
	if !slices.Equal(counts, want) {
		t.Fatalf("PinCounts = %+v, want %+v", counts, want)
	}
	ids := func(rs []store.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	rs, err := s.PinnedRuns(ctx(), "wf-a", "sha256:aa", "", 0)
	if err != nil || !slices.Equal(ids(rs), []string{"r1", "r2", "r3"}) {
		t.Fatalf("PinnedRuns = %v, %v; want r1 r2 r3", ids(rs), err)
	}
	if rs[2].State != "DONE" || rs[2].WorkflowVersion != "sha256:aa" {
		t.Fatalf("PinnedRuns gives %+v, want r3's current value", rs[2])
	}
	rs, err = s.PinnedRuns(ctx(), "wf-a", "sha256:aa", "r1", 1)
	if err != nil || !slices.Equal(ids(rs), []string{"r2"}) {
		t.Fatalf("PinnedRuns after r1, limit 1 = %v, %v; want r2", ids(rs), err)
	}
}

func testPinLegacyRuns(t *testing.T, s RunsAndDefinitions) {
	for _, c := range []store.Commit{
		pinnedRun("l1", "wf-a", ""),
		pinnedRun("l2", "wf-a", ""),
		pinnedRun("l3", "wf-a", "sha256:bb"),
		pinnedRun("l4", "wf-b", ""),
	} {
		if err := s.CreateRun(ctx(), c); err != nil {
			t.Fatal(err)
		}
	}
	// Read one first: a store that keeps runs in memory must not keep the
	// value without the pin.
	if r, _ := s.GetRun(ctx(), "l1"); r.WorkflowVersion != "" {
		t.Fatalf("a legacy run is pinned to %q before PinLegacyRuns", r.WorkflowVersion)
	}
	if _, err := s.PinLegacyRuns(ctx(), "wf-a", "sha256:aa"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PinLegacyRuns to an unstored version = %v, want ErrNotFound", err)
	}
	if r, _ := s.GetRun(ctx(), "l1"); r.WorkflowVersion != "" {
		t.Fatalf("a refused PinLegacyRuns pinned l1 to %q", r.WorkflowVersion)
	}
	if _, err := s.PutDefinition(ctx(), def("wf-a", "sha256:aa", t0)); err != nil {
		t.Fatal(err)
	}
	n, err := s.PinLegacyRuns(ctx(), "wf-a", "sha256:aa")
	if err != nil || n != 2 {
		t.Fatalf("PinLegacyRuns = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]string{"l1": "sha256:aa", "l2": "sha256:aa", "l3": "sha256:bb", "l4": ""} {
		if r, _ := s.GetRun(ctx(), id); r.WorkflowVersion != want {
			t.Fatalf("run %s is pinned to %q, want %q", id, r.WorkflowVersion, want)
		}
	}
	if d, _ := s.GetDefinition(ctx(), "wf-a", "sha256:aa"); d.LegacyRuns != 2 {
		t.Fatalf("the definition records %d legacy runs, want 2", d.LegacyRuns)
	}
	if n, err := s.PinLegacyRuns(ctx(), "wf-a", "sha256:aa"); err != nil || n != 0 {
		t.Fatalf("PinLegacyRuns again = %d, %v; want 0", n, err)
	}
	if d, _ := s.GetDefinition(ctx(), "wf-a", "sha256:aa"); d.LegacyRuns != 2 {
		t.Fatalf("after a second pass the definition records %d legacy runs, want 2", d.LegacyRuns)
	}
}

func testStandingMigrations(t *testing.T, s RunsAndDefinitions) {
	if _, err := s.GetMigration(ctx(), "wf-a", "sha256:aa"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMigration of none = %v, want ErrNotFound", err)
	}
	m := store.Migration{WorkflowID: "wf-a", From: "sha256:aa", To: "sha256:bb", States: map[string]string{"B": "B2"},
		Runs: []string{"r1", "r2"}, Actor: "ops", CreatedAt: t0}
	if err := s.PutMigration(ctx(), m); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMigration(ctx(), "wf-a", "sha256:aa")
	if err != nil || got.To != m.To || got.States["B"] != "B2" || len(got.States) != 1 || !slices.Equal(got.Runs, m.Runs) || got.Actor != "ops" || !got.CreatedAt.Equal(t0) {
		t.Fatalf("GetMigration = %+v, %v; want %+v", got, err, m)
	}
	// A later migration of the same version replaces it; others are apart.
	m2 := store.Migration{WorkflowID: "wf-a", From: "sha256:aa", To: "sha256:cc", Runs: []string{"r3"}, CreatedAt: t0.Add(time.Minute)}
	if err := s.PutMigration(ctx(), m2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetMigration(ctx(), "wf-a", "sha256:aa"); got.To != "sha256:cc" || !slices.Equal(got.Runs, []string{"r3"}) || len(got.States) != 0 {
		t.Fatalf("after a second PutMigration: %+v", got)
	}
	if _, err := s.GetMigration(ctx(), "wf-b", "sha256:aa"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another workflow's migration = %v, want ErrNotFound", err)
	}
}
