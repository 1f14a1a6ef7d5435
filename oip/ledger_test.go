package oip

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

var (
	hexHash   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	invIDForm = regexp.MustCompile(`^inv_[0-9A-HJKMNP-TV-Z]{26}$`)
)

// TestSeedDispatchReplayRepair follows the seed's loop: object, invoke,
// ledger, receipt, replay, repair.
func TestSeedDispatchReplayRepair(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		fixed := time.Date(2023, 10, 27, 10, 0, 0, 123456789, time.UTC)
		svc := newService(t, st, &Options{Now: func() time.Time { return fixed }})
		h := svc.Handler()

		r := do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
		if r.Code != 201 {
			t.Fatalf("seed dispatch: %d %s", r.Code, r.Body)
		}
		m := r.json(t)
		// The seed's receipt rule.
		if m["status"] != "success" {
			t.Errorf("status %v", m["status"])
		}
		inv, ok := m["inv_ID"].(string)
		if !ok || !invIDForm.MatchString(inv) {
			t.Errorf("inv_ID %v is not inv_<ULID>", m["inv_ID"])
		}
		if id, err := ulid.ParseStrict(strings.TrimPrefix(inv, "inv_")); err != nil || id.Time() != ulid.Timestamp(fixed) {
			t.Errorf("inv_ID %s: ULID %v, time from Now expected", inv, err)
		}
		if m["object_key"] != "my-cli-tool-v1" {
			t.Errorf("object_key %v", m["object_key"])
		}
		if m["message"] != "Object dispatched to ledger." {
			t.Errorf("message %v", m["message"])
		}
		if m["timestamp"] != "2023-10-27T10:00:00Z" {
			t.Errorf("timestamp %v", m["timestamp"])
		}
		if m["seq"] != float64(1) || !hexHash.MatchString(m["entry_hash"].(string)) {
			t.Errorf("seq %v entry_hash %v", m["seq"], m["entry_hash"])
		}
		if _, ok := m["supersedes"]; ok {
			t.Errorf("a first version has no supersedes: %s", r.Body)
		}
		if loc := r.Header.Get("Location"); loc != "/api/dispatch?receipt="+inv {
			t.Errorf("Location %q", loc)
		}

		// Replay by receipt and by key.
		var byReceipt, byKey Record
		do(t, h, nil, "GET", "/api/dispatch?receipt="+inv, "").decode(t, &byReceipt)
		do(t, h, nil, "GET", "/api/dispatch?key=my-cli-tool-v1", "").decode(t, &byKey)
		if byReceipt.InvID != inv || byKey.InvID != inv || byReceipt.Seq != 1 || byReceipt.Key != "my-cli-tool-v1" ||
			byReceipt.Type != TypeDirectoryRow || byReceipt.Source != "anonymous" || byReceipt.EntryHash != m["entry_hash"] {
			t.Fatalf("replayed record %+v / %+v", byReceipt, byKey)
		}
		var env struct{ Body json.RawMessage }
		_ = json.Unmarshal([]byte(seedRequest(t)), &env)
		if !jsonEqual(t, byReceipt.Body, env.Body) {
			t.Errorf("replayed body %s differs from the dispatched one", byReceipt.Body)
		}
		raw := do(t, h, nil, "GET", "/api/dispatch?receipt="+inv, "").json(t)
		if v, ok := raw["supersedes"]; !ok || v != nil {
			t.Errorf("record's supersedes should be null, got %v", v)
		}
		if v, ok := raw["replayed_by"].([]any); !ok || len(v) != 0 {
			t.Errorf("record's replayed_by should be [], got %v", raw["replayed_by"])
		}

		// Repair: the same key again.
		fixed = fixed.Add(time.Minute)
		repaired := strings.Replace(seedRequest(t), "A sample CLI tool for processing files.", "A better description.", 1)
		r2 := do(t, h, nil, "POST", "/api/dispatch", repaired)
		if r2.Code != 201 {
			t.Fatalf("repair: %d %s", r2.Code, r2.Body)
		}
		m2 := r2.json(t)
		if m2["supersedes"] != inv || m2["seq"] != float64(2) || m2["inv_ID"] == inv {
			t.Fatalf("repair receipt %s", r2.Body)
		}
		var hist History
		do(t, h, nil, "GET", "/api/dispatch?key=my-cli-tool-v1&history=true", "").decode(t, &hist)
		if hist.Key != "my-cli-tool-v1" || len(hist.Records) != 2 || hist.Records[0].InvID != inv || hist.Records[1].InvID != m2["inv_ID"] ||
			hist.Records[1].Supersedes != inv || hist.Records[0].Supersedes != "" {
			t.Fatalf("history %+v", hist)
		}
		var latest, old Record
		do(t, h, nil, "GET", "/api/dispatch?key=my-cli-tool-v1", "").decode(t, &latest)
		do(t, h, nil, "GET", "/api/dispatch?receipt="+inv, "").decode(t, &old)
		if latest.InvID != m2["inv_ID"] || old.InvID != inv || !strings.Contains(string(old.Body), "A sample CLI tool") {
			t.Fatalf("latest %s, old %s", latest.InvID, old.InvID)
		}
		if !strings.Contains(string(latest.Body), "A better description.") {
			t.Fatalf("latest body %s", latest.Body)
		}

		// Unknown receipt or key: 404 with a hint.
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?receipt=inv_nope", ""), 404, "inv_nope")
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=nope", ""), 404, "nope")
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=nope&history=true", ""), 404, "nope")
		expectError(t, do(t, h, nil, "GET", "/api/dispatch", ""), 400, "receipt")
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=a&receipt=b", ""), 400)
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=a&history=maybe", ""), 400, "history")
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=bad%20key", ""), 400, "key")
	})
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestInvalidDispatchesAppendNothing(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		h := newService(t, st, &Options{MaxBody: 4096}).Handler()
		for _, k := range []string{"ok", "ok2"} {
			if r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody(k, simpleRow)); r.Code != 201 {
				t.Fatalf("%d %s", r.Code, r.Body)
			}
		}
		cases := []struct {
			name, req string
			code      int
			words     []string
		}{
			{"no command", dispatchBody("r1", `{"type":"directory_row","description":"x"}`), 400, []string{"command"}},
			{"bad flag type", dispatchBody("r1", `{"type":"directory_row","command":"x","flags":[{"name":"f","type":"float"}]}`), 400, []string{"flags[0].type"}},
			{"bad alias", dispatchBody("r1", `{"type":"directory_row","command":"x","flags":[{"name":"f","type":"string","short_alias":"--f"}]}`), 400, []string{"short_alias"}},
			{"duplicate names", dispatchBody("r1", `{"type":"directory_row","command":"x","args":[{"name":"a","type":"string"}],"flags":[{"name":"a","type":"string"}]}`), 400, []string{"flags[0].name"}},
			{"required after optional", dispatchBody("r1", `{"type":"directory_row","command":"x","args":[{"name":"a","type":"string"},{"name":"b","type":"string","required":true}]}`), 400, []string{"args[1]"}},
			{"bad default", dispatchBody("r1", `{"type":"directory_row","command":"x","flags":[{"name":"n","type":"integer","default":"two"}]}`), 400, []string{"default"}},
			{"bad output format", dispatchBody("r1", `{"type":"directory_row","command":"x","output_format":"yaml"}`), 400, []string{"output_format"}},
			{"bad schema", dispatchBody("r1", `{"type":"directory_row","command":"x","schema":{"type":"nope"}}`), 400, []string{"schema"}},
			{"unknown type", dispatchBody("r1", `{"type":"cron_job"}`), 400, []string{"cron_job", "directory_row", "invocation"}},
			{"no type", dispatchBody("r1", `{"command":"x"}`), 400, []string{"type", "directory_row", "invocation"}},
			{"type not a string", dispatchBody("r1", `{"type":7}`), 400, []string{"type"}},
			{"empty key", dispatchBody("", simpleRow), 400, []string{"key"}},
			{"key starts with dash", dispatchBody("-x", simpleRow), 400, []string{"key"}},
			{"key with space", dispatchBody("a b", simpleRow), 400, []string{"key"}},
			{"key with slash", dispatchBody("a/b", simpleRow), 400, []string{"key"}},
			{"key too long", dispatchBody(strings.Repeat("k", 129), simpleRow), 400, []string{"key"}},
			{"key not a string", `{"key":5,"body":` + simpleRow + `}`, 400, []string{"key"}},
			{"no key", `{"body":` + simpleRow + `}`, 400, []string{"key"}},
			{"no body", `{"key":"k"}`, 400, []string{"body"}},
			{"body not an object", `{"key":"k","body":[1]}`, 400, []string{"body"}},
			{"extra field", `{"key":"k","body":` + simpleRow + `,"x":1}`, 400, []string{"x"}},
			{"not json", `{"key":`, 400, nil},
			{"array", `[]`, 400, nil},
			{"empty", ``, 400, []string{"key"}},
			{"trailing data", dispatchBody("k", simpleRow) + `{}`, 400, nil},
			{"too deep", dispatchBody("k", `{"type":"directory_row","command":"x","schema":`+strings.Repeat(`{"a":`, 70)+`1`+strings.Repeat(`}`, 70)+`}`), 400, []string{"nesting"}},
			{"inexact number", dispatchBody("k", `{"type":"directory_row","command":"x","flags":[{"name":"n","type":"integer","default":9007199254740993}]}`), 400, []string{"9007199254740993"}},
			{"duplicate member", `{"key":"k","body":{"type":"directory_row","command":"x","command":"y"}}`, 400, []string{"uplicate"}},
			{"invalid utf-8", "{\"key\":\"k\",\"body\":{\"type\":\"directory_row\",\"command\":\"\xff\"}}", 400, nil},
			{"too large", dispatchBody("k", `{"type":"directory_row","command":"x","description":"`+strings.Repeat("a", 5000)+`"}`), 413, nil},
			{"invocation of row key", dispatchBody("ok", `{"type":"invocation","object_key":"ok","input":{"word":"x"}}`), 400, []string{"key"}},
			{"invocation on a row's key", dispatchBody("ok", `{"type":"invocation","object_key":"ok2"}`), 400, []string{"ok", "directory row"}},
			{"invocation of unknown row", dispatchBody("run-1", `{"type":"invocation","object_key":"nope"}`), 404, []string{"nope"}},
			{"invocation input not object", dispatchBody("run-1", `{"type":"invocation","object_key":"ok","input":[1]}`), 400, []string{"input"}},
			{"invocation unknown field", dispatchBody("run-1", `{"type":"invocation","object_key":"ok","inputs":{}}`), 400, []string{"inputs"}},
			{"invocation no object_key", dispatchBody("run-1", `{"type":"invocation"}`), 400, []string{"object_key"}},
			{"invocation execute not bool", dispatchBody("run-1", `{"type":"invocation","object_key":"ok","execute":"yes"}`), 400, []string{"execute"}},
			{"invocation replays unknown", dispatchBody("run-1", `{"type":"invocation","object_key":"ok","replay_of":"inv_X"}`), 404, []string{"replay_of"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := size(t, st)
				m := expectError(t, do(t, h, nil, "POST", "/api/dispatch", c.req), c.code, c.words...)
				if c.code == 400 && m["error"] != "invalid" {
					t.Errorf("error code %v", m["error"])
				}
				if after := size(t, st); after != before {
					t.Fatalf("ledger grew from %d to %d on a refused dispatch", before, after)
				}
			})
		}
		m := expectError(t, do(t, h, nil, "POST", "/api/dispatch", dispatchBody("r1", `{"type":"cron_job"}`)), 400)
		if kt, _ := m["known_types"].([]any); len(kt) != 2 {
			t.Errorf("known_types %v", m["known_types"])
		}
		// A row cannot move onto an invocation key either.
		if r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("run-1", `{"type":"invocation","object_key":"ok","input":{"word":"x"}}`)); r.Code != 201 {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
		expectError(t, do(t, h, nil, "POST", "/api/dispatch", dispatchBody("run-1", simpleRow)), 400, "run-1")
		// Numbers whose double is exact are fine, in any spelling.
		if r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("nums", `{"type":"directory_row","command":"x","flags":[{"name":"n","type":"number","default":1.50},{"name":"m","type":"integer","default":1e2}]}`)); r.Code != 201 {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
	})
}

func TestExactNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "1": true, "1.0": true, "1e2": true, "0.1": true, "1.5": true, "-2.5e-3": true,
		"9007199254740992": true, "9007199254740993": false, "1e400": false, "1e-400": false,
		"0.10000000000000000001": false, "123456789012345678901234567890": false, "5e-324": true,
		"0e99999999999": true,
	} {
		if got := exactNumber(s); got != want {
			t.Errorf("exactNumber(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestEntryHashRecomputesAndTamperingFails(t *testing.T) {
	st := memstore.New()
	svc := newService(t, st, nil)
	h := svc.Handler()
	do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
	r := do(t, h, nil, "POST", "/api/dispatch", strings.Replace(seedRequest(t), `"text"`, `"json"`, 1))
	inv := r.json(t)["inv_ID"].(string)
	do(t, h, nil, "POST", "/api/dispatch", dispatchBody("other", simpleRow))

	var rec Record
	do(t, h, nil, "GET", "/api/dispatch?receipt="+inv, "").decode(t, &rec)
	got, err := EntryHash(rec)
	if err != nil || got != rec.EntryHash {
		t.Fatalf("recomputed entry_hash %s (%v), record has %s", got, err, rec.EntryHash)
	}
	// The hash is over the canonical JSON of exactly the documented fields.
	c, _ := CanonicalJSON(rec)
	var fields map[string]any
	_ = json.Unmarshal(c, &fields)
	for _, k := range []string{"inv_ID", "seq", "key", "type", "body", "timestamp", "source", "supersedes"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("canonical JSON lacks %s: %s", k, c)
		}
	}
	if len(fields) != 8 {
		t.Errorf("canonical JSON has %d fields: %s", len(fields), c)
	}

	var p Proof
	do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+inv, "").decode(t, &p)
	if p.TreeSize != 3 || p.Seq != 2 || p.LeafIndex != 1 || p.EntryHash != rec.EntryHash || p.Checkpoint == "" {
		t.Fatalf("proof %+v", p)
	}
	vkey := string(do(t, h, nil, "GET", "/api/ledger/key", "").Body)
	note := []byte(p.Checkpoint)
	if err := VerifyReceipt(rec, p, note, vkey); err != nil {
		t.Fatalf("genuine receipt does not verify: %v", err)
	}
	// Also against the checkpoint endpoint's own note.
	ck := do(t, h, nil, "GET", "/api/ledger/checkpoint", "").Body
	if err := VerifyReceipt(rec, p, ck, vkey); err != nil {
		t.Fatalf("receipt does not verify against /api/ledger/checkpoint: %v", err)
	}

	tamper := map[string]func(*Record){
		"inv_ID":     func(r *Record) { r.InvID = "inv_01HXXXXXXXXXXXXXXXXXXXXXXX" },
		"seq":        func(r *Record) { r.Seq = 3 },
		"key":        func(r *Record) { r.Key = "my-cli-tool-v2" },
		"type":       func(r *Record) { r.Type = TypeInvocation },
		"body":       func(r *Record) { r.Body = json.RawMessage(strings.Replace(string(r.Body), "mytool", "rm", 1)) },
		"body order": func(r *Record) { r.Body = json.RawMessage(`{"type":"directory_row","command":"rm"}`) },
		"timestamp":  func(r *Record) { r.Timestamp = "2099-01-01T00:00:00Z" },
		"source":     func(r *Record) { r.Source = "mallory" },
		"supersedes": func(r *Record) { r.Supersedes = "" },
		"result_of":  func(r *Record) { r.ResultOf = "inv_X" },
		"replay_of":  func(r *Record) { r.ReplayOf = "inv_X" },
	}
	for name, f := range tamper {
		bad := rec
		f(&bad)
		if err := VerifyReceipt(bad, p, note, vkey); err == nil {
			t.Errorf("tampered %s still verifies", name)
		}
		// Even with a recomputed entry_hash the proof fails.
		bad.EntryHash, _ = EntryHash(bad)
		p2 := p
		p2.EntryHash, p2.LeafHash, p2.InvID = "", "", ""
		p2.LeafIndex = bad.Seq - 1
		if err := VerifyReceipt(bad, p2, note, vkey); err == nil {
			t.Errorf("tampered %s with a fresh entry_hash still verifies", name)
		}
	}
	// Same content, different whitespace and key order, still verifies.
	same := rec
	var body map[string]any
	_ = json.Unmarshal(rec.Body, &body)
	same.Body, _ = json.MarshalIndent(body, "", "   ")
	if err := VerifyReceipt(same, p, note, vkey); err != nil {
		t.Errorf("re-encoded body does not verify: %v", err)
	}
	// Tampered proof, checkpoint or key.
	bp := p
	bp.Proof = append([]string{}, p.Proof...)
	bp.Proof[0] = strings.Repeat("0", 64)
	if VerifyReceipt(rec, bp, note, vkey) == nil {
		t.Error("tampered proof verifies")
	}
	if VerifyReceipt(rec, p, []byte(strings.Replace(string(note), "\n3\n", "\n4\n", 1)), vkey) == nil {
		t.Error("tampered checkpoint verifies")
	}
	other := newService(t, memstore.New(), nil)
	if VerifyReceipt(rec, p, note, other.VerifierKey()) == nil {
		t.Error("checkpoint verifies with another server's key")
	}
	// A proof in an older tree, with that tree's checkpoint.
	var p2 Proof
	do(t, h, nil, "GET", "/api/ledger/proof?inv_ID="+inv+"&tree_size=2", "").decode(t, &p2)
	if p2.TreeSize != 2 || VerifyReceipt(rec, p2, []byte(p2.Checkpoint), vkey) != nil {
		t.Fatalf("proof at tree size 2: %+v", p2)
	}
	if VerifyReceipt(rec, p2, note, vkey) == nil {
		t.Error("a proof for size 2 verified against the checkpoint of size 3")
	}
}

