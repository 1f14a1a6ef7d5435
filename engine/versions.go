package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/workflow"
)

// Workflow versions (SPEC section 12). Every definition the engine serves
// is stored (store.DefinitionStore) when the engine is made; every run is
// pinned at creation to the version it started on, and everything about
// the run (frames, /cli, guards, tools, resources, tasks, transitions)
// comes from that version, read back from the store when this process
// serves another one. Runs stored before versions existed are pinned to
// the version served at the first start after the upgrade. Moving runs
// between versions is explicit: Migrate.

// versions keeps the definitions of versions this process does not serve
// but runs are pinned to, loaded from the store on first use.
type versions struct {
	mu     sync.RWMutex
	loaded map[string]*workflow.Definition // workflowID + " " + version
}

func versionKey(workflowID, version string) string { return workflowID + " " + version }

// storeDefinitions stores every served definition and pins the runs stored
// before versions existed to the served version of their workflow.
func (e *Engine) storeDefinitions(ctx context.Context) error {
	for _, d := range e.order {
		if _, err := e.store.PutDefinition(ctx, store.Definition{WorkflowID: d.ID, Version: d.Version(), Body: d.Canonical(), FirstServed: e.now().UTC()}); err != nil {
			return fmt.Errorf("engine: storing workflow %s %s: %w", d.ID, d.Version(), err)
		}
		n, err := e.store.PinLegacyRuns(ctx, d.ID, d.Version())
		if err != nil {
			return fmt.Errorf("engine: pinning the runs of %s stored before versions: %w", d.ID, err)
		}
		if n > 0 {
			e.log.Info("pinned runs stored before workflow versions to the served version", "workflow", d.ID, "version", d.Version(), "runs", n)
		}
	}
	return nil
}

// definition returns the definition of workflowID at version: the served
// one, or the stored one ("" = the served one, for runs not pinned yet).
func (e *Engine) definition(ctx context.Context, workflowID, version string) (*workflow.Definition, error) {
	cur := e.defs[workflowID]
	if cur != nil && (version == "" || version == cur.Version()) {
		return cur, nil
	}
	if version == "" {
		return nil, protocol.Errorf(protocol.ENotFound, "Workflow %q is not served here. Served workflows: %s.", workflowID, strings.Join(e.WorkflowIDs(), ", "))
	}
	key := versionKey(workflowID, version)
	e.vers.mu.RLock()
	d := e.vers.loaded[key]
	e.vers.mu.RUnlock()
	if d != nil {
		return d, nil
	}
	sd, err := e.store.GetDefinition(ctx, workflowID, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, e.unknownVersion(ctx, workflowID, version)
	}
	if err != nil {
		return nil, internal("could not read the stored workflow definition", err)
	}
	d, err = workflow.LoadStored(sd.Body, cur)
	if err != nil {
		return nil, internal("the stored workflow definition cannot be read", err)
	}
	e.vers.mu.Lock()
	if prev := e.vers.loaded[key]; prev != nil {
		d = prev
	} else {
		if e.vers.loaded == nil {
			e.vers.loaded = map[string]*workflow.Definition{}
		}
		e.vers.loaded[key] = d
	}
	e.vers.mu.Unlock()
	return d, nil
}

// unknownVersion is the ENotFound error for a version of workflowID that is
// not stored; its hint lists the stored ones.
func (e *Engine) unknownVersion(ctx context.Context, workflowID, version string) error {
	var known []string
	if ds, err := e.store.Definitions(ctx, workflowID); err == nil {
		for _, d := range ds {
			known = append(known, d.Version)
		}
	}
	if len(known) == 0 {
		return protocol.Errorf(protocol.ENotFound, "Workflow %q has no stored versions. Served workflows: %s.", workflowID, strings.Join(e.WorkflowIDs(), ", ")).
			With("versions", []string{})
	}
	return protocol.Errorf(protocol.ENotFound, "Workflow %q has no version %q. Known versions (newest first): %s.", workflowID, version, strings.Join(known, ", ")).
		With("versions", known)
}

// VersionHref is the URL of a stored definition.
func VersionHref(rootBase, workflowID, version string) string {
	return rootBase + "/workflows/" + workflowID + "/versions/" + version
}

// StoredDefinition returns the stored definition of workflowID at version
// (its canonical document and when it was first served). ENotFound, with a
// hint listing the known versions, when it is not stored.
func (e *Engine) StoredDefinition(ctx context.Context, workflowID, version string) (store.Definition, error) {
	sd, err := e.store.GetDefinition(ctx, workflowID, version)
	if errors.Is(err, store.ErrNotFound) {
		return store.Definition{}, e.unknownVersion(ctx, workflowID, version)
	}
	if err != nil {
		return store.Definition{}, internal("could not read the stored workflow definition", err)
	}
	return sd, nil
}

