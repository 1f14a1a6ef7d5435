package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/command"
)

func init() { register(newSchedulesCmd) }

// newSchedulesCmd is asmp schedules: list, add and rm a server's
// schedules (SPEC section 17), with a token of the admin scope.
func newSchedulesCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules list|add|rm",
		Short: "List, add and remove the server's schedules (admin scope)",
		Long: `A schedule starts a run of a workflow at every tick of a cron expression
(minute hour day-of-month month day-of-week, e.g. "0 9 * * MON", or @daily,
@hourly, ...), read in a time zone (default UTC), with the schedule's data
as the run's initial data; one run per tick however many servers run.
Schedules come from workflow files (schedules: [...], removed by editing
the file) or from the API (asmp schedules add, removed by asmp schedules rm).
The token ($ASMP_TOKEN) needs the admin scope.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSchedulesListCmd(env), newSchedulesAddCmd(env), newSchedulesRmCmd(env))
	return cmd
}

func newSchedulesListCmd(env *Env) *cobra.Command {
	var f oipFlags
	var opts client.ListSchedulesOptions
	cmd := &cobra.Command{
		Use:   "list [--limit N] [--cursor C] [--json]",
		Short: "List the server's schedules, by id",
		Long: `List the schedules the server keeps (GET /schedules), from workflow files
and from the API, with the last tick that started a run and the next one.
With --json the page as the server sent it: {"schedules": [...],
"next_cursor": STRING|null}.`,
		Example: `  asmp schedules list
  asmp schedules list --json | jq -r '.schedules[] | select(.source == "api") | .schedule_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			if opts.Limit < 0 {
				return fail(errors.New("--limit must be a positive number of schedules"))
			}
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			page, err := c.ListSchedules(cmd.Context(), &opts)
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, page)
			}
			writeScheduleList(out, page)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "schedules per page (default: the server's, 50)")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", "continue after a page (its next cursor)")
	return cmd
}

func orNone(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func writeScheduleList(out io.Writer, page *client.SchedulePage) {
	if len(page.Schedules) == 0 {
		fmt.Fprintln(out, "No schedules.")
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEDULE_ID\tWORKFLOW\tCRON\tTIMEZONE\tSOURCE\tLAST_TICK\tNEXT_TICK")
		for _, s := range page.Schedules {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(s.ScheduleID, 64), oneLine(s.WorkflowID, 64), oneLine(s.Cron, 64),
				oneLine(s.Timezone, 40), oneLine(s.Source, 8), oneLine(orNone(s.LastTick), 32), oneLine(orNone(s.NextTick), 32))
		}
		_ = tw.Flush()
		for _, s := range page.Schedules {
			if f := s.LastFailure; f != nil {
				fmt.Fprintf(out, "Last failed tick of %s: %s started no run: %s\n", oneLine(s.ScheduleID, 64), oneLine(f.Tick, 32), oneLine(f.Error, 300))
			}
		}
	}
	if page.NextCursor != nil {
		fmt.Fprintf(out, "More: asmp schedules list --cursor %s\n", command.Quote(oneLine(*page.NextCursor, 300)))
	}
}

func newSchedulesAddCmd(env *Env) *cobra.Command {
	var f oipFlags
	var tz, data string
	cmd := &cobra.Command{
		Use:   "add WORKFLOW CRON [--timezone ZONE] [--data JSON]",
		Short: "Add a schedule that starts a run of WORKFLOW at every tick of CRON",
		Long: `Add a schedule (POST /schedules): a run of WORKFLOW at every tick of CRON
in --timezone (an IANA zone, default UTC), with --data as its initial data.
It starts runs for the ticks after it was added, never earlier ones; ticks
missed while no server ran start one catch-up run, for the latest of them.
Prints the new schedule's id and next tick (--json: the schedule).`,
		Example: `  asmp schedules add weekly-report-v1 '0 9 * * MON' --timezone Europe/Berlin
  asmp schedules add cleanup-v1 @daily --data '{"keep_days": 30}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			req := client.NewSchedule{WorkflowID: args[0], Cron: args[1], Timezone: tz}
			if data != "" {
				m, err := readDataFlag(env, data)
				if err != nil {
					return fail(err)
				}
				req.Data = m
			}
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			s, err := c.AddSchedule(cmd.Context(), req)
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, s)
			}
			fmt.Fprintf(out, "Added schedule %s: %s runs at %q (%s), next at %s.\n", oneLine(s.ScheduleID, 64), oneLine(s.WorkflowID, 64),
				oneLine(s.Cron, 64), oneLine(s.Timezone, 40), oneLine(orNone(s.NextTick), 32))
			fmt.Fprintf(out, "Remove it with: asmp schedules rm %s\n", command.Quote(oneLine(s.ScheduleID, 64)))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&tz, "timezone", "", "the IANA time zone CRON is read in (default UTC)")
	cmd.Flags().StringVar(&data, "data", "", "initial data of each run: a JSON object, @FILE, or - for stdin")
	return cmd
}

func newSchedulesRmCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "rm SCHEDULE_ID",
		Short: "Remove a schedule added with asmp schedules add",
		Long: `Remove a schedule (DELETE /schedules/{id}); the runs it started stay. A
schedule of a workflow file is refused: remove it from the file's
schedules: list and restart the server.`,
		Example: `  asmp schedules rm sched_0190c1f2-...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, map[string]any{"deleted": args[0]})
			}
			fmt.Fprintf(out, "Removed schedule %s.\n", oneLine(args[0], 64))
			return nil
		},
	}
	f.add(cmd)
	return cmd
}