func TestConcurrentDispatchIsGapFree(t *testing.T) {
	backends(t, func(t *testing.T, st store.Store) {
		opts := &Options{KeyPath: filepath.Join(t.TempDir(), "ledger.key")} // the fresh service below needs the same key
		svc := newService(t, st, opts)
		srv := newServer(t, svc.Handler())
		const n = 100
		seqs := make(chan float64, n)
		errs := make(chan error, n)
		for i := range n {
			go func() {
				key := "row-" + string(rune('a'+i%7)) // several keys, each many versions
				m, err := srv.post("/api/dispatch", dispatchBody(key, simpleRow))
				if err != nil {
					errs <- err
					return
				}
				seqs <- m["seq"].(float64)
			}()
		}
		seen := map[int64]bool{}
		for range n {
			select {
			case err := <-errs:
				t.Fatal(err)
			case s := <-seqs:
				seen[int64(s)] = true
			}
		}
		for i := int64(1); i <= n; i++ {
			if !seen[i] {
				t.Fatalf("seq %d missing; got %v", i, seen)
			}
		}
		if got := size(t, st); got != n {
			t.Fatalf("ledger size %d", got)
		}
		// Every key's history is a chain of supersedes.
		for k := range 7 {
			hist, _, err := svc.History(context.Background(), "row-"+string(rune('a'+k)), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range hist {
				if (i == 0) != (r.Supersedes == "") || (i > 0 && r.Supersedes != hist[i-1].InvID) {
					t.Fatalf("history of row-%c breaks at %d", 'a'+k, i)
				}
			}
		}
		// The incrementally built tree equals one rebuilt from the store.
		svc.mu.RLock()
		inc := svc.tree.size()
		svc.mu.RUnlock()
		if inc != n {
			t.Fatalf("incremental tree has %d leaves", inc)
		}
		ck, err := svc.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ck.RootHash != rebuiltRoot(t, st) {
			t.Fatalf("incremental root %s differs from the rebuilt one", ck.RootHash)
		}
		fresh := newService(t, st, opts)
		if ck2, _ := fresh.Checkpoint(context.Background()); ck2.RootHash != ck.RootHash || ck2.TreeSize != n {
			t.Fatalf("a fresh service loads root %s size %d", ck2.RootHash, ck2.TreeSize)
		}
	})
}

// rebuiltRoot recomputes the ledger's root from the store alone.
func rebuiltRoot(t *testing.T, st store.Store) string {
	t.Helper()
	n := size(t, st)
	recs, err := st.LedgerRange(context.Background(), 1, n+1)
	if err != nil {
		t.Fatal(err)
	}
	var tr tree
	for i, sr := range recs {
		if sr.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, sr.Seq)
		}
		rec := fromStore(sr)
		if e, _ := EntryHash(rec); e != sr.EntryHash {
			t.Fatalf("stored entry_hash of %d is wrong", sr.Seq)
		}
		lh, err := LeafHash(rec)
		if err != nil {
			t.Fatal(err)
		}
		tr.append([hashSize]byte(lh))
	}
	root, _ := tr.root(uint64(n))
	return hex.EncodeToString(root)
}

