package cli_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// asmp schedules list, add and rm against a server with a file schedule:
// the table, the JSON, the server's hints for what it refuses.
func TestSchedulesCommand(t *testing.T) {
	b := workflow.New("nightly-v1", "RUN")
	b.State("RUN")
	b.Schedule(workflow.Schedule{Cron: "0 3 * * *"})
	nightly := b.MustBuild()
	st := memstore.New()
	eng, err := engine.New(st, append(examples.All(), nightly), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.SyncFileSchedules(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.New(eng, nil))
	t.Cleanup(hs.Close)
	file := nightly.Schedules[0].Key()

	out := ok(t, hs.URL, "schedules", "list")
	mustContain(t, "asmp schedules list", out, "SCHEDULE_ID", "NEXT_TICK", file, "nightly-v1", "0 3 * * *", "file")

	out = ok(t, hs.URL, "schedules", "add", "expense-approval-v1", "0 9 * * MON", "--timezone", "Europe/Berlin", "--data", `{"amount": 5}`)
	mustContain(t, "asmp schedules add", out, "Added schedule sched_", "expense-approval-v1", "next at ", "asmp schedules rm ")
	id := strings.Fields(out[strings.Index(out, "sched_"):])[0]
	id = strings.TrimSuffix(id, ":")

	page := decode[struct {
		Schedules []struct {
			ScheduleID string         `json:"schedule_id"`
			Timezone   string         `json:"timezone"`
			Source     string         `json:"source"`
			Data       map[string]any `json:"data"`
			LastTick   *string        `json:"last_tick"`
		} `json:"schedules"`
		NextCursor *string `json:"next_cursor"`
	}](t, ok(t, hs.URL, "schedules", "list", "--json"))
	var found bool
	for _, s := range page.Schedules {
		if s.ScheduleID == id {
			found = s.Source == "api" && s.Timezone == "Europe/Berlin" && s.Data["amount"] == float64(5) && s.LastTick == nil
		}
	}
	if !found || len(page.Schedules) != 2 || page.NextCursor != nil {
		t.Fatalf("JSON list lacks the added schedule %s as added: %+v", id, page)
	}
	if strings.Contains(ok(t, hs.URL, "schedules", "list"), "Last failed tick") {
		t.Fatal("the list names a failed tick where none failed")
	}
	if err := st.FailSchedule(context.Background(), id, store.ScheduleFailure{Tick: time.Date(2026, 5, 4, 7, 0, 0, 0, time.UTC), Error: "The tick's run was refused (too_large): too big."}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "a failed tick", ok(t, hs.URL, "schedules", "list"), "Last failed tick of "+id+": 2026-05-04T07:00:00", "started no run: The tick's run was refused (too_large)")
	out = ok(t, hs.URL, "schedules", "list", "--limit", "1")
	mustContain(t, "first page", out, "More: asmp schedules list --cursor ")

	fails(t, hs.URL, "not a cron expression", "schedules", "add", "expense-approval-v1", "every monday")
	fails(t, hs.URL, "unknown time zone", "schedules", "add", "expense-approval-v1", "@daily", "--timezone", "Mars/Base")
	fails(t, hs.URL, "Unknown workflow_id", "schedules", "add", "no-such-v1", "@daily")
	fails(t, hs.URL, "lives in the schedules: list", "schedules", "rm", file)
	fails(t, hs.URL, "Schedule not found", "schedules", "rm", "sched_nope")
	fails(t, hs.URL, "--limit must be a positive", "schedules", "list", "--limit", "-1")
	fails(t, hs.URL, "--data must be a JSON object", "schedules", "add", "expense-approval-v1", "@daily", "--data", "[1]")

	mustContain(t, "asmp schedules rm", ok(t, hs.URL, "schedules", "rm", id), "Removed schedule "+id)
	if out := ok(t, hs.URL, "schedules", "list"); strings.Contains(out, id) || !strings.Contains(out, file) {
		t.Fatalf("list after rm:\n%s", out)
	}
}
