package client_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

func oipServer(t *testing.T) string {
	t.Helper()
	st := memstore.New()
	svc, err := oip.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(st, allWorkflows(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, &server.Options{API: svc.API()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	return ts.URL
}

func TestOIPCalls(t *testing.T) {
	url := oipServer(t)
	// A workflow-scoped base URL still reaches the ledger at the root.
	c := must(client.New(url+"/w/config-wizard-v1", nil))(t)
	ctx := ctx(t)
	seed, err := os.ReadFile("../oip/testdata/seed_dispatch.json")
	if err != nil {
		t.Fatal(err)
	}
	first := must(c.DispatchJSON(ctx, seed))(t)
	if !strings.HasPrefix(first.InvID, "inv_") || first.Status != oip.StatusSuccess || first.Message != oip.SuccessMessage ||
		first.ObjectKey != "my-cli-tool-v1" || first.Seq != 1 || first.EntryHash == "" || first.Supersedes != "" {
		t.Fatalf("receipt = %+v", first)
	}
	// Repair: the same key again supersedes the first version.
	var req struct {
		Key  string          `json:"key"`
		Body json.RawMessage `json:"body"`
	}
	json.Unmarshal(seed, &req)
	second := must(c.Dispatch(ctx, req.Key, req.Body))(t)
	if second.Supersedes != first.InvID || second.Seq != 2 {
		t.Fatalf("repair receipt = %+v", second)
	}
	rec := must(c.Receipt(ctx, first.InvID))(t)
	if rec.InvID != first.InvID || rec.Type != oip.TypeDirectoryRow || rec.Key != req.Key || rec.EntryHash != first.EntryHash {
		t.Fatalf("record = %+v", rec)
	}
	if latest := must(c.Latest(ctx, req.Key))(t); latest.InvID != second.InvID || latest.Supersedes != first.InvID {
		t.Fatalf("latest = %+v", latest)
	}
	h := must(c.History(ctx, req.Key))(t)
	if h.Key != req.Key || len(h.Records) != 2 || h.Records[0].InvID != first.InvID {
		t.Fatalf("history = %+v", h)
	}
	page := must(c.Directory(ctx, &client.DirectoryOptions{Limit: 10}))(t)
	if len(page.Rows) != 1 || page.Rows[0].Key != req.Key || page.Rows[0].InvID != second.InvID || page.Rows[0].Type != "cli" {
		t.Fatalf("directory = %+v", page)
	}
	var keys []string
	for r, err := range c.DirectoryRows(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, r.Key)
	}
	if !slices.Equal(keys, []string{req.Key}) {
		t.Fatalf("directory rows = %v", keys)
	}
	cmd := must(c.Command(ctx, req.Key, map[string]any{"input_file": "data.txt", "output": "result.txt", "verbose": true}))(t)
	if !slices.Equal(cmd.Argv, []string{"mytool", "data.txt", "-o", "result.txt", "-v"}) || cmd.Line != "mytool data.txt -o result.txt -v" || cmd.Method != "exec" {
		t.Fatalf("command = %+v", cmd)
	}
	inv := must(c.Invoke(ctx, "build-1", client.Invocation{ObjectKey: req.Key, Input: map[string]any{"input_file": "a.txt"}}))(t)
	if inv.ObjectKey != "build-1" || inv.Seq != 3 {
		t.Fatalf("invocation receipt = %+v", inv)
	}
	ran := must(c.Invoke(ctx, "build-2", client.Invocation{ObjectKey: req.Key, Input: map[string]any{"input_file": "a.txt"}, Execute: true, ReplayOf: inv.InvID}))(t)
	if ran.Outcome == nil || ran.Outcome.Class != "refused" || ran.Outcome.Reason == "" {
		t.Fatalf("execution without an executor = %+v", ran)
	}
	// Checkpoints and proofs verify offline.
	ck := must(c.Checkpoint(ctx))(t)
	key, origin := must2(c.LedgerKey(ctx))(t)
	if ck.TreeSize < 4 || ck.PublicKey != key || origin == "" || !strings.HasPrefix(ck.Note, origin+"\n") {
		t.Fatalf("checkpoint = %+v, key %q origin %q", ck, key, origin)
	}
	p := must(c.Proof(ctx, first.InvID, 0))(t)
	if p.LeafIndex != 0 || p.TreeSize != ck.TreeSize {
		t.Fatalf("proof = %+v", p)
	}
	// *client.Client is a verify.Ledger: receipts verify in the opt-in
	// package, against the server's key or a pinned one.
	if rec, p, err := verify.ReceiptFrom(ctx, c, first.InvID, key); err != nil || rec.InvID != first.InvID || p.LeafIndex != 0 {
		t.Fatalf("verify: %+v %+v %v", rec, p, err)
	}
	if _, _, err := verify.ReceiptFrom(ctx, c, inv.InvID, ""); err != nil {
		t.Fatalf("verify with the server's key: %v", err)
	}
	if _, _, err := verify.ReceiptFrom(ctx, c, first.InvID, "asmp.dev/ledger+00000000+AWrongKeyAWrongKeyAWrongKeyAWrongKeyAWrongKe"); err == nil {
		t.Fatal("a wrong key verified")
	}
	cons := must(c.Consistency(ctx, 1, 0))(t)
	if cons.From != 1 || cons.To != ck.TreeSize || verify.Consistency(*cons) != nil {
		t.Fatalf("consistency = %+v", cons)
	}
	// Refusals keep the server's hint.
	_, err = c.Dispatch(ctx, "k1", map[string]any{"type": "poem"})
	wantError(t, err, 400, "directory_row", "invocation")
	_, err = c.Dispatch(ctx, "bad key!", map[string]any{"type": "directory_row", "command": "x"})
	wantError(t, err, 400)
	_, err = c.Receipt(ctx, "inv_01AAAAAAAAAAAAAAAAAAAAAAAA")
	wantError(t, err, 404)
	_, err = c.Command(ctx, "no-such-row", nil)
	wantError(t, err, 404)
	_, err = c.Invoke(ctx, "build-3", client.Invocation{ObjectKey: "no-such-row"})
	wantError(t, err, 404)
	_, err = c.Proof(ctx, first.InvID, 999)
	wantError(t, err, 400, "tree_size")
	if _, err := c.DispatchJSON(ctx, []byte("{")); !client.IsInvalid(err) {
		t.Fatalf("bad JSON: %v", err)
	}
}

func must2[A, B any](a A, b B, err error) func(t *testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return a, b
	}
}
