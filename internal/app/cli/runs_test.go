package cli_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// asmp runs prints the server's runs, filtered, as a table or as the
// server's JSON page, and a bad filter's hint.
func TestRunsCommand(t *testing.T) {
	eng, err := engine.New(memstore.New(), examples.All(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.New(eng, nil))
	t.Cleanup(hs.Close)
	ctx := context.Background()
	wiz, err := eng.StartRun(ctx, "config-wizard-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := eng.StartRun(ctx, "expense-approval-v1", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}

	out := ok(t, hs.URL, "runs")
	mustContain(t, "asmp runs", out, "RUN_ID", "STATUS", wiz.ID, exp.ID, "awaiting_input", "INITIAL")
	if strings.Index(out, exp.ID) > strings.Index(out, wiz.ID) {
		t.Errorf("not newest first:\n%s", out)
	}
	out = ok(t, hs.URL, "runs", "--workflow", "config-wizard-v1", "--status", "active")
	if !strings.Contains(out, wiz.ID) || strings.Contains(out, exp.ID) {
		t.Errorf("filtered list:\n%s", out)
	}
	if out := ok(t, hs.URL, "runs", "--state", "DONE"); !strings.Contains(out, "No runs.") {
		t.Errorf("empty list:\n%s", out)
	}
	out = ok(t, hs.URL, "runs", "--limit", "1")
	if !strings.Contains(out, exp.ID) || strings.Contains(out, wiz.ID) || !strings.Contains(out, "More: asmp runs --cursor ") {
		t.Errorf("first page:\n%s", out)
	}
	cursor := strings.Fields(out[strings.Index(out, "--cursor "):])[1]
	if out := ok(t, hs.URL, "runs", "--limit", "1", "--cursor", strings.Trim(cursor, "'")); !strings.Contains(out, wiz.ID) || strings.Contains(out, "More:") {
		t.Errorf("second page:\n%s", out)
	}
	page := decode[struct {
		Runs []struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		} `json:"runs"`
		NextCursor *string `json:"next_cursor"`
	}](t, ok(t, hs.URL, "runs", "--status", "awaiting_input", "--json"))
	if len(page.Runs) != 1 || page.Runs[0].RunID != exp.ID || page.NextCursor != nil {
		t.Errorf("JSON page %+v", page)
	}
	fails(t, hs.URL, "Unknown status", "runs", "--status", "sleeping")
}
