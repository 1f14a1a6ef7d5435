package oip_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A client keeps the server's verifier key, and checks a record it was
// handed against a signed checkpoint, without trusting the server.
func ExampleVerifyReceipt() {
	ctx := context.Background()
	svc, err := oip.New(memstore.New(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	rc, err := svc.Dispatch(ctx, "my-cli-tool-v1", json.RawMessage(`{"type":"directory_row","command":"mytool"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rc.Status, rc.ObjectKey, rc.Seq)

	// What GET /api/dispatch?receipt=, /api/ledger/proof?inv_ID= and
	// /api/ledger/key return.
	rec, _ := svc.Record(ctx, rc.InvID)
	proof, _ := svc.Proof(ctx, rc.InvID, 0)
	key := svc.VerifierKey()

	fmt.Println(oip.VerifyReceipt(rec, proof, []byte(proof.Checkpoint), key))
	rec.Source = "someone else"
	fmt.Println(oip.VerifyReceipt(rec, proof, []byte(proof.Checkpoint), key) != nil)
	// Output:
	// success my-cli-tool-v1 1
	// <nil>
	// true
}
