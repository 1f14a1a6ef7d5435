package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// renameV1 and renameV2 are one workflow before and after its state B was
// renamed B2 (with a migrate: block saying so when from is given).
func renameDef(t *testing.T, renamed bool, from string, task workflow.TaskFunc) *workflow.Definition {
	t.Helper()
	b, hint := "B", "In B."
	if renamed {
		b, hint = "B2", "In B2."
	}
	src := fmt.Sprintf(`workflow_id: rename-v1
initial_state: INITIAL
states:
  INITIAL: {}
  %[1]s: {hint: %[2]s, resources: [{path: guide, text: "guide of %[1]s"}]}
  DONE: {}
transitions:
  - {from: INITIAL, action: start, to: %[1]s}
  - {from: %[1]s, action: finish, to: DONE}
`, b, hint)
	if from != "" {
		src += "migrate: [{from: " + from + ", states: {B: B2}}]\n"
	}
	d, err := workflow.Load("rename.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustEngine(t *testing.T, st store.Store, defs ...*workflow.Definition) *engine.Engine {
	t.Helper()
	e, err := engine.New(st, defs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func started(t *testing.T, e *engine.Engine, actions ...string) string {
	t.Helper()
	r, err := e.StartRun(context.Background(), "rename-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		if _, err := e.Transition(context.Background(), r.ID, a, nil, engine.TransitionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return r.ID
}

func frameOf(t *testing.T, e *engine.Engine, id string) protocol.Frame {
	t.Helper()
	r, err := e.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Frame(r, "http://x")
}

// The rename scenario through the engine on the memory store: a run in B
// keeps working on its version after B became B2, a new run gets the new
// version, a dry run changes nothing, and the migration moves the run.
func TestRenameScenario(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v1 := renameDef(t, false, "", nil)
	e1 := mustEngine(t, st, v1)
	kept := started(t, e1, "start")
	moved := started(t, e1, "start")

	v2 := renameDef(t, true, v1.Version(), nil)
	e := mustEngine(t, st, v2) // the restart with the changed file
	f := frameOf(t, e, kept)
	if f.State != "B" || f.Hint != "In B." || len(f.NextStates) != 1 || f.NextStates[0].Action != "finish" {
		t.Fatalf("the run in B after the rename: %+v", f)
	}
	if l := f.Links["workflow_version"]; l.Version != v1.Version() || l.Href != "http://x/workflows/rename-v1/versions/"+v1.Version() || l.Method != "GET" {
		t.Fatalf("workflow_version link %+v, want version %s", l, v1.Version())
	}
	if res, err := e.ReadResource(ctx, kept, "guide", engine.ResourceOptions{}); err != nil || string(res.Body) != "guide of B" {
		t.Fatalf("the old version's resource: %v %v", res, err)
	}
	r, _ := e.GetRun(ctx, kept)
	if c := e.CLI(r); len(c.Options) != 1 || c.Options[0].Action != "finish" {
		t.Fatalf("the old version's CLI: %+v", c)
	}
	fresh := started(t, e, "start")
	if f := frameOf(t, e, fresh); f.State != "B2" || f.Links["workflow_version"].Version != v2.Version() {
		t.Fatalf("a new run: %s on %s, want B2 on %s", f.State, f.Links["workflow_version"].Version, v2.Version())
	}

	vs, err := e.Versions(ctx, "http://x", "rename-v1")
	if err != nil || len(vs) != 2 || vs[0].Version != v2.Version() || !vs[0].Served || vs[0].ActiveRuns != 1 || vs[1].Version != v1.Version() || vs[1].ActiveRuns != 2 {
		t.Fatalf("Versions = %+v, %v; want v2 (1 active run, served) then v1 (2)", vs, err)
	}

	// A dry run reports and changes nothing.
	before, _ := e.GetRun(ctx, moved)
	rep, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{DryRun: true})
	if err != nil || len(rep.Migrated) != 2 || rep.Migrated[0].To != "B2" || len(rep.Left) != 0 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if after, _ := e.GetRun(ctx, moved); after.Version != before.Version || after.WorkflowVersion != v1.Version() || after.State != "B" {
		t.Fatalf("the dry run changed the run: %+v", after.Run)
	}

	// The kept run moves on on its own version first.
	if _, err := e.Transition(ctx, kept, "finish", nil, engine.TransitionOptions{}); err != nil {
		t.Fatalf("finish on the old version: %v", err)
	}
	rep, err = e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{Actor: "ops"})
	if err != nil || len(rep.Migrated) != 1 || rep.Migrated[0].RunID != moved {
		t.Fatalf("migrate: %+v, %v; want only the active run moved", rep, err)
	}
	f = frameOf(t, e, moved)
	if f.State != "B2" || f.Hint != "In B2." || f.Links["workflow_version"].Version != v2.Version() {
		t.Fatalf("after the migration: %+v", f)
	}
	evs, _ := e.Events(ctx, moved, 0, 0)
	last := evs[len(evs)-1]
	if last.Kind != store.EventMigrated || last.Action != v1.Version() || last.WorkflowVersion != v2.Version() || last.From != "B" || last.To != "B2" || last.Actor != "ops" {
		t.Fatalf("the migrated event: %+v", last)
	}
	if evs[0].WorkflowVersion != v1.Version() {
		t.Fatalf("the created event names version %q, want %s", evs[0].WorkflowVersion, v1.Version())
	}
	if _, err := e.Transition(ctx, moved, "finish", nil, engine.TransitionOptions{}); err != nil {
		t.Fatalf("finish after the migration: %v", err)
	}
	// Run again, a migration finds nothing left to move.
	if rep, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{}); err != nil || len(rep.Migrated)+len(rep.Left)+len(rep.Waiting) != 0 {
		t.Fatalf("a second migration: %+v, %v", rep, err)
	}
}

func TestMigrateRefusesUnknownVersionsAndStates(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v1 := renameDef(t, false, "", nil)
	mustEngine(t, st, v1)
	v2 := renameDef(t, true, "", nil) // no migrate: block
	e := mustEngine(t, st, v2)
	left := started(t, e) // in INITIAL on v2
	_ = left
	e1 := mustEngine(t, st, v1)
	stuck := started(t, e1, "start") // in B on v1

	bogus := "sha256:" + strings.Repeat("0", 64)
	for _, c := range [][2]string{{bogus, v2.Version()}, {v1.Version(), bogus}} {
		_, err := e.Migrate(ctx, "rename-v1", c[0], c[1], engine.MigrateOptions{})
		if protocol.ErrorCode(err) != protocol.ENotFound || !strings.Contains(protocol.ErrorHint(err), v1.Version()) || !strings.Contains(protocol.ErrorHint(err), v2.Version()) {
			t.Fatalf("an unknown version: %v; want ENotFound listing the known versions", err)
		}
	}
	_, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{States: map[string]string{"B": "NOPE"}})
	if protocol.ErrorCode(err) != protocol.EInvalid || !strings.Contains(protocol.ErrorHint(err), "NOPE") {
		t.Fatalf("a mapping to a missing state: %v; want EInvalid", err)
	}
	// Without a mapping, the run in B is listed and left.
	rep, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{})
	if err != nil || len(rep.Left) != 1 || rep.Left[0].RunID != stuck || len(rep.Migrated) != 0 {
		t.Fatalf("migrate without a mapping: %+v, %v", rep, err)
	}
	if f := frameOf(t, e, stuck); f.State != "B" || f.Links["workflow_version"].Version != v1.Version() {
		t.Fatalf("the left run: %+v", f)
	}
	// An explicit mapping moves it.
	rep, err = e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{States: map[string]string{"B": "B2"}})
	if err != nil || len(rep.Migrated) != 1 {
		t.Fatalf("migrate with a mapping: %+v, %v", rep, err)
	}
}

