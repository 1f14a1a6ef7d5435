package oip

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/asmp-dev/asmp/store/memstore"
)

// FuzzDispatch feeds arbitrary request bodies to POST /api/dispatch. It
// never panics and never answers 5xx; a refused request (4xx, with
// status "error" and a hint) appends nothing, and an accepted one appends
// one record (two for an executed invocation) whose entry_hash recomputes
// from the record as served.
func FuzzDispatch(f *testing.F) {
	f.Add([]byte(seedRequest(f)))
	f.Add([]byte(dispatchBody("k", simpleRow)))
	f.Add([]byte(dispatchBody("run-1", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"input_file":"a b","verbose":true}}`)))
	f.Add([]byte(dispatchBody("run-2", `{"type":"invocation","object_key":"my-cli-tool-v1","input":{"output":1.5},"execute":true}`)))
	f.Add([]byte(dispatchBody("k", `{"type":"directory_row","command":"x","flags":[{"name":"n","type":"number","default":1e2}]}`)))
	f.Add([]byte(`{"key":"k","body":{"type":"directory_row","command":"x","command":"y"}}`))
	f.Add([]byte(`{"key":"k","body":{"type":"x\ud800"}}`))
	f.Add([]byte(`[{"key":"k"}]`))
	f.Add([]byte(``))

	ctx := context.Background()
	st := memstore.New()
	svc, err := New(st, nil)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := svc.DispatchJSON(ctx, []byte(seedRequest(f))); err != nil {
		f.Fatal(err)
	}
	h := svc.Handler()

	f.Fuzz(func(t *testing.T, req []byte) {
		before := size(t, st)
		r := do(t, h, nil, "POST", "/api/dispatch", string(req))
		after := size(t, st)
		if r.Code >= 500 {
			t.Fatalf("5xx for %q: %s", req, r.Body)
		}
		if r.Code != http.StatusCreated {
			if after != before {
				t.Fatalf("refused request (%d) appended %d records: %q", r.Code, after-before, req)
			}
			m := r.json(t)
			if m["status"] != "error" || m["hint"] == "" || m["hint"] == nil {
				t.Fatalf("error body without status or hint: %s", r.Body)
			}
			return
		}
		if after != before+1 && after != before+2 {
			t.Fatalf("accepted request appended %d records", after-before)
		}
		var rc Receipt
		r.decode(t, &rc)
		rec, err := svc.Record(ctx, rc.InvID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if e, err := EntryHash(back); err != nil || e != rc.EntryHash {
			t.Fatalf("entry_hash %s does not recompute (%s, %v) for %q", rc.EntryHash, e, err, req)
		}
	})
}