// DefinitionAt returns the definition of workflowID at version, for
// showing it (the visualizer): the served one or a stored one.
func (e *Engine) DefinitionAt(ctx context.Context, workflowID, version string) (*workflow.Definition, error) {
	return e.definition(ctx, workflowID, version)
}

// Versions returns the stored versions of workflowID, newest first, with
// the number of active runs (neither completed nor failed) on each.
func (e *Engine) Versions(ctx context.Context, rootBase, workflowID string) ([]protocol.WorkflowVersion, error) {
	ds, err := e.store.Definitions(ctx, workflowID)
	if err != nil {
		return nil, internal("could not list the workflow's versions", err)
	}
	counts, err := e.store.PinCounts(ctx, workflowID)
	if err != nil {
		return nil, internal("could not count the runs per version", err)
	}
	active := map[string]int64{}
	for _, c := range counts {
		if c.Status == protocol.StatusFailed || c.Status == protocol.StatusCompleted {
			continue
		}
		if c.Status == "" {
			d, err := e.definition(ctx, workflowID, c.Version)
			if err == nil {
				if st, ok := d.State(c.State); ok && protocol.Terminal(d.StatusOf(st)) {
					continue
				}
			}
		}
		active[c.Version] += c.Runs
	}
	served := ""
	if d, ok := e.defs[workflowID]; ok {
		served = d.Version()
	}
	out := make([]protocol.WorkflowVersion, 0, len(ds))
	for _, d := range ds {
		out = append(out, protocol.WorkflowVersion{Version: d.Version, FirstServed: d.FirstServed.UTC().Truncate(time.Millisecond),
			ActiveRuns: active[d.Version], Served: d.Version == served, Href: VersionHref(rootBase, workflowID, d.Version), LegacyRuns: d.LegacyRuns})
	}
	return out, nil
}

// MigrateOptions qualify Migrate.
type MigrateOptions struct {
	// DryRun reports what would happen and changes nothing.
	DryRun bool
	// States maps states of From to states of To, in addition to (and
	// before) the served definition's `migrate:` block for From.
	States map[string]string
	// Actor names who migrates (the event's actor).
	Actor string
}

// Outcomes of a run in a migration.
const (
	MigrationMigrated  = "migrated"       // re-pinned (or, in a dry run, would be)
	MigrationLeft      = "left"           // cannot move: its state has no place in the target version
	MigrationWaiting   = "waiting"        // processing: moves once its task settles
	MigrationUnchanged = "ended_or_moved" // ended, or no longer on From
)

// MigratedRun is one run in a migration report.
type MigratedRun = protocol.MigratedRun

// MigrationReport is the answer of Migrate.
type MigrationReport = protocol.MigrationReport

// migrationPlan is a migration's resolved definitions and state mapping.
type migrationPlan struct {
	from, to *workflow.Definition
	states   map[string]string
	actor    string
}

// target returns where a run in state goes, or false.
func (p *migrationPlan) target(state string) (string, bool) {
	if to, ok := p.states[state]; ok {
		return to, true
	}
	if _, ok := p.to.State(state); ok {
		return state, true
	}
	return "", false
}

// migrationPage is how many runs Migrate reads at a time.
const migrationPage = 500