// Migrations race transitions of the same runs: every run ends in a state
// its pinned version declares, and a migrated event always leaves the
// state the run was in.
func TestMigrateUnderConcurrentTransitions(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v1 := renameDef(t, false, "", nil)
	e1 := mustEngine(t, st, v1)
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		ids[i] = started(t, e1, "start")
	}
	v2 := renameDef(t, true, v1.Version(), nil)
	e := mustEngine(t, st, v2)
	var wg sync.WaitGroup
	for i, id := range ids {
		if i%2 == 0 {
			continue
		}
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			// Either before the migration (on v1) or after it (on v2):
			// finish exists on both, so it never fails.
			if _, err := e.Transition(ctx, id, "finish", nil, engine.TransitionOptions{}); err != nil {
				t.Errorf("finish: %v", err)
			}
		}(id)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{}); err != nil {
			t.Errorf("migrate: %v", err)
		}
	}()
	wg.Wait()
	for i, id := range ids {
		r, err := e.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Def.State(r.State); !ok || r.Def.Version() != r.WorkflowVersion {
			t.Fatalf("run %d is in %s, pinned to %s: not a state of its version", i, r.State, r.WorkflowVersion)
		}
		if i%2 == 0 && (r.State != "B2" || r.WorkflowVersion != v2.Version()) {
			t.Fatalf("run %d, left alone, is %s on %s; want migrated to B2", i, r.State, r.WorkflowVersion)
		}
		evs, _ := e.Events(ctx, id, 0, 0)
		for k, ev := range evs {
			if ev.Kind == store.EventMigrated && (k == 0 || evs[k-1].To != ev.From) {
				t.Fatalf("run %d: a migrated event leaves %s, but the run was in %s", i, ev.From, evs[k-1].To)
			}
		}
	}
}

