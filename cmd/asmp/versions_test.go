package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rename workflow: v1 has state B with a resource file; v2 renames B
// to B2, drops the file (its guide is inline text now) and says how runs
// of v1 move. A run pinned to v1 is served from its stored definition.
const renameV1 = `workflow_id: rename-v1
initial_state: INITIAL
states:
  INITIAL: {hint: Start.}
  B: {hint: In B., resources: [{path: guide, file: guide.md}]}
  DONE: {}
transitions:
  - {from: INITIAL, action: start, to: B}
  - {from: B, action: finish, to: DONE}
`

func renameV2(from string) string {
	s := strings.NewReplacer("B:", "B2:", "to: B}", "to: B2}", "from: B,", "from: B2,", "In B.", "In B2.", "file: guide.md", "text: guide of B2").Replace(renameV1)
	if from != "" {
		s += "migrate: [{from: " + from + ", states: {B: B2}}]\n"
	}
	return s
}

type versionsAnswer struct {
	Workflows []struct {
		WorkflowID string `json:"workflow_id"`
		Version    string `json:"version"`
		Versions   []struct {
			Version    string `json:"version"`
			ActiveRuns int64  `json:"active_runs"`
		} `json:"versions"`
	} `json:"workflows"`
}

func catalogVersions(t *testing.T, p *proc) map[string]int64 {
	t.Helper()
	var cat versionsAnswer
	if err := json.Unmarshal(jsonBody(t, p.do("GET", "/workflows", nil)), &cat); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, w := range cat.Workflows {
		for _, v := range w.Versions {
			out[v.Version] = v.ActiveRuns
		}
	}
	return out
}

