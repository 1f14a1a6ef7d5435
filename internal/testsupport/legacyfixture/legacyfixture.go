// Package legacyfixture gives tests the databases made by the previous
// release (store/testdata/legacy, written by scripts/legacy-fixtures) and
// the manifests that say what those databases hold, so that the current
// code, with every migration it adds, is tested against real data of the
// release before it.
//
// The fixtures are frozen: tests copy them (Copy) and never open or write
// the committed files, and only the script regenerates them.
package legacyfixture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/store"
)

// Release is the commit (shortened) whose fixtures the tests open.
const Release = "a57f3d9"

// The fixture files of Release, relative to Dir.
const (
	SQLiteDB         = "sqlite-" + Release + ".db"
	SQLiteKey        = "sqlite-" + Release + ".db.key"
	SQLiteManifest   = "sqlite-" + Release + ".manifest.json"
	PostgresDump     = "postgres-" + Release + ".sql"
	PostgresKey      = "postgres-" + Release + ".key"
	PostgresManifest = "postgres-" + Release + ".manifest.json"
)

// Manifest is what one fixture holds, as the release's server answered
// over HTTP while the fixture was made.
type Manifest struct {
	Release      string `json:"release"`       // the full commit
	ReleaseShort string `json:"release_short"` // its 7-digit form
	Backend      string `json:"backend"`       // sqlite or postgres
	Runs         []Run  `json:"runs"`
	Task         Task   `json:"task_in_flight"`
	Ledger       Ledger `json:"ledger"`
}

// Run is one stored run and its event log.
type Run struct {
	Role       string   `json:"role"` // what the recipe made it for, e.g. wizard-done
	ID         string   `json:"id"`
	WorkflowID string   `json:"workflow_id"`
	State      string   `json:"state"`
	Status     string   `json:"status"` // the frame's status (derived or stored)
	Version    int64    `json:"version"`
	DataBytes  int      `json:"data_bytes"` // the length of the stored data JSON
	DataKeys   []string `json:"data_keys"`  // its top-level keys, sorted
	Milestones []string `json:"milestones"`
	Events     []Event  `json:"events"`
}

// Event is one entry of a run's event log.
type Event struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Action string `json:"action"`
	From   string `json:"from"`
	To     string `json:"to"`
	Actor  string `json:"actor"`
}

// Task is the background task that was in flight when the release's server
// stopped: handed back to the store, not done.
type Task struct {
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
	State    string `json:"state"`
	Version  int64  `json:"version"`
	Status   string `json:"status"` // pending or running
	Attempts int    `json:"attempts"`
}

// Ledger is the OIP ledger of the fixture.
type Ledger struct {
	Size            int64    `json:"size"`
	RootHash        string   `json:"root_hash"`  // hex, of the tree of Size records
	Checkpoint      string   `json:"checkpoint"` // the signed note at Size
	PublicKey       string   `json:"public_key"` // its verifier key
	Records         []Record `json:"records"`
	HistoryKey      string   `json:"history_key"` // a directory row key with repairs
	HistoryVersions int      `json:"history_versions"`
	DirectoryKeys   []string `json:"directory_keys"` // keys of the current rows, sorted
}

// Record is one ledger record the recipe made (or the server's start-up
// made: role seed-row).
type Record struct {
	Role       string `json:"role"`
	InvID      string `json:"inv_ID"`
	Seq        int64  `json:"seq"`
	Key        string `json:"key"`
	Type       string `json:"type"`
	EntryHash  string `json:"entry_hash"`
	Supersedes string `json:"supersedes"`
	ResultOf   string `json:"result_of"`
	ReplayOf   string `json:"replay_of"`
}

// Dir returns the directory of the fixtures (store/testdata/legacy of the
// module the test runs in).
func Dir(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "store", "testdata", "legacy")
		}
		up := filepath.Dir(d)
		if up == d {
			t.Fatal("legacyfixture: no go.mod above the working directory")
		}
		d = up
	}
}

