package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/workflow"
)

func init() { register(newRunsCmd) }

// runsSubcommands are the commands under asmp runs (asmp runs NAME …);
// a file adds its own in init with registerRunsSubcommand.
var runsSubcommands []func(env *Env) *cobra.Command

func registerRunsSubcommand(f func(env *Env) *cobra.Command) {
	runsSubcommands = append(runsSubcommands, f)
}

// newRunsCmd is asmp runs: the server's runs, newest first. Other run
// commands hang below it as subcommands.
func newRunsCmd(env *Env) *cobra.Command {
	var f oipFlags
	var opts client.ListRunsOptions
	var dueBefore string
	cmd := &cobra.Command{
		Use:   "runs [--workflow W] [--state S] [--status S] [--due-before TIME] [--limit N] [--json]",
		Short: "List the server's runs, newest first",
		Long: `List the runs the server keeps (GET /runs), the most recently changed
first, optionally only those of one workflow, in one state or with one
status (active, awaiting_input, processing, completed, failed, ...).
--due-before TIME lists only runs with a pending timer due before TIME:
an RFC 3339 time (2026-12-03T10:30:00Z), or a duration from now (10m,
1h30m, 2d: now plus that).
--limit sets the page size (default 50, at most 500); --cursor continues
after a page (the cursor printed under it). With --json the page as the
server sent it: {"runs": [...], "next_cursor": STRING|null}.`,
		Example: `  asmp runs
  asmp runs --workflow config-wizard-v1 --status active
  asmp runs --status failed --json | jq -r '.runs[].run_id'
  asmp runs --due-before 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			if opts.Limit < 0 {
				return fail(errors.New("--limit must be a positive number of runs"))
			}
			if dueBefore != "" {
				t, err := parseDueBefore(dueBefore, time.Now())
				if err != nil {
					return fail(err)
				}
				opts.DueBefore = t
			}
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			page, err := c.ListRuns(cmd.Context(), &opts)
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, page)
			}
			writeRunList(out, page)
			return nil
		},
	}
	for _, sub := range runsSubcommands {
		cmd.AddCommand(sub(env))
	}
	f.add(cmd)
	cmd.Flags().StringVar(&opts.WorkflowID, "workflow", "", "only runs of this workflow")
	cmd.Flags().StringVar(&opts.State, "state", "", "only runs in this state")
	cmd.Flags().StringVar(&opts.Status, "status", "", "only runs with this status")
	cmd.Flags().StringVar(&dueBefore, "due-before", "", "only runs with a timer due before this time (RFC 3339, or a duration from now: 10m)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "runs per page (default: the server's, 50)")
	cmd.Flags().StringVar(&opts.Cursor, "cursor", "", "continue after a page (its next cursor)")
	return cmd
}

// parseDueBefore reads --due-before: an RFC 3339 time, or a duration
// (workflow.ParseDuration: 10m, 1h30m, 2d) from now. It returns the time
// as RFC 3339 for due_before.
func parseDueBefore(v string, now time.Time) (string, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.Format(time.RFC3339Nano), nil
	}
	d, err := workflow.ParseDuration(v)
	if err != nil {
		return "", fmt.Errorf("--due-before %q is neither an RFC 3339 time (2026-12-03T10:30:00Z) nor a duration from now (10m, 1h30m, 2d)", v)
	}
	return now.Add(d).UTC().Format(time.RFC3339Nano), nil
}

// writeRunList prints a run page as a table.
func writeRunList(out io.Writer, page *client.RunPage) {
	switch {
	case len(page.Runs) == 0 && page.NextCursor != nil:
		fmt.Fprintln(out, "No runs on this page (the server ended it early); more may follow.")
	case len(page.Runs) == 0:
		fmt.Fprintln(out, "No runs.")
	default:
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN_ID\tWORKFLOW\tSTATE\tSTATUS\tUPDATED")
		for _, r := range page.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(r.RunID, 64), oneLine(r.WorkflowID, 64), oneLine(r.State, 64), oneLine(r.Status, 32), oneLine(r.UpdatedAt, 32))
		}
		_ = tw.Flush()
	}
	if page.NextCursor != nil {
		fmt.Fprintf(out, "More: asmp runs --cursor %s\n", command.Quote(oneLine(*page.NextCursor, 300)))
	}
}
