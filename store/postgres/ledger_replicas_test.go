package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/verify"
)

// Two replicas (two oip services over two stores on one database, with the
// same key file) dispatching concurrently: every record has its own seq,
// every tree size exactly one checkpoint, and the checkpoints all verify
// and are consistent with each other (each extends the one before it,
// whichever replica signed it); neither replica takes the other's appends
// for tampering.
func TestReplicasSignOneLedger(t *testing.T) {
	u := testURL(t)
	schema := freshSchema(t, u)
	ctx := context.Background()
	key := filepath.Join(t.TempDir(), "ledger.key")
	var tampered error
	var tmu sync.Mutex
	onTamper := func(err error) {
		tmu.Lock()
		tampered = err
		tmu.Unlock()
	}
	stA, stB := open(t, u, schema, nil), open(t, u, schema, nil)
	a, err := oip.New(stA, &oip.Options{KeyPath: key, OnTamper: onTamper})
	if err != nil {
		t.Fatal(err)
	}
	b, err := oip.New(stB, &oip.Options{KeyPath: key, OnTamper: onTamper})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 15
	row := json.RawMessage(`{"type":"directory_row","command":"echo","description":"Say it."}`)
	var mu sync.Mutex
	seqs := map[int64]string{}
	var wg sync.WaitGroup
	for w := range 2 * workers {
		svc := a
		if w%2 == 1 {
			svc = b
		}
		wg.Go(func() {
			for i := range each {
				rc, err := svc.Dispatch(ctx, fmt.Sprintf("row-%d", (w*each+i)%7), row)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if other, dup := seqs[rc.Seq]; dup {
					t.Errorf("seq %d issued to %s and %s", rc.Seq, other, rc.InvID)
				}
				seqs[rc.Seq] = rc.InvID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	const n = 2 * workers * each
	if len(seqs) != n {
		t.Fatalf("%d seqs for %d dispatches", len(seqs), n)
	}
	recs, err := stA.LedgerRange(ctx, 1, n+2)
	if err != nil || len(recs) != n {
		t.Fatalf("LedgerRange: %d records, %v; want %d", len(recs), err, n)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || seqs[r.Seq] != r.InvID {
			t.Fatalf("record %d: seq %d inv_ID %s, the receipt said %s", i, r.Seq, r.InvID, seqs[r.Seq])
		}
	}
	cks, err := stB.LedgerCheckpoints(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int64]bool{}
	prev := int64(0)
	for _, ck := range cks {
		if sizes[ck.TreeSize] {
			t.Fatalf("two checkpoints of tree size %d", ck.TreeSize)
		}
		sizes[ck.TreeSize] = true
		if ck.PrevSize != prev {
			t.Fatalf("the checkpoint of %d follows %d, want %d", ck.TreeSize, ck.PrevSize, prev)
		}
		opened, err := verify.OpenCheckpoint([]byte(ck.Note), a.VerifierKey())
		if err != nil || opened.TreeSize != ck.TreeSize || opened.RootHash != ck.RootHash {
			t.Fatalf("the checkpoint of %d does not verify: %+v %v", ck.TreeSize, opened, err)
		}
		if prev > 0 {
			p, err := b.Consistency(ctx, prev, ck.TreeSize)
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.CheckpointConsistency(p, []byte(cks[len(sizes)-2].Note), []byte(ck.Note), a.VerifierKey()); err != nil {
				t.Fatalf("the checkpoint of %d does not extend the one of %d: %v", ck.TreeSize, prev, err)
			}
		}
		prev = ck.TreeSize
	}
	if prev != n {
		t.Fatalf("the newest checkpoint is of %d, want %d", prev, n)
	}
	if rep, err := oip.Check(ctx, stA, nil); err != nil || !rep.OK || rep.Checkpoints != int64(len(cks)) {
		t.Fatalf("Check = %+v %v", rep, err)
	}
	// The index of latest records agrees with the ledger, and an edit of
	// it is found.
	if key, err := stA.CheckLedgerHeads(ctx); err != nil || key != "" {
		t.Fatalf("CheckLedgerHeads = %q, %v", key, err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	heads := pgx.Identifier{schema, "ledger_heads"}.Sanitize()
	if _, err := conn.Exec(ctx, `UPDATE `+heads+` SET type = 'invocation' WHERE key = (SELECT MIN(key) FROM `+heads+` WHERE type = 'directory_row')`); err != nil {
		t.Fatal(err)
	}
	if key, err := stA.CheckLedgerHeads(ctx); err != nil || key == "" {
		t.Fatalf("an edited head: CheckLedgerHeads = %q, %v", key, err)
	}
	tmu.Lock()
	defer tmu.Unlock()
	if tampered != nil {
		t.Fatalf("a replica took the other's appends for tampering: %v", tampered)
	}
	t.Logf("%d records, %d checkpoints", n, len(cks))
}