// Load reads a fixture's manifest (e.g. SQLiteManifest) and checks that it
// describes Release and lists what the tests rely on.
func Load(t testing.TB, name string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), name))
	if err != nil {
		t.Fatalf("legacy fixture: %v (regenerate with scripts/legacy-fixtures %s)", err, Release)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("legacy fixture %s: %v", name, err)
	}
	if m.ReleaseShort != Release || len(m.Runs) == 0 || m.Task.ID == "" || m.Ledger.Size == 0 || len(m.Ledger.Records) == 0 {
		t.Fatalf("legacy fixture %s: not a manifest of release %s with runs, a task in flight and a ledger", name, Release)
	}
	return m
}

// Copy copies a fixture file to dst (mode 0600, as the server keeps its key
// files), so that a test opens or serves a copy, never the committed file.
func Copy(t testing.TB, name, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), name))
	if err != nil {
		t.Fatalf("legacy fixture: %v", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Run returns the manifest's run made for role.
func (m Manifest) Run(t testing.TB, role string) Run {
	t.Helper()
	for _, r := range m.Runs {
		if r.Role == role {
			return r
		}
	}
	t.Fatalf("legacy manifest: no run with role %q", role)
	return Run{}
}

// Record returns the manifest's ledger record made for role.
func (m Manifest) Record(t testing.TB, role string) Record {
	t.Helper()
	for _, r := range m.Ledger.Records {
		if r.Role == role {
			return r
		}
	}
	t.Fatalf("legacy manifest: no ledger record with role %q", role)
	return Record{}
}

// Store is what CheckStore reads: the methods every backend has, whatever
// interfaces they are grouped in.
type Store interface {
	GetRun(ctx context.Context, id string) (store.Run, error)
	Events(ctx context.Context, runID string, after int64, limit int) ([]store.Event, error)
	ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration, workflows []string) (store.Task, bool, error)
	LedgerSize(ctx context.Context) (int64, error)
	LedgerRecord(ctx context.Context, invID string) (store.LedgerRecord, error)
	LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]store.LedgerRecord, error)
	LedgerLatest(ctx context.Context, typ, after string, limit int) ([]store.LedgerRecord, error)
	CountRuns(ctx context.Context) ([]store.RunCount, error)
}

