package oip

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// A key's history pages with limit and cursor (after=SEQ too) and ends
// with next_cursor null; bad limits and cursors get 400 with a hint.
func TestHistoryPaged(t *testing.T) {
	h := newService(t, memstore.New(), nil).Handler()
	var ids []string
	for i := range 5 {
		rc := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("row", strings.Replace(simpleRow, "Say it.", fmt.Sprintf("Say it %d.", i), 1))).json(t)
		ids = append(ids, rc["inv_ID"].(string))
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(fmt.Sprintf("other-%d", i), simpleRow))
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		var hist History
		r := do(t, h, nil, "GET", "/api/dispatch?key=row&history=true&limit=2&cursor="+url.QueryEscape(cursor), "")
		r.decode(t, &hist)
		if len(hist.Records) > 2 || page > 3 {
			t.Fatalf("page %d: %s", page, r.Body)
		}
		for _, rec := range hist.Records {
			got = append(got, rec.InvID)
		}
		if hist.NextCursor == nil {
			if !strings.Contains(string(r.Body), `"next_cursor":null`) {
				t.Fatalf("the last page does not say next_cursor null: %s", r.Body)
			}
			break
		}
		cursor = *hist.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged history %v, want %v", got, ids)
	}
	// after=SEQ: the records after the second version's seq.
	var second Record
	do(t, h, nil, "GET", "/api/dispatch?receipt="+ids[1], "").decode(t, &second)
	var rest History
	do(t, h, nil, "GET", fmt.Sprintf("/api/dispatch?key=row&history=true&after=%d", second.Seq), "").decode(t, &rest)
	if len(rest.Records) != 3 || rest.Records[0].InvID != ids[2] || rest.NextCursor != nil {
		t.Fatalf("after=%d: %+v", second.Seq, rest)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "limit=-3"} {
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=row&history=true&"+q, ""), 400, "limit")
	}
	var dir DirectoryPage
	do(t, h, nil, "GET", "/api/directory?limit=1", "").decode(t, &dir)
	if dir.NextCursor == nil {
		t.Fatal("a directory page of one row of six has no next_cursor")
	}
	dirCursor := *dir.NextCursor // a cursor of another list
	for _, c := range []string{"garbage!", "AAAA", dirCursor} {
		expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=row&history=true&cursor="+url.QueryEscape(c), ""), 400, "cursor")
	}
	expectError(t, do(t, h, nil, "GET", "/api/dispatch?key=row&history=true&after=x", ""), 400, "after")
}

// The directory's next_cursor leads through the same pages as after=KEY.
func TestDirectoryCursor(t *testing.T) {
	h := newService(t, memstore.New(), &Options{MaxPage: 2}).Handler()
	for _, k := range []string{"b", "a", "c", "e", "d"} {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody(k+"-row", simpleRow))
	}
	var keys []string
	cursor := ""
	for page := 0; page < 5; page++ {
		var p DirectoryPage
		do(t, h, nil, "GET", "/api/directory?cursor="+url.QueryEscape(cursor), "").decode(t, &p)
		for _, r := range p.Rows {
			keys = append(keys, r.Key)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if strings.Join(keys, ",") != "a-row,b-row,c-row,d-row,e-row" {
		t.Fatalf("keys through next_cursor: %v", keys)
	}
	expectError(t, do(t, h, nil, "GET", "/api/directory?limit=3", ""), 400, "limit")
	expectError(t, do(t, h, nil, "GET", "/api/directory?cursor=nope", ""), 400, "cursor")
	expectError(t, do(t, h, nil, "GET", "/api/directory?cursor="+url.QueryEscape(cursor)+"&after=a-row", ""), 400, "after")
}

// historyCounter counts the calls that read a key's history.
type historyCounter struct {
	store.Store
	history atomic.Int64
}

func (c *historyCounter) LedgerHistory(ctx context.Context, key string, after int64, limit int) ([]store.LedgerRecord, error) {
	c.history.Add(1)
	return c.Store.LedgerHistory(ctx, key, after, limit)
}

// Using a directory row reads its current version in one lookup: building
// its command, invoking it and reading its latest record never read the
// key's history, however long.
func TestCurrentRowIsOneLookup(t *testing.T) {
	st := &historyCounter{Store: memstore.New()}
	exec := &fakeExecutor{}
	h := newService(t, st, &Options{Executor: exec}).Handler()
	do(t, h, nil, "POST", "/api/dispatch", seedRequest(t))
	for i := range 20 {
		do(t, h, nil, "POST", "/api/dispatch", dispatchBody("echo-row", strings.Replace(simpleRow, "Say it.", fmt.Sprintf("Say it %d.", i), 1)))
	}
	st.history.Store(0)
	if r := do(t, h, nil, "POST", "/api/commands/echo-row", `{"input":{"word":"hi"}}`); r.Code != 200 {
		t.Fatalf("command: %d %s", r.Code, r.Body)
	}
	if r := do(t, h, nil, "POST", "/api/dispatch", dispatchBody("inv-1", `{"type":"invocation","object_key":"echo-row","input":{"word":"hi"},"execute":true}`)); r.Code != 201 {
		t.Fatalf("invocation: %d %s", r.Code, r.Body)
	}
	var latest Record
	do(t, h, nil, "GET", "/api/dispatch?key=echo-row", "").decode(t, &latest)
	if !strings.Contains(string(latest.Body), "Say it 19.") {
		t.Fatalf("latest record %s", latest.Body)
	}
	if n := st.history.Load(); n != 0 {
		t.Fatalf("using the current row read the key's history %d times", n)
	}
}
