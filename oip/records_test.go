package oip

import (
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/store/memstore"
)

// GET /api/ledger/records lists every record newest first, page by page,
// with replay links, and refuses bad cursors and unknown parameters.
func TestRecordsNewestFirst(t *testing.T) {
	svc := newService(t, memstore.New(), &Options{MaxPage: 2})
	h := svc.Handler()
	do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
	for _, k := range []string{"a-row", "b-row", "a-row"} {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(k, simpleRow))
	}
	var seqs []int64
	cursor := ""
	for page := 0; ; page++ {
		var p RecordPage
		r := do(t, h, nil, "GET", "/api/ledger/records?cursor="+cursor, "")
		r.decode(t, &p)
		if len(p.Records) > 2 || page > 3 {
			t.Fatalf("page %d: %s", page, r.Body)
		}
		for _, rec := range p.Records {
			seqs = append(seqs, rec.Seq)
			if rec.ReplayedBy == nil || rec.EntryHash == "" {
				t.Fatalf("record without replayed_by or entry_hash: %s", r.Body)
			}
		}
		if p.NextCursor == nil {
			if !strings.Contains(string(r.Body), `"next_cursor":null`) {
				t.Fatalf("last page: %s", r.Body)
			}
			break
		}
		cursor = *p.NextCursor
	}
	if len(seqs) != 4 || seqs[0] != 4 || seqs[3] != 1 {
		t.Fatalf("seqs %v, want 4 3 2 1", seqs)
	}
	var one RecordPage
	do(t, h, nil, "GET", "/api/ledger/records?limit=1", "").decode(t, &one)
	if len(one.Records) != 1 || one.Records[0].Key != "a-row" || one.Records[0].Supersedes == "" {
		t.Fatalf("newest record %+v", one.Records)
	}
	expectError(t, do(t, h, nil, "GET", "/api/ledger/records?cursor=bogus", ""), 400, "cursor")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/records?cursor="+encodeRecordCursor(1), ""), 400, "cursor")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/records?limit=3", ""), 400, "limit")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/records?limit=0", ""), 400, "limit")
	expectError(t, do(t, h, nil, "GET", "/api/ledger/records?after=2", ""), 400, "after")
}
