package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/store/memstore"
)

// The schedules page lists the schedules with their cron, zone, source and
// ticks; a schedule whose latest tick could not start a run shows it as
// failed, and the reason (server text, never markup) in the failed ticks.
func TestSchedulesPageShowsTicksAndFailures(t *testing.T) {
	needBrowser(t)
	st := memstore.New()
	s := newServerWith(t, st, examples.All(), nil, nil)
	ctx := context.Background()
	ok, err := s.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "config-wizard-v1", Cron: "0 9 * * MON", Timezone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := s.eng.CreateSchedule(ctx, engine.ScheduleSpec{WorkflowID: "expense-approval-v1", Cron: "@hourly"})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Now().UTC().Truncate(time.Hour)
	why := `The tick's run was refused (too_large): <b id="injected">too big</b>.`
	if err := st.FailSchedule(ctx, bad.ID, store.ScheduleFailure{Tick: tick, Error: why}); err != nil {
		t.Fatal(err)
	}

	tb := newTab(t, "schedules")
	tb.do(chromedp.Navigate(s.url + "/console/#/schedules"))
	tb.waitJS(`document.querySelectorAll('.schedules-table tbody tr').length === 2`)
	okRow := tb.text(`tr[data-schedule="` + ok.ID + `"]`)
	if !strings.Contains(okRow, "config-wizard-v1") || !strings.Contains(okRow, "0 9 * * MON") || !strings.Contains(okRow, "Europe/Berlin") ||
		!strings.Contains(okRow, "api") || !strings.Contains(okRow, "none yet") || strings.Contains(okRow, "failed") {
		t.Fatalf("the healthy schedule's row reads %q", okRow)
	}
	if got := tb.eval(`document.querySelector('tr[data-schedule="` + ok.ID + `"] a').getAttribute('href')`); got != "#/runs?workflow_id=config-wizard-v1" {
		t.Fatalf("the workflow links to %q, want its runs", got)
	}
	if got := tb.text(`tr[data-schedule="` + bad.ID + `"] td.failure`); !strings.Contains(got, "failed") {
		t.Fatalf("the failed schedule's failure cell reads %q", got)
	}
	failure := tb.text(`.card p[data-schedule="` + bad.ID + `"]`)
	if !strings.Contains(failure, bad.ID) || !strings.Contains(failure, why) || !strings.Contains(failure, "started no run") {
		t.Fatalf("the failed ticks card reads %q, want the schedule, the tick and %q", failure, why)
	}
	if got := tb.eval(`String(document.getElementById('injected') === null)`); got != "true" {
		t.Fatal("the failure's text was rendered as markup")
	}
	if got := tb.eval(`document.querySelector('nav a[data-page="schedules"]').getAttribute('aria-current')`); got != "page" {
		t.Fatalf("the nav's Schedules link is not current: %q", got)
	}
	tb.shot("schedules")
}
