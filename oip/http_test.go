package oip

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/store/memstore"
)

type server struct {
	*httptest.Server
}

func newServer(t testing.TB, h http.Handler) server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return server{s}
}

// post sends a JSON body and expects 201 with a JSON object.
func (s server) post(path, body string) (map[string]any, error) {
	resp, err := s.Client().Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

func TestRestartKeepsLedgerRootAndKey(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "asmp.db")
	keyPath := db + ".key"
	ctx := context.Background()

	st := openSQLite(t, db)
	svc := newService(t, st, &Options{KeyPath: keyPath})
	fi, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	var receipts []Receipt
	for i := range 5 {
		rc, err := svc.Dispatch(ctx, fmt.Sprintf("row-%d", i%3), json.RawMessage(simpleRow))
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, rc)
	}
	ck1, err := svc.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey := svc.VerifierKey()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openSQLite(t, db)
	svc2 := newService(t, st2, &Options{KeyPath: keyPath})
	if svc2.VerifierKey() != vkey {
		t.Fatalf("the key changed across restarts: %s vs %s", svc2.VerifierKey(), vkey)
	}
	ck2, err := svc2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ck2.TreeSize != 5 || ck2.RootHash != ck1.RootHash {
		t.Fatalf("after restart: size %d root %s, before %d %s", ck2.TreeSize, ck2.RootHash, ck1.TreeSize, ck1.RootHash)
	}
	// The old checkpoint verifies with the key served after the restart.
	if c, err := OpenCheckpoint([]byte(ck1.Note), svc2.VerifierKey()); err != nil || c.TreeSize != 5 || c.RootHash != ck1.RootHash || c.Origin != DefaultOrigin {
		t.Fatalf("old checkpoint after restart: %+v %v", c, err)
	}
	// Old receipts still verify; new appends continue the sequence.
	rec, err := svc2.Record(ctx, receipts[2].InvID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc2.Proof(ctx, rec.InvID, 0)
	if err != nil || VerifyReceipt(rec, p, []byte(ck2.Note), vkey) != nil {
		t.Fatalf("proof after restart: %+v %v", p, err)
	}
	rc, err := svc2.Dispatch(ctx, "row-0", json.RawMessage(simpleRow))
	if err != nil || rc.Seq != 6 || rc.Supersedes != receipts[3].InvID {
		t.Fatalf("dispatch after restart: %+v %v", rc, err)
	}
	ck3, _ := svc2.Checkpoint(ctx)
	cp, err := svc2.Consistency(ctx, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyCheckpointConsistency(cp, []byte(ck1.Note), []byte(ck3.Note), vkey); err != nil {
		t.Fatalf("consistency between checkpoints across the restart: %v", err)
	}

	// A corrupt key file is an error, not a new key.
	bad := filepath.Join(dir, "bad.key")
	_ = os.WriteFile(bad, []byte("not a key\n"), 0o600)
	if _, err := New(st2, &Options{KeyPath: bad}); err == nil {
		t.Fatal("New accepted a corrupt key file")
	}
	if _, err := New(st2, &Options{Origin: "has space"}); err == nil {
		t.Fatal("New accepted an origin with a space")
	}
}

func TestCheckpointEndpoints(t *testing.T) {
	svc := newService(t, memstore.New(), &Options{Origin: "example.com/test-log"})
	h := svc.Handler()
	// The empty ledger has a checkpoint too.
	empty := do(t, h, nil, "GET", "/api/ledger/checkpoint", "")
	if c, err := OpenCheckpoint(empty.Body, svc.VerifierKey()); err != nil || c.TreeSize != 0 || c.RootHash != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty checkpoint %+v %v", c, err)
	}
	for i := range 3 {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(fmt.Sprint("r", i), simpleRow))
	}
	text := do(t, h, nil, "GET", "/api/ledger/checkpoint", "")
	if text.Code != 200 || !strings.HasPrefix(text.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %v", text.Code, text.Header)
	}
	lines := strings.Split(string(text.Body), "\n")
	if lines[0] != "example.com/test-log" || lines[1] != "3" || len(lines[2]) != 44 || lines[3] != "" || !strings.HasPrefix(lines[4], "— example.com/test-log ") {
		t.Fatalf("checkpoint note:\n%s", text.Body)
	}
	key := do(t, h, nil, "GET", "/api/ledger/key", "")
	if !strings.HasPrefix(key.Header.Get("Content-Type"), "text/plain") || strings.TrimSpace(string(key.Body)) != svc.VerifierKey() {
		t.Fatalf("key %q", key.Body)
	}
	c, err := OpenCheckpoint(text.Body, string(key.Body))
	if err != nil || c.TreeSize != 3 {
		t.Fatalf("checkpoint does not verify with the served key: %v", err)
	}
	var js Checkpoint
	do(t, h, nil, "GET", "/api/ledger/checkpoint", "", "Accept", "application/json").decode(t, &js)
	if js.Origin != "example.com/test-log" || js.TreeSize != 3 || js.RootHash != c.RootHash || js.Note != string(text.Body) || js.PublicKey != svc.VerifierKey() {
		t.Fatalf("JSON checkpoint %+v", js)
	}
	km := do(t, h, nil, "GET", "/api/ledger/key", "", "Accept", "application/json").json(t)
	if km["public_key"] != svc.VerifierKey() || km["origin"] != "example.com/test-log" {
		t.Fatalf("JSON key %v", km)
	}

	// Proof and consistency parameters.
	var first Receipt
	_ = json.Unmarshal(do(t, h, nil, "POST", "/api/dispatch", dispatchBody("r0", simpleRow)).Body, &first)
	expectError(t, do(t, h, nil, "GET", "/api/ledger/proof", ""), 400, "inv_ID")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/proof?inv_ID=inv_nope", ""), 404, "inv_nope")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+first.InvID+"&tree_size=x", ""), 400, "tree_size")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+first.InvID+"&tree_size=3", ""), 400, "tree_size")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+first.InvID+"&tree_size=9", ""), 400, "tree_size")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/consistency", ""), 400, "from")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/consistency?from=0", ""), 400, "from")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/consistency?from=3&to=2", ""), 400, "from")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/consistency?from=1&to=99", ""), 400)
	var cp ConsistencyProof
	r := do(t, h, nil, "GET", "/api/ledger/consistency?from=2&to=4", "")
	r.decode(t, &cp)
	if cp.From != 2 || cp.To != 4 || len(cp.Proof) == 0 || VerifyConsistency(cp) != nil {
		t.Fatalf("consistency %s", r.Body)
	}
	raw := r.json(t)
	for _, k := range []string{"from", "to", "proof", "root_from", "root_to"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("consistency answer lacks %s", k)
		}
	}
	var pr map[string]any
	do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+first.InvID, "").decode(t, &pr)
	for _, k := range []string{"inv_ID", "seq", "leaf_index", "tree_size", "leaf_hash", "root_hash", "proof", "entry_hash", "checkpoint"} {
		if _, ok := pr[k]; !ok {
			t.Errorf("proof answer lacks %s", k)
		}
	}
}

