package cli_test

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
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

// asmp runs --due-before lists the runs with a timer due before a time,
// given as RFC 3339 or as a duration from now.
func TestRunsDueBefore(t *testing.T) {
	b := workflow.New("review-v1", "REVIEW")
	b.State("REVIEW").Timer(workflow.Timer{After: 10 * time.Minute, Action: "escalate"})
	b.State("DONE")
	b.Transition("REVIEW", "escalate", "DONE")
	def, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(memstore.New(), []*workflow.Definition{def}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.New(eng, nil))
	t.Cleanup(hs.Close)
	run, err := eng.StartRun(context.Background(), "", nil, engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Due in 10 minutes: before now+11m, not before now+9m.
	if out := ok(t, hs.URL, "runs", "--due-before", "11m"); !strings.Contains(out, run.ID) {
		t.Errorf("--due-before 11m:\n%s", out)
	}
	if out := ok(t, hs.URL, "runs", "--due-before", "9m"); !strings.Contains(out, "No runs.") {
		t.Errorf("--due-before 9m:\n%s", out)
	}
	at := run.CreatedAt.Add(10*time.Minute + time.Second).Format(time.RFC3339)
	if out := ok(t, hs.URL, "runs", "--due-before", at); !strings.Contains(out, run.ID) {
		t.Errorf("--due-before %s:\n%s", at, out)
	}
	fails(t, hs.URL, "neither an RFC 3339 time", "runs", "--due-before", "soon")

	// asmp show gives the time left to each pending timer, read from the
	// frame's timer links.
	due := run.CreatedAt.Add(10 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	out := ok(t, hs.URL, "show", run.ID)
	if !regexp.MustCompile(`(?m)^Timer:  escalate in (9m5\ds|10m0s) \(at ` + regexp.QuoteMeta(due) + `\)$`).MatchString(out) {
		t.Errorf("asmp show does not give the timer's time left (due %s):\n%s", due, out)
	}
}