func TestCatchUpWithAnotherWriter(t *testing.T) {
	st := memstore.New()
	a := newService(t, st, &Options{SharedStore: true})
	b := newService(t, st, &Options{SharedStore: true})
	ctx := context.Background()
	var last Receipt
	for i := range 10 {
		var err error
		if last, err = a.Dispatch(ctx, "k"+string(rune('0'+i)), json.RawMessage(simpleRow)); err != nil {
			t.Fatal(err)
		}
	}
	// b appends after a: its seq follows a's records, which b has not seen.
	rb, err := b.Dispatch(ctx, "from-b", json.RawMessage(simpleRow))
	if err != nil || rb.Seq != 11 {
		t.Fatalf("b's dispatch: %+v %v", rb, err)
	}
	p, err := b.Proof(ctx, last.InvID, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := b.Record(ctx, last.InvID)
	if p.TreeSize != 11 || VerifyReceipt(rec, p, []byte(p.Checkpoint), b.VerifierKey()) != nil {
		t.Fatalf("b's proof of a's record: %+v", p)
	}
	ca, _ := a.Checkpoint(ctx)
	cb, _ := b.Checkpoint(ctx)
	if ca.RootHash != cb.RootHash || ca.TreeSize != 11 {
		t.Fatalf("roots differ: %s %s", ca.RootHash, cb.RootHash)
	}
}

func TestScopes(t *testing.T) {
	h := newService(t, memstore.New(), nil).Handler()
	reader := &auth.Principal{Name: "ci-reader", Scopes: []string{auth.ScopeRead}}
	nobody := &auth.Principal{Name: "nobody"}
	dispatcher := &auth.Principal{Name: "ci-bot", Scopes: []string{auth.ScopeDispatch}}
	m := expectError(t, do(t, h, reader, "POST", "/api/dispatch", seedRequest(t)), 403, "dispatch")
	if m["error"] != "forbidden" {
		t.Errorf("error %v", m["error"])
	}
	r := do(t, h, dispatcher, "POST", "/api/dispatch", seedRequest(t))
	if r.Code != 201 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	inv := r.json(t)["inv_ID"].(string)
	for _, path := range []string{"/api/dispatch?receipt=" + inv, "/api/directory", "/api/ledger/checkpoint", "/api/ledger/key", "/api/ledger/proof?inv_ID=" + inv, "/api/ledger/consistency?from=1"} {
		expectError(t, do(t, h, nobody, "GET", path, ""), 403, "read")
		expectError(t, do(t, h, dispatcher, "GET", path, ""), 403, "read")
		if r := do(t, h, reader, "GET", path, ""); r.Code != 200 {
			t.Errorf("%s as reader: %d %s", path, r.Code, r.Body)
		}
	}
	expectError(t, do(t, h, nobody, "POST", "/api/commands/my-cli-tool-v1", `{}`), 403, "read")
	// The source is the principal's name.
	var rec Record
	do(t, h, reader, "GET", "/api/dispatch?receipt="+inv, "").decode(t, &rec)
	if rec.Source != "ci-bot" {
		t.Errorf("source %q", rec.Source)
	}
}

func TestRoutes(t *testing.T) {
	h := newService(t, memstore.New(), nil).Handler()
	expectError(t, do(t, h, nil, "GET", "/api/nope", ""), 404, "/api/nope")
	r := do(t, h, nil, "DELETE", "/api/dispatch", "")
	if r.Code != 405 || r.Header.Get("Allow") == "" || r.json(t)["hint"] == nil {
		t.Fatalf("DELETE /api/dispatch: %d %v %s", r.Code, r.Header, r.Body)
	}
	if r := do(t, h, nil, "GET", "/api/commands/x", ""); r.Code != 405 || r.Header.Get("Allow") != "POST" {
		t.Fatalf("GET /api/commands/x: %d %s", r.Code, r.Body)
	}
}
