package server_test

import (
	"context"
	"fmt"
	"github.com/asmp-dev/asmp/store"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
	"github.com/asmp-dev/asmp/workflow"
)

// scheduleEnv serves the examples and a workflow with a file schedule,
// with an admin token and one that holds every scope but admin.
func scheduleEnv(t *testing.T) *env {
	t.Helper()
	tokens, err := auth.NewTokens([]string{"admin=" + adminSecret, "runner=" + runnerSecret + ":read,runs,dispatch,exec"}, "")
	if err != nil {
		t.Fatal(err)
	}
	b := workflow.New("nightly-v1", "RUN")
	b.State("RUN")
	b.Schedule(workflow.Schedule{Cron: "0 3 * * *", Timezone: "Europe/Berlin", Data: map[string]any{"full": true}})
	defs := append(examples.All(), b.MustBuild())
	e := start(t, setup{defs: defs, newStor: func(*testing.T) storeT { return memstore.New() },
		opts: &server.Options{Authenticate: tokens.Authenticate, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err := e.eng.SyncFileSchedules(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSchedulesAPI(t *testing.T) {
	e := scheduleEnv(t)
	admin := bearer(adminSecret)

	r := e.do("POST", "/schedules", map[string]any{"workflow_id": "expense-approval-v1", "cron": "0 9 * * MON", "timezone": "Europe/Berlin", "data": map[string]any{"amount": 5}}, admin...)
	if r.status != 201 {
		t.Fatalf("POST /schedules: %d %s", r.status, r.body)
	}
	s := r.json(t)
	id, _ := s["schedule_id"].(string)
	if id == "" || s["source"] != "api" || s["timezone"] != "Europe/Berlin" || s["last_tick"] != nil || s["next_tick"] == nil ||
		s["data"].(map[string]any)["amount"] != float64(5) || r.header.Get("Location") != s["href"] || !strings.HasSuffix(s["href"].(string), "/schedules/"+id) {
		t.Fatalf("created schedule = %s (Location %q)", r.body, r.header.Get("Location"))
	}
	next, err := time.Parse(time.RFC3339, s["next_tick"].(string))
	if err != nil || next.Weekday() != time.Monday || next.In(mustZone(t, "Europe/Berlin")).Hour() != 9 {
		t.Fatalf("next_tick %v (%v): want a Monday 09:00 in Berlin", s["next_tick"], err)
	}

	if g := e.do("GET", "/schedules/"+id, nil, admin...); g.status != 200 || g.json(t)["schedule_id"] != id {
		t.Fatalf("GET /schedules/%s: %d %s", id, g.status, g.body)
	}

	// A tick started a run: last_tick shows it, next_tick moves on.
	if n, err := e.eng.FireDueSchedules(context.Background(), next.Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("FireDueSchedules at the tick = %d, %v; want 2 (this one's and the file schedule's catch-up)", n, err)
	}
	if run, err := e.eng.GetRun(context.Background(), engine.ScheduleRunID(id, next)); err != nil || run.WorkflowID != "expense-approval-v1" || run.Data["amount"] != int64(5) {
		t.Fatalf("the tick's run: %+v, %v", run, err)
	}
	g := e.do("GET", "/schedules/"+id, nil, admin...).json(t)
	if g["last_tick"] != s["next_tick"] || g["next_tick"] == s["next_tick"] {
		t.Fatalf("after the tick: last_tick %v, next_tick %v; want last %v and a later next", g["last_tick"], g["next_tick"], s["next_tick"])
	}
	if f, ok := g["last_failure"]; !ok || f != nil {
		t.Fatalf("last_failure of a schedule whose ticks all started runs = %v (present %v), want null", f, ok)
	}
	// A failed tick (recorded as the engine does when a tick's run is
	// refused) is shown with its tick and why, in the list too.
	if err := e.st.FailSchedule(context.Background(), id, store.ScheduleFailure{Tick: next, Error: "The tick's run was refused (too_large): too big."}); err != nil {
		t.Fatal(err)
	}
	f, _ := e.do("GET", "/schedules/"+id, nil, admin...).json(t)["last_failure"].(map[string]any)
	if f["tick"] != s["next_tick"] || !strings.Contains(fmt.Sprint(f["error"]), "too_large") {
		t.Fatalf("last_failure = %v, want the tick %v and its error", f, s["next_tick"])
	}
	listed := false
	for _, x := range e.do("GET", "/schedules", nil, admin...).json(t)["schedules"].([]any) {
		if x := x.(map[string]any); x["schedule_id"] == id {
			lf, _ := x["last_failure"].(map[string]any)
			listed = lf["tick"] == s["next_tick"]
		}
	}
	if !listed {
		t.Fatal("GET /schedules does not show the schedule's last failure")
	}

	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": "0 25 * * *"}, "cron"},
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": "@every 5m"}, "cron"},
		{map[string]any{"workflow_id": "expense-approval-v1"}, "cron"},
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": "0 9 * * *", "timezone": "Europe/Atlantis"}, "timezone"},
		{map[string]any{"workflow_id": "no-such-workflow", "cron": "0 9 * * *"}, "workflow_id"},
		{map[string]any{"cron": "0 9 * * *"}, "workflow_id"},
		{map[string]any{"workflow_id": 7, "cron": "0 9 * * *"}, "workflow_id"},
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": 9}, "cron"},
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": "0 9 * * *", "data": "x"}, "data"},
		{map[string]any{"workflow_id": "expense-approval-v1", "cron": "0 9 * * *", "every": "day"}, "every"},
	} {
		r := e.do("POST", "/schedules", bad.body, admin...)
		if r.status != 400 || r.json(t)["field"] != bad.field {
			t.Errorf("POST /schedules %v: %d %s; want 400 on %s", bad.body, r.status, r.body, bad.field)
			continue
		}
		r.hint(t)
	}

	// A token without the admin scope is refused, whatever it holds.
	for _, req := range [][2]string{{"GET", "/schedules"}, {"POST", "/schedules"}, {"GET", "/schedules/" + id}, {"DELETE", "/schedules/" + id}} {
		r := e.do(req[0], req[1], map[string]any{"workflow_id": "expense-approval-v1", "cron": "@daily"}, bearer(runnerSecret)...)
		if r.status != 403 || !strings.Contains(r.hint(t), `"admin" scope`) {
			t.Errorf("%s %s without admin: %d %s; want 403 naming the admin scope", req[0], req[1], r.status, r.body)
		}
	}

	// The file schedule is listed, and cannot be deleted here.
	var file string
	list := e.do("GET", "/schedules", nil, admin...).json(t)
	for _, it := range list["schedules"].([]any) {
		if m := it.(map[string]any); m["source"] == "file" {
			file, _ = m["schedule_id"].(string)
			if m["workflow_id"] != "nightly-v1" || m["cron"] != "0 3 * * *" {
				t.Fatalf("file schedule = %v", m)
			}
		}
	}
	if file == "" {
		t.Fatalf("GET /schedules lists no file schedule: %v", list)
	}
	if r := e.do("DELETE", "/schedules/"+file, nil, admin...); r.status != 409 || !strings.Contains(r.hint(t), "file") {
		t.Fatalf("DELETE a file schedule: %d %s; want 409 with a hint about the file", r.status, r.body)
	}

	if r := e.do("DELETE", "/schedules/"+id, nil, admin...); r.status != 204 {
		t.Fatalf("DELETE /schedules/%s: %d %s", id, r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := e.do(m, "/schedules/"+id, nil, admin...); r.status != 404 {
			t.Fatalf("%s a deleted schedule: %d %s; want 404", m, r.status, r.body)
		} else {
			r.hint(t)
		}
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// GET /schedules pages by limit and cursor, every schedule once.
func TestSchedulesPaging(t *testing.T) {
	e := scheduleEnv(t)
	admin := bearer(adminSecret)
	for i := range 4 {
		if r := e.do("POST", "/schedules", map[string]any{"workflow_id": "expense-approval-v1", "cron": "@hourly", "data": map[string]any{"i": i}}, admin...); r.status != 201 {
			t.Fatal(r.status, string(r.body))
		}
	}
	seen := map[string]bool{}
	path, pages := "/schedules?limit=2", 0
	for {
		page := e.do("GET", path, nil, admin...).json(t)
		pages++
		items := page["schedules"].([]any)
		if len(items) > 2 {
			t.Fatalf("page of %d, want at most 2", len(items))
		}
		for _, it := range items {
			id := it.(map[string]any)["schedule_id"].(string)
			if seen[id] {
				t.Fatalf("schedule %s on two pages", id)
			}
			seen[id] = true
		}
		c, _ := page["next_cursor"].(string)
		if c == "" {
			break
		}
		path = "/schedules?limit=2&cursor=" + c
	}
	if len(seen) != 5 || pages != 3 { // 4 API schedules and the file's
		t.Fatalf("paged %d schedules in %d pages, want 5 in 3", len(seen), pages)
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?cursor=nope", "?workflow_id=x"} {
		if r := e.do("GET", "/schedules"+q, nil, admin...); r.status != 400 {
			t.Errorf("GET /schedules%s: %d, want 400", q, r.status)
		} else {
			r.hint(t)
		}
	}
}