// renameScenario: serve a file, move a run to B, rename B to B2 in the file
// and restart. The run keeps working on its version, a new run gets the new
// one, a dry run changes nothing, and `asmp runs migrate` moves it.
func renameScenario(t *testing.T, db string) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "rename.yaml")
	guide := filepath.Join(dir, "guide.md")
	os.WriteFile(wf, []byte(renameV1), 0o644)
	os.WriteFile(guide, []byte("guide of B\n"), 0o644)
	p := serve(t, "--db", db, wf)
	start := func(p *proc) string {
		id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "rename-v1"}), 201).RunID
		frameOf(t, p.do("POST", "/runs/"+id+"/transitions/start", nil), 200)
		return id
	}
	moved, kept := start(p), start(p)
	v1 := frameOf(t, p.do("GET", "/runs/"+moved, nil), 200).Links["workflow_version"].Version
	if !strings.HasPrefix(v1, "sha256:") {
		t.Fatalf("no workflow_version link: %q", v1)
	}
	p.kill()

	// The new file, and the old one's resource gone.
	os.WriteFile(wf, []byte(renameV2(v1)), 0o644)
	os.Remove(guide)
	out, err := exec.Command(binary, "validate", wf, "--against", writeTemp(t, "old.yaml", renameV1, "guide.md", "guide of B\n")).CombinedOutput()
	if err != nil {
		t.Fatalf("validate --against with a mapping: %v\n%s", err, out)
	}
	p = serve(t, "--db", db, wf)

	// The run in B keeps working on its version, served from the store.
	f := frameOf(t, p.do("GET", "/runs/"+kept, nil), 200)
	if f.State != "B" || f.Hint != "In B." || len(f.NextStates) != 1 || f.NextStates[0].Action != "finish" || f.Links["workflow_version"].Version != v1 {
		t.Fatalf("the run in B after the rename: %+v", f)
	}
	if c := cliOf(t, p.do("GET", "/runs/"+kept+"/cli", nil)); len(c.Options) != 1 || c.Options[0].Action != "finish" {
		t.Fatalf("its CLI: %+v", c)
	}
	if r := p.do("GET", "/runs/"+kept+"/resources/guide", nil); r.status != 200 || string(r.body) != "guide of B\n" {
		t.Fatalf("its resource, whose file is gone: %d %s", r.status, r.body)
	}
	if r := p.do("GET", strings.TrimPrefix(f.Links["workflow_version"].Href, p.url), nil); r.status != 200 || !strings.Contains(string(r.body), `"guide of B\n"`) {
		t.Fatalf("its stored definition: %d %s", r.status, r.body)
	}
	if f := frameOf(t, p.do("POST", "/runs/"+kept+"/transitions/finish", nil), 200); f.State != "DONE" || f.Status != "completed" {
		t.Fatalf("finish on the old version: %+v", f)
	}

	// A new run gets the new version.
	fresh := start(p)
	f = frameOf(t, p.do("GET", "/runs/"+fresh, nil), 200)
	v2 := f.Links["workflow_version"].Version
	if f.State != "B2" || v2 == v1 || v2 == "" {
		t.Fatalf("a new run: %s on %s", f.State, v2)
	}
	if got := catalogVersions(t, p); len(got) != 2 || got[v1] != 1 || got[v2] != 1 {
		t.Fatalf("GET /workflows versions: %v; want one active run on each", got)
	}

	// A dry run changes nothing.
	before := p.do("GET", "/runs/"+moved, nil)
	rep := jsonOf(t, p.do("POST", "/workflows/rename-v1/migrate", map[string]any{"from": v1, "to": v2, "dry_run": true}), 200)
	if ms, _ := rep["migrated"].([]any); len(ms) != 1 || ms[0].(map[string]any)["run_id"] != moved || ms[0].(map[string]any)["to_state"] != "B2" {
		t.Fatalf("dry run report: %v", rep)
	}
	if after := p.do("GET", "/runs/"+moved, nil); after.header.Get("ETag") != before.header.Get("ETag") || frameOf(t, after, 200).State != "B" {
		t.Fatalf("the dry run changed the run: %s", after.body)
	}

	if out, err := exec.Command(binary, "runs", "migrate", "rename-v1", "--to", v2, "--server", p.url).CombinedOutput(); err == nil || !strings.Contains(string(out), "give --from VERSION and --to VERSION") {
		t.Fatalf("asmp runs migrate without --from: %v\n%s", err, out)
	}
	// asmp runs migrate moves it, with a migrated event naming both versions.
	out, err = exec.Command(binary, "runs", "migrate", "rename-v1", "--from", v1, "--to", v2, "--server", p.url, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), moved) {
		t.Fatalf("asmp runs migrate: %v\n%s", err, out)
	}
	f = frameOf(t, p.do("GET", "/runs/"+moved, nil), 200)
	if f.State != "B2" || f.Hint != "In B2." || f.Links["workflow_version"].Version != v2 {
		t.Fatalf("after the migration: %+v", f)
	}
	var log struct {
		Events []struct {
			Kind            string `json:"kind"`
			From            string `json:"from"`
			To              string `json:"to"`
			FromVersion     string `json:"from_version"`
			WorkflowVersion string `json:"workflow_version"`
		} `json:"events"`
	}
	json.Unmarshal(jsonBody(t, p.do("GET", "/runs/"+moved+"/events", nil)), &log)
	last := log.Events[len(log.Events)-1]
	if last.Kind != "migrated" || last.From != "B" || last.To != "B2" || last.FromVersion != v1 || last.WorkflowVersion != v2 {
		t.Fatalf("the migrated event: %+v", last)
	}
	if f := frameOf(t, p.do("POST", "/runs/"+moved+"/transitions/finish", nil), 200); f.State != "DONE" {
		t.Fatalf("finish after the migration: %+v", f)
	}
	out, err = exec.Command(binary, "workflows", "--server", p.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), v1) || !strings.Contains(string(out), v2) || !strings.Contains(string(out), "rename-v1 (default)\n") {
		t.Fatalf("asmp workflows: %v\n%s", err, out)
	}
	var listed []struct {
		WorkflowID string `json:"workflow_id"`
		Versions   []struct {
			Version    string `json:"version"`
			ActiveRuns int64  `json:"active_runs"`
			Served     bool   `json:"served"`
		} `json:"versions"`
	}
	out, err = exec.Command(binary, "workflows", "--server", p.url, "--json").Output()
	if err != nil || json.Unmarshal(out, &listed) != nil || len(listed) != 1 || len(listed[0].Versions) != 2 ||
		listed[0].Versions[0].Version != v2 || !listed[0].Versions[0].Served || listed[0].Versions[0].ActiveRuns != 1 ||
		listed[0].Versions[1].Version != v1 || listed[0].Versions[1].Served || listed[0].Versions[1].ActiveRuns != 0 {
		t.Fatalf("asmp workflows --json: %v\n%s", err, out)
	}
	p.kill()

	// A rollback to the old file takes effect: new runs get v1 again.
	os.WriteFile(wf, []byte(renameV1), 0o644)
	os.WriteFile(guide, []byte("guide of B\n"), 0o644)
	p = serve(t, "--db", db, wf)
	back := start(p)
	if f := frameOf(t, p.do("GET", "/runs/"+back, nil), 200); f.State != "B" || f.Links["workflow_version"].Version != v1 {
		t.Fatalf("a new run after the rollback: %s on %s, want B on %s", f.State, f.Links["workflow_version"].Version, v1)
	}
	if f := frameOf(t, p.do("GET", "/runs/"+fresh, nil), 200); f.State != "B2" || f.Links["workflow_version"].Version != v2 {
		t.Fatalf("the run of v2 after the rollback: %+v", f)
	}
}