// A run that is processing when the migration runs moves once its task
// settles, on whichever process settles it.
func TestProcessingRunMigratesOnceItsTaskSettles(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	release := make(chan struct{})
	task := func(ctx context.Context, tc *workflow.TaskContext) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "", nil
	}
	build := func(renamed bool, label string) *workflow.Definition {
		b := "WAIT"
		if renamed {
			b = "WAIT2"
		}
		w := workflow.New("proc-v1", "INITIAL").Version(label)
		w.State("INITIAL")
		w.State("WORK").Task(task, "worked", "")
		w.State(b).Hint("Waiting.")
		w.State("DONE")
		w.Transition("INITIAL", "start", "WORK")
		w.Transition("WORK", "worked", b)
		w.Transition(b, "finish", "DONE")
		return w.MustBuild()
	}
	v1 := build(false, "")
	e1 := mustEngine(t, st, v1)
	r, err := e1.StartRun(ctx, "proc-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Transition(ctx, r.ID, "start", nil, engine.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	v2 := build(true, "2")
	e := mustEngine(t, st, v2)
	// The task settles on another process, one that still serves v1: the
	// standing migration is in the store, not in the migrating process.
	old := mustEngine(t, st, v1)
	sub := old.Hub().Subscribe(r.ID)
	defer sub.Close()
	rep, err := e.Migrate(ctx, "proc-v1", v1.Version(), v2.Version(), engine.MigrateOptions{States: map[string]string{"WAIT": "WAIT2"}})
	if err != nil || len(rep.Waiting) != 1 || len(rep.Migrated) != 0 {
		t.Fatalf("migrating a processing run: %+v, %v; want it waiting", rep, err)
	}
	if got, _ := e.GetRun(ctx, r.ID); got.WorkflowVersion != v1.Version() {
		t.Fatalf("a processing run was re-pinned at once to %s", got.WorkflowVersion)
	}
	w := old.StartWorkers(&engine.WorkerOptions{Workers: 1, Lease: time.Minute})
	defer w.Stop(time.Second)
	close(release)
	deadline := time.After(30 * time.Second) // a bound on a hang, not a timing
	for {
		select {
		case m := <-sub.C:
			if m.Event != nil && m.Event.Kind == store.EventMigrated {
				got, _ := e.GetRun(ctx, r.ID)
				if got.State != "WAIT2" || got.WorkflowVersion != v2.Version() || m.Event.From != "WAIT" {
					t.Fatalf("after the task settled: %s on %s (event %+v)", got.State, got.WorkflowVersion, m.Event)
				}
				return
			}
		case <-deadline:
			got, _ := e.GetRun(ctx, r.ID)
			t.Fatalf("the run did not migrate after its task settled: %s on %s", got.State, got.WorkflowVersion)
		}
	}
}

