package verify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A client pins the ledger's verifier key once, then checks receipts the
// server hands out without trusting the server.
func ExampleReceiptFrom() {
	// A server with a ledger (any asmp serve will do).
	st := memstore.New()
	ledger, _ := oip.New(st, nil)
	eng, _ := engine.New(st, examples.All(), nil)
	ts := httptest.NewServer(server.New(eng, &server.Options{API: ledger.API()}))
	defer ts.Close()

	ctx := context.Background()
	c, _ := client.New(ts.URL, nil)
	pinned, _, _ := c.LedgerKey(ctx) // kept from a trusted first contact
	rc, err := c.Dispatch(ctx, "my-cli-tool-v1", json.RawMessage(`{"type":"directory_row","command":"mytool"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, proof, err := verify.ReceiptFrom(ctx, c, rc.InvID, pinned)
	fmt.Println(rec.Key, rec.Seq, proof.TreeSize, err)
	// Output: my-cli-tool-v1 1 1 <nil>
}
