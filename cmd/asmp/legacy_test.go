package main_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/internal/testsupport/legacyfixture"
	"github.com/asmp-dev/asmp/oip"
)

// TestLegacyFixture serves a copy of the previous release's SQLite
// database (store/testdata/legacy) with today's binary: every run answers
// the state and version the release left it in, the ledger's checkpoint is
// signed by the release's key at the release's size and root, a receipt
// replays and verifies, and the task that was in flight when the release
// stopped runs to its end.
func TestLegacyFixture(t *testing.T) {
	m := legacyfixture.Load(t, legacyfixture.SQLiteManifest)
	db := filepath.Join(t.TempDir(), "asmp.db")
	legacyfixture.Copy(t, legacyfixture.SQLiteDB, db)
	legacyfixture.Copy(t, legacyfixture.SQLiteKey, db+".key") // where serve keeps a SQLite store's key
	p := serve(t, "--db", db)
	accept := []string{"Accept", "application/json"}

	for _, want := range m.Runs {
		if want.ID == m.Task.RunID {
			continue // its task runs now; checked below
		}
		r := p.do("GET", "/runs/"+want.ID, nil)
		f := frameOf(t, r, 200)
		if f.WorkflowID != want.WorkflowID || f.State != want.State || string(f.Status) != want.Status || etagVersion(r.header.Get("ETag")) != want.Version {
			t.Errorf("run %s: %s %s %s, ETag %s; the release left %s %s %s, version %d",
				want.Role, f.WorkflowID, f.State, f.Status, r.header.Get("ETag"), want.WorkflowID, want.State, want.Status, want.Version)
		}
		var log struct {
			Events []struct {
				ID     int64  `json:"id"`
				Kind   string `json:"kind"`
				Action string `json:"action"`
			} `json:"events"`
		}
		if err := json.Unmarshal(p.do("GET", "/runs/"+want.ID+"/events", nil).body, &log); err != nil {
			t.Fatal(err)
		}
		if int64(len(log.Events)) != want.Version {
			t.Errorf("run %s: %d events, want %d", want.Role, len(log.Events), want.Version)
			continue
		}
		for i, e := range log.Events {
			if w := want.Events[i]; e.ID != w.Seq || e.Kind != w.Kind || e.Action != w.Action {
				t.Errorf("run %s, event %d: %+v, want %+v", want.Role, i+1, e, w)
			}
		}
	}

	// The first start after the upgrade pinned every run of the release to
	// the version served now, and recorded it.
	var cat struct {
		Workflows []struct {
			WorkflowID string `json:"workflow_id"`
			Version    string `json:"version"`
			Versions   []struct {
				Version    string `json:"version"`
				LegacyRuns int64  `json:"legacy_runs"`
			} `json:"versions"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal(jsonBody(t, p.do("GET", "/workflows", nil)), &cat); err != nil {
		t.Fatal(err)
	}
	served := map[string]string{}
	for _, w := range cat.Workflows {
		var n int64
		for _, r := range m.Runs {
			if r.WorkflowID == w.WorkflowID {
				n++
			}
		}
		if len(w.Versions) != 1 || w.Versions[0].Version != w.Version || w.Versions[0].LegacyRuns != n {
			t.Errorf("workflow %s: versions %+v; want only the served %s, recording the release's %d runs", w.WorkflowID, w.Versions, w.Version, n)
		}
		served[w.WorkflowID] = w.Version
	}
	for _, want := range m.Runs {
		f := frameOf(t, p.do("GET", "/runs/"+want.ID, nil), 200)
		if l := f.Links["workflow_version"]; l.Version == "" || l.Version != served[want.WorkflowID] {
			t.Errorf("run %s: pinned to %q, want the served version %s", want.Role, l.Version, served[want.WorkflowID])
		}
	}

	var ck oip.Checkpoint
	if err := json.Unmarshal(jsonBody(t, p.do("GET", "/api/ledger/checkpoint", nil, accept...)), &ck); err != nil {
		t.Fatal(err)
	}
	legacyfixture.CheckCheckpoint(t, ck, m)

	for _, role := range []string{"result", "replay", "refused", "row"} {
		want := m.Record(t, role)
		var rec oip.Record
		if err := json.Unmarshal(jsonBody(t, p.do("GET", "/api/dispatch?receipt="+want.InvID, nil)), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.InvID != want.InvID || rec.Seq != want.Seq || rec.Key != want.Key || rec.Type != want.Type || rec.EntryHash != want.EntryHash || rec.ReplayOf != want.ReplayOf {
			t.Errorf("receipt %s (%s): %+v, want %+v", want.InvID, role, rec, want)
		}
		if role == "replay" && !slices.Contains(jsonOf(t, p.do("GET", "/api/dispatch?receipt="+want.ReplayOf, nil), 200)["replayed_by"].([]any), any(want.InvID)) {
			t.Errorf("the replayed invocation %s does not list %s in replayed_by", want.ReplayOf, want.InvID)
		}
	}
	// asmp verify, with the release's key pinned, against the tree the release signed.
	res := m.Record(t, "result")
	out, err := exec.Command(binary, "verify", res.InvID, "--key", m.Ledger.PublicKey, "--server", p.url, "--json").Output()
	var v struct {
		Verified bool   `json:"verified"`
		TreeSize int64  `json:"tree_size"`
		RootHash string `json:"root_hash"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || !v.Verified || v.TreeSize != m.Ledger.Size || v.RootHash != m.Ledger.RootHash {
		t.Errorf("asmp verify %s: %v\n%s", res.InvID, err, out)
	}

	// The task in flight: the release handed it back when it stopped; this
	// server claims it at start and the run leaves processing. The stream
	// ends after the run's terminal frame (bounded by the client's timeout).
	last := streamToEnd(t, p, m.Task.RunID)
	if last["state"] != "PAID" || last["status"] != "completed" || last["id"] != float64(m.Task.Version+1) {
		t.Fatalf("the task in flight: the stream ended at %v, want PAID, completed, version %d\n%s", last, m.Task.Version+1, p.stderr.String())
	}
	f := frameOf(t, p.do("GET", "/runs/"+m.Task.RunID, nil), 200)
	if f.State != "PAID" || f.Status != "completed" {
		t.Fatalf("the task in flight: run %s is %s %s", m.Task.RunID, f.State, f.Status)
	}
}

// jsonBody returns a 200 answer's body.
func jsonBody(t *testing.T, r response) []byte {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	return r.body
}

// streamToEnd reads a run's stream until the server ends it and returns
// its last frame line (a line with a state).
func streamToEnd(t *testing.T, p *proc, runID string) map[string]any {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Minute}
	res, err := c.Get(p.url + "/runs/" + runID + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("stream: status %d", res.StatusCode)
	}
	var last map[string]any
	s := bufio.NewScanner(res.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var line map[string]any
		if err := json.Unmarshal(s.Bytes(), &line); err != nil {
			t.Fatalf("stream line %q: %v", s.Text(), err)
		}
		if _, ok := line["state"]; ok {
			last = line
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v (last frame %v)", err, last)
	}
	return last
}