// A run pinned to a Go-defined version whose funcs this process does not
// register is still served: the frame's hint says which funcs are missing,
// the guard refuses with that reason, the tool answers so; nothing is a 500.
func TestPinnedGoVersionWithMissingFuncs(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	b := workflow.New("go-v1", "DRAFT")
	b.State("DRAFT").Hint("Write it.").Tool("lint", "Lint.", nil, func(context.Context, workflow.ToolCall) (any, error) { return "ok", nil })
	b.State("DONE")
	b.Transition("DRAFT", "submit", "DONE").Guard(func(map[string]any) (bool, string) { return true, "" })
	v1 := b.MustBuild()
	r, err := mustEngine(t, st, v1).StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}

	n := workflow.New("go-v1", "DRAFT").Version("2") // the funcs are gone in this release
	n.State("DRAFT").Hint("Write it.")
	n.State("DONE")
	n.Transition("DRAFT", "submit", "DONE")
	e := mustEngine(t, st, n.MustBuild())

	f := frameOf(t, e, r.ID)
	if f.Links["workflow_version"].Version != v1.Version() || !strings.Contains(f.Hint, "guard:DRAFT/submit") || !strings.Contains(f.Hint, "tool:DRAFT/lint") {
		t.Fatalf("the frame of a run whose funcs are missing: hint %q, version %s", f.Hint, f.Links["workflow_version"].Version)
	}
	_, err = e.Transition(ctx, r.ID, "submit", nil, engine.TransitionOptions{})
	if protocol.ErrorCode(err) != protocol.EForbidden || !strings.Contains(protocol.ErrorHint(err), "guard:DRAFT/submit") {
		t.Fatalf("a transition behind a missing guard: %v", err)
	}
	_, err = e.InvokeTool(ctx, r.ID, "lint", map[string]any{}, engine.ToolOptions{})
	if code := protocol.ErrorCode(err); code == protocol.EInternal || code == "" || !strings.Contains(protocol.ErrorHint(err), "tool:DRAFT/lint") {
		t.Fatalf("a missing tool: %v", err)
	}
}

// staleListing lists, as runs of a version, runs that were moved off it
// since: what a migration racing another one reads.
type staleListing struct {
	store.Store
	runs []store.Run
}

func (s *staleListing) PinnedRuns(ctx context.Context, workflowID, version, after string, limit int) ([]store.Run, error) {
	var out []store.Run
	for _, r := range s.runs {
		if r.ID > after {
			out = append(out, r)
		}
	}
	return out, nil
}