func TestDirectory(t *testing.T) {
	svc := newService(t, memstore.New(), &Options{MaxPage: 2})
	h := svc.Handler()
	do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
	for _, k := range []string{"b-row", "a-row", "c-row"} {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(k, simpleRow))
	}
	v2 := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("b-row", strings.Replace(simpleRow, "Say it.", "Say it twice.", 1))).json(t)
	do(t, h, nil, "POST", "/api/dispatch", dispatchBody("run-1", `{"type":"invocation","object_key":"a-row","input":{"word":"hi"}}`))

	var keys []string
	var rows []DirectoryRow
	after := ""
	for page := 0; ; page++ {
		var p DirectoryPage
		r := do(t, h, nil, "GET", "/api/directory?after="+after, "")
		r.decode(t, &p)
		if len(p.Rows) > 2 || page > 3 {
			t.Fatalf("page %d: %s", page, r.Body)
		}
		for _, row := range p.Rows {
			keys = append(keys, row.Key)
			rows = append(rows, row)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if strings.Join(keys, ",") != "a-row,b-row,c-row,my-cli-tool-v1" {
		t.Fatalf("directory keys %v", keys)
	}
	if rows[1].InvID != v2["inv_ID"] || rows[1].Description != "Say it twice." {
		t.Fatalf("b-row shows %+v, want version %v", rows[1], v2["inv_ID"])
	}
	// The seed's Directory Row object.
	var page DirectoryPage
	do(t, h, nil, "GET", "/api/directory?after=c-row&limit=1", "").decode(t, &page)
	raw := do(t, h, nil, "GET", "/api/directory?after=c-row&limit=1", "").json(t)
	row := raw["rows"].([]any)[0].(map[string]any)
	if row["key"] != "my-cli-tool-v1" || row["type"] != "cli" || row["command"] != "mytool" || row["output_format"] != "text" ||
		row["invocation_method"] != "exec" || row["source_url"] != "https://github.com/example/mytool/releases/v1.0.0" || row["inv_ID"] == nil {
		t.Fatalf("directory row %v", row)
	}
	flags := row["flags"].([]any)
	if f := flags[0].(map[string]any); f["short_alias"] != "-o" || f["default"] != "./output.txt" || f["required"] != false {
		t.Fatalf("flag %v", f)
	}
	if a := row["args"].([]any)[0].(map[string]any); a["name"] != "input_file" || a["required"] != true {
		t.Fatalf("arg %v", a)
	}
	if _, ok := raw["next"]; ok {
		t.Errorf("last page has next: %v", raw)
	}
	expectError(t, do(t, h, nil, "GET", "/api/directory?limit=-1", ""), 400, "limit")
	expectError(t, do(t, h, nil, "GET", "/api/directory?limit=x", ""), 400, "limit")
}

func TestCommandEndpoint(t *testing.T) {
	st := memstore.New()
	h := newService(t, st, nil).Handler()
	do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
	do(t, h, nil, "POST", "/api/dispatch", dispatchBody("shell-row", `{"type":"directory_row","command":"grep","invocation_method":"shell","args":[{"name":"pattern","type":"string","required":true}]}`))
	n := size(t, st)

	r := do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"input":{"input_file":"data.txt","output":"result.txt","verbose":true}}`)
	if r.Code != 200 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	var out struct {
		Argv             []string `json:"argv"`
		Command          string   `json:"command"`
		InvocationMethod string   `json:"invocation_method"`
	}
	r.decode(t, &out)
	if strings.Join(out.Argv, " ") != "mytool data.txt -o result.txt -v" || out.Command != "mytool data.txt -o result.txt -v" || out.InvocationMethod != "exec" {
		t.Fatalf("seed conformance: %s", r.Body)
	}
	r = do(t, h, nil, "POST", "/api/commands/shell-row", `{"input":{"pattern":"a b; rm -rf /"}}`)
	r.decode(t, &out)
	if out.InvocationMethod != "shell" || out.Command != `grep 'a b; rm -rf /'` || len(out.Argv) != 2 {
		t.Fatalf("shell row: %s", r.Body)
	}
	if got := size(t, st); got != n {
		t.Fatalf("building a command wrote to the ledger (%d → %d)", n, got)
	}
	expectError(t, do(t, h, nil, "POST", "/api/commands/nope", `{"input":{}}`), 404, "nope")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"input":{}}`), 400, "input_file")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"input":{"input_file":"a","verbose":"yes"}}`), 400, "verbose")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"input":{"input_file":"a","colour":1}}`), 400, "colour")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"inputs":{}}`), 400, "inputs")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `{"input":[]}`), 400, "input")
	expectError(t, do(t, h, nil, "POST", "/api/commands/my-cli-tool-v1", `nope`), 400)
	expectError(t, do(t, h, nil, "POST", "/api/commands/bad%20key", `{}`), 400, "key")
	if got := size(t, st); got != n {
		t.Fatalf("command errors wrote to the ledger")
	}
}

type fakeExecutor struct {
	calls atomic.Int32
	last  Execution
}

func (f *fakeExecutor) Execute(ctx context.Context, x Execution) Outcome {
	f.calls.Add(1)
	f.last = x
	code := 0
	return Outcome{Class: OutcomeSucceeded, ExitCode: &code, DurationMS: 3, Stdout: &Stream{Text: "ok\n", Size: 3, SHA256: "x"}}
}

func TestInvocations(t *testing.T) {
	st := memstore.New()
	exec := &fakeExecutor{}
	svc := newService(t, st, &Options{Executor: exec})
	h := svc.Handler()
	row := do(t, h, nil, "POST", "/api/dispatch", seedRequest(t)).json(t)

	// Recorded without execution: one record with the constructed command.
	r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("build-1", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"data.txt","verbose":true}}`))
	if r.Code != 201 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	rc := r.json(t)
	if rc["object_key"] != "build-1" || rc["outcome"] != nil {
		t.Fatalf("receipt %s", r.Body)
	}
	var rec Record
	do(t, h, nil, "GET", "/api/dispatch?receipt="+rc["inv_ID"].(string), "").decode(t, &rec)
	var body struct {
		Type      string `json:"type"`
		ObjectKey string `json:"object_key"`
		RowInvID  string `json:"row_inv_ID"`
		Execute   bool   `json:"execute"`
		Command   struct {
			Argv    []string `json:"argv"`
			Command string   `json:"command"`
		} `json:"command"`
		Outcome *Outcome `json:"outcome"`
	}
	_ = json.Unmarshal(rec.Body, &body)
	if rec.Type != TypeInvocation || body.ObjectKey != "my-cli-tool-v1" || body.RowInvID != row["inv_ID"] || body.Command.Command != "mytool data.txt -v" || body.Outcome != nil {
		t.Fatalf("invocation record %s", rec.Body)
	}

	// Invalid input: recorded as refused.
	r = do(t, h, nil, "POST", "/api/dispatch", dispatchBody("build-2", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"verbose":true}}`))
	if r.Code != 201 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	var refused Receipt
	r.decode(t, &refused)
	if refused.Outcome == nil || refused.Outcome.Class != OutcomeRefused || !strings.Contains(refused.Outcome.Reason, "input_file") {
		t.Fatalf("refused receipt %s", r.Body)
	}

	// Execution without the exec scope: refused, nothing run.
	noExec := &auth.Principal{Name: "bot", Scopes: []string{auth.ScopeDispatch, auth.ScopeRead}}
	r = do(t, h, noExec, "POST", "/api/dispatch", dispatchBody("build-3", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"a"},"execute":true}`))
	r.decode(t, &refused)
	if r.Code != 201 || refused.Outcome == nil || refused.Outcome.Class != OutcomeRefused || !strings.Contains(refused.Outcome.Reason, "exec") || exec.calls.Load() != 0 {
		t.Fatalf("no-scope execute: %s", r.Body)
	}

	// With authority: attempt, then result.
	before := size(t, st)
	r = do(t, h, nil, "POST", "/api/dispatch", dispatchBody("build-4", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"a"},"execute":true}`))
	var done Receipt
	r.decode(t, &done)
	if r.Code != 201 || done.Outcome == nil || done.Outcome.Class != OutcomeSucceeded || exec.calls.Load() != 1 || size(t, st) != before+2 {
		t.Fatalf("execute: %s", r.Body)
	}
	if strings.Join(exec.last.Command.Argv, " ") != "mytool a" || exec.last.RowInvID != row["inv_ID"] || exec.last.Row == nil {
		t.Fatalf("executor got %+v", exec.last)
	}
	var hist History
	do(t, h, nil, "GET", "/api/dispatch?key=build-4&history=true", "").decode(t, &hist)
	if len(hist.Records) != 2 || hist.Records[0].Type != TypeInvocation || hist.Records[1].Type != TypeInvocationResult ||
		hist.Records[1].ResultOf != hist.Records[0].InvID || hist.Records[0].InvID != exec.last.AttemptID || done.InvID != hist.Records[1].InvID {
		t.Fatalf("execution history %+v", hist)
	}

	// Execution disabled on the server.
	h2 := newService(t, memstore.New(), nil).Handler()
	do(t, h2, nil, "POST", "/api/dispatch", seedRequest(t))
	r = do(t, h2, nil, "POST", "/api/dispatch", dispatchBody("b", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"a"},"execute":true}`))
	r.decode(t, &refused)
	if r.Code != 201 || refused.Outcome == nil || !strings.Contains(refused.Outcome.Reason, "--allow-exec") {
		t.Fatalf("disabled execute: %s", r.Body)
	}

	// Replays link both ways.
	orig := rc["inv_ID"].(string)
	rp := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("build-1-again", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"data.txt"},"replay_of":"`+orig+`"}`)).json(t)
	var o, replay Record
	do(t, h, nil, "GET", "/api/dispatch?receipt="+orig, "").decode(t, &o)
	do(t, h, nil, "GET", "/api/dispatch?receipt="+rp["inv_ID"].(string), "").decode(t, &replay)
	if len(o.ReplayedBy) != 1 || o.ReplayedBy[0] != rp["inv_ID"] || replay.ReplayOf != orig {
		t.Fatalf("replay links: %v / %q", o.ReplayedBy, replay.ReplayOf)
	}
	if e, _ := EntryHash(replay); e != replay.EntryHash {
		t.Fatal("replay's entry_hash does not cover replay_of")
	}
	if o.ReplayedByMore || strings.Contains(string(do(t, h, nil, "GET", "/api/dispatch?receipt="+orig, "").Body), "replayed_by_more") {
		t.Fatal("replayed_by_more set with one replay")
	}
	// However often a record is replayed, reading it lists the oldest
	// MaxReplayedBy replays and says that more follow.
	for i := range MaxReplayedBy {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(fmt.Sprintf("again-%d", i), `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"data.txt"},"replay_of":"`+orig+`"}`))
	}
	o = Record{}
	do(t, h, nil, "GET", "/api/dispatch?receipt="+orig, "").decode(t, &o)
	if len(o.ReplayedBy) != MaxReplayedBy || o.ReplayedBy[0] != rp["inv_ID"] || !o.ReplayedByMore {
		t.Fatalf("a record replayed %d times lists %d replays, more=%v", MaxReplayedBy+1, len(o.ReplayedBy), o.ReplayedByMore)
	}
	expectError(t, do(t, h, nil, "POST", "/api/dispatch", dispatchBody("x-1", `{"type":"invocation","object_key":"my-cli-tool-v1","replay_of":"`+row["inv_ID"].(string)+`"}`)), 400, "replay")
}