// Migrate re-pins the active runs of workflowID on version from to version
// to: runs whose state is mapped (o.States, then the served definition's
// `migrate:` block for from) or exists unchanged in to move, each with a
// migrated event on its stream, atomically and as a compare-and-set like
// any transition; the others are listed and left as they are. A run that
// is processing moves once its task settles. ENotFound, with a hint
// listing the known versions, for an unknown from or to; EInvalid for a
// mapping to a state to does not declare.
func (e *Engine) Migrate(ctx context.Context, workflowID, from, to string, o MigrateOptions) (*MigrationReport, error) {
	if from == "" || to == "" {
		return nil, protocol.Errorf(protocol.EInvalid, "A migration needs from and to: the versions (sha256:…) that GET /workflows lists.")
	}
	var err error
	if from, err = e.resolveVersion(ctx, workflowID, from); err != nil {
		return nil, err
	}
	if to, err = e.resolveVersion(ctx, workflowID, to); err != nil {
		return nil, err
	}
	fromDef, err := e.definition(ctx, workflowID, from)
	if err != nil {
		return nil, err
	}
	toDef, err := e.definition(ctx, workflowID, to)
	if err != nil {
		return nil, err
	}
	plan := &migrationPlan{from: fromDef, to: toDef, states: map[string]string{}, actor: actorOr(o.Actor)}
	if cur, ok := e.defs[workflowID]; ok && cur == toDef {
		if m, ok := cur.MigrationFrom(from); ok {
			for k, v := range m.States {
				plan.states[k] = v
			}
		}
	}
	for k, v := range o.States {
		plan.states[k] = v
	}
	for old, target := range plan.states {
		if _, ok := toDef.State(target); !ok {
			return nil, protocol.Errorf(protocol.EInvalid, "State %s is mapped to %q, which version %s of %s does not declare. Its states: %s.", old, target, to, workflowID, strings.Join(stateNames(toDef), ", ")).
				With("state", old).With("to_state", target)
		}
	}
	rep := &MigrationReport{WorkflowID: workflowID, From: from, To: to, DryRun: o.DryRun, Migrated: []MigratedRun{}, Waiting: []MigratedRun{}, Left: []MigratedRun{}}
	if from == to {
		return rep, nil
	}
	after := ""
	for {
		page, err := e.store.PinnedRuns(ctx, workflowID, from, after, migrationPage)
		if err != nil {
			return nil, internal("could not list the runs of the version", err)
		}
		for _, sr := range page {
			after = sr.ID
			mr, err := e.migrateRun(ctx, sr.ID, plan, o.DryRun)
			if err != nil {
				return nil, err
			}
			switch mr.Result {
			case MigrationMigrated:
				rep.Migrated = append(rep.Migrated, mr)
			case MigrationLeft:
				rep.Left = append(rep.Left, mr)
			case MigrationWaiting:
				rep.Waiting = append(rep.Waiting, mr)
			}
		}
		if len(page) < migrationPage {
			break
		}
	}
	if len(rep.Waiting) > 0 && !o.DryRun {
		// Stored, so that whichever process settles a task moves its run.
		m := store.Migration{WorkflowID: workflowID, From: from, To: to, States: plan.states, Actor: plan.actor, CreatedAt: e.now().UTC()}
		for _, w := range rep.Waiting {
			m.Runs = append(m.Runs, w.RunID)
		}
		if err := e.store.PutMigration(ctx, m); err != nil {
			return nil, internal("could not store the migration of the runs whose tasks are running", err)
		}
	}
	return rep, nil
}

// minVersionPrefix is the shortest abbreviation of a version Migrate
// accepts: "sha256:" and 12 hex digits, as asmp attach shows it.
const minVersionPrefix = len("sha256:") + 12

// resolveVersion returns the stored version of workflowID that v names:
// v itself, or the one version v abbreviates (at least minVersionPrefix
// long). ENotFound, listing the known versions, when none or several do.
func (e *Engine) resolveVersion(ctx context.Context, workflowID, v string) (string, error) {
	if cur, ok := e.defs[workflowID]; ok && cur.Version() == v {
		return v, nil
	}
	ds, err := e.store.Definitions(ctx, workflowID)
	if err != nil {
		return "", internal("could not list the workflow's versions", err)
	}
	var match []string
	for _, d := range ds {
		if d.Version == v {
			return v, nil
		}
		if len(v) >= minVersionPrefix && strings.HasPrefix(d.Version, v) {
			match = append(match, d.Version)
		}
	}
	if len(match) == 1 {
		return match[0], nil
	}
	return "", e.unknownVersion(ctx, workflowID, v)
}