// CheckStore checks that s, a store opened by the current code on a copy of
// the fixture, holds everything m lists: every run (workflow, state,
// version, data, event log), the task in flight (claimable, and the only
// task not done) and the ledger (size, records, a key's history, the
// current directory rows). It claims the task.
func CheckStore(t *testing.T, s Store, m Manifest) {
	t.Helper()
	ctx := t.Context()
	// The counts the upgrade seeded from the runs (CountRuns reads them,
	// never the runs).
	want := map[store.RunCount]bool{}
	counts := map[[2]string]int64{}
	for _, r := range m.Runs {
		counts[[2]string{r.WorkflowID, storedStatus(r.Status)}]++
	}
	for k, n := range counts {
		want[store.RunCount{WorkflowID: k[0], Status: k[1], N: n}] = true
	}
	got, err := s.CountRuns(ctx)
	if err != nil || len(got) != len(want) {
		t.Errorf("CountRuns = %v, %v; the release stored %v", got, err, counts)
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("CountRuns has %+v; the release stored %v", c, counts)
		}
	}
	for _, want := range m.Runs {
		r, err := s.GetRun(ctx, want.ID)
		if err != nil {
			t.Fatalf("run %s (%s): %v", want.ID, want.Role, err)
		}
		if r.WorkflowID != want.WorkflowID || r.State != want.State || r.Version != want.Version {
			t.Errorf("run %s: workflow %s, state %s, version %d; the release stored %s, %s, %d",
				want.Role, r.WorkflowID, r.State, r.Version, want.WorkflowID, want.State, want.Version)
		}
		if st := storedStatus(want.Status); r.Status != st {
			t.Errorf("run %s: stored status %q, want %q", want.Role, r.Status, st)
		}
		if len(r.Data) != want.DataBytes || !slices.Equal(keysOf(t, r.Data), want.DataKeys) {
			t.Errorf("run %s: data of %d bytes with keys %v, want %d bytes with keys %v",
				want.Role, len(r.Data), keysOf(t, r.Data), want.DataBytes, want.DataKeys)
		}
		if !slices.Equal(r.Milestones, want.Milestones) {
			t.Errorf("run %s: milestones %v, want %v", want.Role, r.Milestones, want.Milestones)
		}
		evs, err := s.Events(ctx, want.ID, 0, 0)
		if err != nil {
			t.Fatalf("events of run %s: %v", want.Role, err)
		}
		if int64(len(evs)) != want.Version || len(evs) != len(want.Events) {
			t.Errorf("run %s: %d events, want %d (its version)", want.Role, len(evs), want.Version)
			continue
		}
		for i, e := range evs {
			w := want.Events[i]
			got := Event{Seq: e.Seq, Kind: e.Kind, Action: e.Action, From: e.From, To: e.To, Actor: e.Actor}
			if got != w {
				t.Errorf("run %s, event %d: %+v, want %+v", want.Role, i+1, got, w)
			}
			if e.RunID != want.ID || len(e.Data) == 0 || e.Time.IsZero() {
				t.Errorf("run %s, event %d: run %q, %d bytes of data, time %v", want.Role, i+1, e.RunID, len(e.Data), e.Time)
			}
		}
		if last := evs[len(evs)-1]; last.State != r.State || string(last.Data) != string(r.Data) {
			t.Errorf("run %s: the last event's snapshot (%s, %d bytes) is not the run's", want.Role, last.State, len(last.Data))
		}
	}

	task, ok, err := s.ClaimTask(ctx, "legacy-test", time.Now(), time.Minute, nil)
	if err != nil || !ok {
		t.Fatalf("ClaimTask: ok %v, err %v; want the task in flight %s", ok, err, m.Task.ID)
	}
	if task.ID != m.Task.ID || task.RunID != m.Task.RunID || task.State != m.Task.State ||
		task.Version != m.Task.Version || task.Attempts != m.Task.Attempts+1 || task.Status != store.TaskRunning {
		t.Errorf("claimed task %+v, want %+v claimed once more", task, m.Task)
	}
	if other, ok, err := s.ClaimTask(ctx, "legacy-test", time.Now(), time.Minute, nil); err != nil || ok {
		t.Errorf("a second ClaimTask: %+v, ok %v, err %v; the release left one task not done", other, ok, err)
	}

	if n, err := s.LedgerSize(ctx); err != nil || n != m.Ledger.Size {
		t.Errorf("LedgerSize = %d, %v; want %d", n, err, m.Ledger.Size)
	}
	for _, want := range m.Ledger.Records {
		r, err := s.LedgerRecord(ctx, want.InvID)
		if err != nil {
			t.Errorf("ledger record %s (%s): %v", want.InvID, want.Role, err)
			continue
		}
		got := Record{Role: want.Role, InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, EntryHash: r.EntryHash,
			Supersedes: r.Supersedes, ResultOf: r.ResultOf, ReplayOf: r.ReplayOf}
		if got != want {
			t.Errorf("ledger record %s:\n got %+v\nwant %+v", want.Role, got, want)
		}
		if !json.Valid(r.Body) || r.Timestamp.IsZero() || r.Source == "" {
			t.Errorf("ledger record %s: body valid %v, timestamp %v, source %q", want.Role, json.Valid(r.Body), r.Timestamp, r.Source)
		}
	}
	hist, err := s.LedgerHistory(ctx, m.Ledger.HistoryKey, 0, 0)
	if err != nil || len(hist) != m.Ledger.HistoryVersions {
		t.Errorf("LedgerHistory(%s): %d records, %v; want %d", m.Ledger.HistoryKey, len(hist), err, m.Ledger.HistoryVersions)
	}
	for i := 1; i < len(hist); i++ {
		if hist[i].Supersedes != hist[i-1].InvID {
			t.Errorf("history of %s: version %d supersedes %q, want %q", m.Ledger.HistoryKey, i+1, hist[i].Supersedes, hist[i-1].InvID)
		}
	}
	rows, err := s.LedgerLatest(ctx, oip.TypeDirectoryRow, "", 100)
	if err != nil {
		t.Fatalf("LedgerLatest: %v", err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	if !slices.Equal(keys, m.Ledger.DirectoryKeys) {
		t.Errorf("LedgerLatest(directory_row) keys %v, want %v", keys, m.Ledger.DirectoryKeys)
	}
}

// CheckCheckpoint checks a checkpoint the current code signed over the
// fixture's ledger with the fixture's key: the same key, size and root as
// the release's, and the same signed note (Ed25519 is deterministic).
func CheckCheckpoint(t *testing.T, ck oip.Checkpoint, m Manifest) {
	t.Helper()
	if _, err := oip.OpenCheckpoint([]byte(ck.Note), m.Ledger.PublicKey); err != nil {
		t.Fatalf("the checkpoint does not verify with the fixture's key: %v", err)
	}
	if ck.TreeSize != m.Ledger.Size || ck.RootHash != m.Ledger.RootHash || ck.PublicKey != m.Ledger.PublicKey {
		t.Errorf("checkpoint: size %d, root %s, key %s; the release signed size %d, root %s, key %s",
			ck.TreeSize, ck.RootHash, ck.PublicKey, m.Ledger.Size, m.Ledger.RootHash, m.Ledger.PublicKey)
	}
	if ck.Note != m.Ledger.Checkpoint {
		t.Errorf("checkpoint note:\n%s\nthe release signed:\n%s", ck.Note, m.Ledger.Checkpoint)
	}
}

// storedStatus is the status override a store keeps for a frame's status:
// processing and failed are stored, the others derived from the workflow.
func storedStatus(frame string) string {
	switch frame {
	case "processing", "failed":
		return frame
	}
	return ""
}

func keysOf(t *testing.T, data json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Errorf("run data is not a JSON object: %v", err)
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CheckPinning serves the built-in workflows (what the release served) on
// s, a store opened by the current code on a copy of the fixture, and
// checks that the first start after the upgrade pins every run the release
// left to the served version of its workflow and records it: each
// version's LegacyRuns counts its runs. A second start pins none again.
func CheckPinning(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	defs := append(examples.All(), examples.NumberFacts())
	before := map[string]int64{}
	for _, d := range defs {
		counts, err := s.PinCounts(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Version != "" {
				t.Fatalf("workflow %s: %d runs of the release are pinned to %q before the first start", d.ID, c.Runs, c.Version)
			}
			before[d.ID] += c.Runs
		}
	}
	for round := 1; round <= 2; round++ {
		if _, err := engine.New(s, defs, nil); err != nil {
			t.Fatalf("start %d after the upgrade: %v", round, err)
		}
		for _, d := range defs {
			sd, err := s.GetDefinition(ctx, d.ID, d.Version())
			if err != nil {
				t.Fatalf("workflow %s: the served version is not stored: %v", d.ID, err)
			}
			if sd.LegacyRuns != before[d.ID] {
				t.Errorf("start %d: workflow %s records %d runs of the release pinned to its version, want %d", round, d.ID, sd.LegacyRuns, before[d.ID])
			}
			runs, err := s.PinnedRuns(ctx, d.ID, d.Version(), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(runs)) != before[d.ID] {
				t.Errorf("start %d: %d runs of %s are pinned to %s, want %d", round, len(runs), d.ID, d.Version(), before[d.ID])
			}
		}
	}
}