// A migration decides on the run as stored when it moves it: a run listed
// on from but re-pinned since (by a concurrent migration) is not moved
// again, and a migration to the same version moves nothing.
func TestMigrateDecidesOnTheStoredRun(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v1 := renameDef(t, false, "", nil)
	e1 := mustEngine(t, st, v1)
	id := started(t, e1, "start")
	listed, _ := st.GetRun(ctx, id) // still on v1
	v2 := renameDef(t, true, v1.Version(), nil)
	e := mustEngine(t, st, v2)
	if rep, err := e.Migrate(ctx, "rename-v1", v1.Version(), v1.Version(), engine.MigrateOptions{}); err != nil || len(rep.Migrated) != 0 {
		t.Fatalf("a migration to the same version: %+v, %v", rep, err)
	}
	if _, err := e.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := mustEngine(t, &staleListing{Store: st, runs: []store.Run{listed}}, v2)
	rep, err := stale.Migrate(ctx, "rename-v1", v1.Version(), v2.Version(), engine.MigrateOptions{})
	if err != nil || len(rep.Migrated) != 0 {
		t.Fatalf("migrating a run listed on v1 but on v2 now: %+v, %v; want it not moved again", rep, err)
	}
	evs, _ := st.Events(ctx, id, 0, 0)
	n := 0
	for _, ev := range evs {
		if ev.Kind == store.EventMigrated {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d migrated events, want 1", n)
	}
}

// A run pinned to an older version links that version's skill, which may
// differ from the served one at the same path.
func TestPinnedRunLinksItsVersionsSkill(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	build := func(content string) *workflow.Definition {
		b := workflow.New("skill-v1", "WORK")
		b.State("WORK").Skill(workflow.Skill{Name: "worker", Path: "work/SKILL.md", Content: []byte(content)})
		b.State("DONE")
		b.Transition("WORK", "done", "DONE")
		return b.MustBuild()
	}
	v1 := build("# Work, the old way\n")
	r, err := mustEngine(t, st, v1).StartRun(ctx, "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v2 := build("# Work, the new way\n")
	e := mustEngine(t, st, v2)
	f := frameOf(t, e, r.ID)
	want := "http://x/skills/work/SKILL.md?workflow_id=skill-v1&version=" + strings.ReplaceAll(v1.Version(), ":", "%3A")
	if f.ActiveSkill == nil || f.ActiveSkill.URL != want {
		t.Fatalf("active_skill %+v, want the url %s", f.ActiveSkill, want)
	}
	if c, err := e.SkillAt(ctx, "work/SKILL.md", "skill-v1", v1.Version()); err != nil || string(c.Body) != "# Work, the old way\n" {
		t.Fatalf("the old version's skill: %v %v", c, err)
	}
	if c, err := e.Skill("work/SKILL.md"); err != nil || string(c.Body) != "# Work, the new way\n" {
		t.Fatalf("the served skill: %v %v", c, err)
	}
	// A new run links the served skill, as before.
	n, _ := e.StartRun(ctx, "", nil, engine.StartOptions{})
	if f := e.Frame(n, "http://x"); f.ActiveSkill.URL != "http://x/skills/work/SKILL.md" {
		t.Fatalf("a new run's skill url: %s", f.ActiveSkill.URL)
	}
}

// Migrate takes a version abbreviated as asmp attach shows it, when it
// names one stored version; too short an abbreviation names none.
func TestMigrateTakesAnAbbreviatedVersion(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v1 := renameDef(t, false, "", nil)
	id := started(t, mustEngine(t, st, v1), "start")
	v2 := renameDef(t, true, v1.Version(), nil)
	e := mustEngine(t, st, v2)
	short := func(v string) string { return v[:len("sha256:")+12] }
	if _, err := e.Migrate(ctx, "rename-v1", v1.Version()[:len("sha256:")+4], v2.Version(), engine.MigrateOptions{}); protocol.ErrorCode(err) != protocol.ENotFound {
		t.Fatalf("a 4-digit abbreviation: %v, want ENotFound", err)
	}
	rep, err := e.Migrate(ctx, "rename-v1", short(v1.Version()), short(v2.Version()), engine.MigrateOptions{})
	if err != nil || len(rep.Migrated) != 1 || rep.From != v1.Version() || rep.To != v2.Version() {
		t.Fatalf("migrate by abbreviations: %+v, %v", rep, err)
	}
	if r, _ := e.GetRun(ctx, id); r.WorkflowVersion != v2.Version() {
		t.Fatalf("the run is on %s", r.WorkflowVersion)
	}
}