func stateNames(d *workflow.Definition) []string {
	out := make([]string, 0, len(d.States))
	for _, s := range d.States {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// migrateRun moves one run by plan, under the run's lock, with the same
// compare-and-set as a transition: a run changed meanwhile is read and
// decided again.
func (e *Engine) migrateRun(ctx context.Context, runID string, plan *migrationPlan, dryRun bool) (MigratedRun, error) {
	mu := e.lock(runID)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 0; attempt < e.retries; attempt++ {
		r, err := e.GetRun(ctx, runID) // waits for a queued commit
		if err != nil {
			if protocol.ErrorCode(err) == protocol.ENotFound {
				return MigratedRun{RunID: runID, Result: MigrationUnchanged}, nil
			}
			return MigratedRun{}, err
		}
		mr := MigratedRun{RunID: r.ID, From: r.State}
		switch {
		case r.WorkflowVersion != plan.from.Version():
			mr.Result, mr.Reason = MigrationUnchanged, "the run is pinned to "+r.WorkflowVersion+" now"
			return mr, nil
		case protocol.Terminal(r.Status()):
			mr.Result, mr.Reason = MigrationUnchanged, "the run has ended ("+r.Status()+")"
			return mr, nil
		}
		target, ok := plan.target(r.State)
		if !ok {
			mr.Result = MigrationLeft
			mr.Reason = "state " + r.State + " does not exist in the target version and no migrate: block maps it"
			return mr, nil
		}
		mr.To = target
		if r.Snapshot.Status == protocol.StatusProcessing {
			mr.Result, mr.Reason = MigrationWaiting, "a background task is running; the run moves once it settles"
			return mr, nil
		}
		mr.Result = MigrationMigrated
		if dryRun {
			return mr, nil
		}
		c := e.migrationCommit(r, plan, target)
		err = e.store.CommitRun(ctx, r.Version, c).Wait()
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return MigratedRun{}, internal("could not store the migration of run "+r.ID, err)
		}
		e.forget(r.ID) // the kept value names the old definition
		e.outboxStored(&c)
		e.published(r.WorkflowID, c.Event)
		return mr, nil
	}
	return MigratedRun{}, protocol.Errorf(protocol.EUnavailable, "Run %s is changing too fast to migrate; try again.", runID)
}

// migrationCommit re-pins r to plan.to in state target, entering the
// target's task as a transition would.
func (e *Engine) migrationCommit(r *Run, plan *migrationPlan, target string) store.Commit {
	now := e.now().UTC()
	next := r.Run
	next.WorkflowVersion = plan.to.Version()
	next.Version = r.Version + 1
	next.UpdatedAt = now
	next.Snapshot.State = target
	next.Snapshot.Status = ""
	c := store.Commit{Run: next}
	st, _ := plan.to.State(target)
	if st != nil && st.Task != nil {
		c.Run.Snapshot.Status = protocol.StatusProcessing
		c.Enqueue = e.newTask(r.ID, target, next.Version, now)
	}
	c.Event = store.Event{RunID: r.ID, Seq: next.Version, Time: now, Kind: store.EventMigrated, Action: plan.from.Version(),
		From: r.State, To: target, Actor: plan.actor, WorkflowVersion: plan.to.Version(), Snapshot: c.Run.Snapshot}
	// The run enters target of the new version: its timers start again.
	enterTimers(&c, r.StateDef(), st, r.Data, now)
	e.outbox(plan.to, r.Status(), &c)
	return c
}

// settleMigration moves r, whose task has just settled, by the standing
// migration of its version when that names it (see Migrate).
func (e *Engine) settleMigration(ctx context.Context, r *Run) {
	m, err := e.store.GetMigration(ctx, r.WorkflowID, r.WorkflowVersion)
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		e.log.Warn("reading the standing migration of a run's version failed", "run", r.ID, "err", err)
		return
	}
	if !slices.Contains(m.Runs, r.ID) {
		return
	}
	plan := &migrationPlan{states: m.States, actor: m.Actor}
	if plan.from, err = e.definition(ctx, r.WorkflowID, m.From); err == nil {
		plan.to, err = e.definition(ctx, r.WorkflowID, m.To)
	}
	if err == nil {
		_, err = e.migrateRun(ctx, r.ID, plan, false)
	}
	if err != nil {
		e.log.Warn("migrating a run after its task settled failed", "run", r.ID, "err", err)
	}
}

// missingFuncsHint is the note a frame's hint gets when the run's version
// names Go funcs this process does not register.
func missingFuncsHint(d *workflow.Definition, state string) string {
	names := d.MissingFuncs(state)
	if len(names) == 0 {
		return ""
	}
	return " (This run's workflow version " + d.Version() + " names Go funcs this server does not register: " + strings.Join(names, ", ") + "; a server that serves that version can act on them.)"
}

// FollowVersion sets r.Def to the version ev pinned r to, when ev is an
// event that pins it (created, migrated) to another one than r.Def: so a
// stream that replays or follows a run renders each event with the
// definition the run had then. A version that cannot be read leaves r.Def.
func (e *Engine) FollowVersion(ctx context.Context, r *Run, ev *store.Event) {
	if ev.WorkflowVersion == "" || ev.WorkflowVersion == r.Def.Version() {
		return
	}
	if d, err := e.definition(ctx, r.WorkflowID, ev.WorkflowVersion); err == nil {
		r.Def = d
	}
}