// writeTemp writes a file (and one file beside it) into a new directory.
func writeTemp(t *testing.T, name, body, other, otherBody string) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, other), []byte(otherBody), 0o644)
	p := filepath.Join(dir, name)
	os.WriteFile(p, []byte(body), 0o644)
	return p
}

func TestRenameScenarioSQLite(t *testing.T) {
	renameScenario(t, filepath.Join(t.TempDir(), "asmp.db"))
}

func TestRenameScenarioPostgres(t *testing.T) {
	db := freshDatabase(t)
	t.Setenv("ASMP_LEDGER_KEY", filepath.Join(t.TempDir(), "ledger.key")) // not in the working directory
	renameScenario(t, db)
}

// asmp validate --against reports the states of the old version that the
// new one drops without a migrate: mapping, and exits 1.
func TestValidateAgainst(t *testing.T) {
	old := writeTemp(t, "old.yaml", renameV1, "guide.md", "x")
	unmapped := writeTemp(t, "new.yaml", renameV2(""), "guide.md", "x")
	out, err := exec.Command(binary, "validate", unmapped, "--against", old).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "state B of the old version") {
		t.Fatalf("validate --against without a mapping: %v\n%s", err, out)
	}
	// A file of another workflow is no version of it.
	other := writeTemp(t, "other.yaml", strings.Replace(renameV1, "rename-v1", "other-v1", 1), "guide.md", "x")
	if out, err := exec.Command(binary, "validate", other, "--against", old).CombinedOutput(); err == nil || !strings.Contains(string(out), "is not a version of rename-v1") {
		t.Fatalf("validate --against another workflow: %v\n%s", err, out)
	}
	// Plain validate still checks each file on its own.
	if out, err := exec.Command(binary, "validate", unmapped, old).CombinedOutput(); err != nil {
		t.Fatalf("plain validate: %v\n%s", err, out)
	}
}

// Two replicas on one Postgres during a rolling restart: one serves v1,
// the other v2 already, and both serve every run on its own version.
func TestRollingRestartServesBothVersions(t *testing.T) {
	db := freshDatabase(t)
	t.Setenv("ASMP_LEDGER_KEY", filepath.Join(t.TempDir(), "ledger.key"))
	oldFile := writeTemp(t, "rename.yaml", renameV1, "guide.md", "guide of B\n")
	a := serve(t, "--db", db, oldFile)
	b := serve(t, "--db", db, oldFile)
	start := func(p *proc) string {
		id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "rename-v1"}), 201).RunID
		frameOf(t, p.do("POST", "/runs/"+id+"/transitions/start", nil), 200)
		return id
	}
	onV1 := []string{start(a), start(b)}
	b.kill() // B restarts with the new file; A still serves the old one.
	newFile := writeTemp(t, "rename.yaml", renameV2(""), "unused.md", "")
	b = serve(t, "--db", db, newFile)
	onV2 := []string{start(b), start(b)}
	for _, p := range []*proc{a, b} {
		for _, id := range onV1 {
			if f := frameOf(t, p.do("GET", "/runs/"+id, nil), 200); f.State != "B" || f.Hint != "In B." {
				t.Fatalf("a v1 run on a replica: %+v", f)
			}
			if r := p.do("GET", "/runs/"+id+"/resources/guide", nil); r.status != 200 || string(r.body) != "guide of B\n" {
				t.Fatalf("a v1 run's resource: %d %s", r.status, r.body)
			}
		}
		for _, id := range onV2 {
			if f := frameOf(t, p.do("GET", "/runs/"+id, nil), 200); f.State != "B2" || f.Hint != "In B2." {
				t.Fatalf("a v2 run on a replica: %+v", f)
			}
			if c := cliOf(t, p.do("GET", "/runs/"+id+"/cli", nil)); len(c.Options) != 1 || c.Options[0].Action != "finish" {
				t.Fatalf("a v2 run's CLI: %+v", c)
			}
		}
	}
	// Each replica finishes a run of the version it does not serve.
	for _, c := range []struct {
		p  *proc
		id string
	}{{a, onV2[0]}, {b, onV1[0]}, {a, onV1[1]}, {b, onV2[1]}} {
		if f := frameOf(t, c.p.do("POST", "/runs/"+c.id+"/transitions/finish", nil), 200); f.State != "DONE" || f.Status != "completed" {
			t.Fatalf("finish: %+v", f)
		}
	}
}
