package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

func init() {
	register(newWorkflowsCmd)
	registerRunsSubcommand(newRunsMigrateCmd)
}

// --- asmp workflows --------------------------------------------------------

func newWorkflowsCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List the served workflows and their versions, with the active runs on each",
		Long: `List the workflows a server serves (GET /workflows): for each, the version
new runs get, and every stored version, newest first, with how many active
runs (neither completed nor failed) are pinned to it. With --json, the
catalog as the server sent it.`,
		Example: `  asmp workflows
  asmp workflows --json | jq -r '.[].versions[0].version'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			ws, err := c.Workflows(cmd.Context())
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, ws)
			}
			writeWorkflows(out, ws)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func writeWorkflows(out io.Writer, ws []protocol.WorkflowInfo) {
	if len(ws) == 0 {
		fmt.Fprintln(out, "No workflows.")
		return
	}
	for i, w := range ws {
		if i > 0 {
			fmt.Fprintln(out)
		}
		def := ""
		if w.Default {
			def = " (default)"
		}
		if w.Description != "" {
			def += ": " + oneLine(w.Description, 100)
		}
		fmt.Fprintf(out, "%s%s\n", w.WorkflowID, def)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  VERSION\tFIRST SERVED\tACTIVE RUNS\t")
		for _, v := range w.Versions {
			mark := ""
			if v.Served {
				mark = "new runs"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", v.Version, v.FirstServed.UTC().Format(time.RFC3339), v.ActiveRuns, mark)
		}
		_ = tw.Flush()
	}
}

// --- asmp runs migrate -----------------------------------------------------

func newRunsMigrateCmd(env *Env) *cobra.Command {
	var f oipFlags
	var req client.MigrateRequest
	cmd := &cobra.Command{
		Use:   "migrate WORKFLOW --from VERSION --to VERSION [--dry-run]",
		Short: "Move the active runs of one workflow version to another",
		Long: `Re-pin the active runs of WORKFLOW on version --from to version --to
(POST /workflows/{id}/migrate; the token needs the admin scope). A run moves
when its state is mapped by the migrate: block of --to's file for --from,
or exists unchanged in --to; each moved run gets a migrated event. The
others are listed and left as they are; a run whose background task is
running moves once the task settles. --dry-run reports the same and
changes nothing. The versions are those "asmp workflows" lists; an
abbreviation (sha256: and at least 12 hex digits) that names one will do.`,
		Example: `  asmp runs migrate approval-v1 --from sha256:1f2e… --to sha256:9a8b… --dry-run
  asmp runs migrate approval-v1 --from sha256:1f2e… --to sha256:9a8b…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if req.From == "" || req.To == "" {
				return agentError(out, f.json, errors.New("give --from VERSION and --to VERSION (asmp workflows lists them)"))
			}
			c, err := f.client(env, false)
			if err != nil {
				return agentError(out, f.json, err)
			}
			rep, err := c.Migrate(cmd.Context(), args[0], req)
			if err != nil {
				return agentError(out, f.json, err)
			}
			if f.json {
				return writeJSON(out, rep)
			}
			writeMigration(out, rep)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&req.From, "from", "", "the version the runs are on (sha256:…)")
	cmd.Flags().StringVar(&req.To, "to", "", "the version to move them to (sha256:…)")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "report what would move and change nothing")
	return cmd
}

func writeMigration(out io.Writer, rep *protocol.MigrationReport) {
	verb := "migrated"
	if rep.DryRun {
		verb = "would migrate"
	}
	fmt.Fprintf(out, "%s: %d %s, %d waiting for their task, %d left (from %s to %s)\n",
		rep.WorkflowID, len(rep.Migrated), verb, len(rep.Waiting), len(rep.Left), rep.From, rep.To)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, group := range []struct {
		name string
		runs []protocol.MigratedRun
	}{{verb, rep.Migrated}, {"waiting", rep.Waiting}, {"left", rep.Left}} {
		for _, r := range group.runs {
			to := r.To
			if to == "" {
				to = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s -> %s\t%s\n", group.name, r.RunID, r.From, to, oneLine(r.Reason, 100))
		}
	}
	_ = tw.Flush()
}

// --- asmp validate --against ------------------------------------------------

// againstProblems lists the states of old that def (a new version of the
// same workflow) lacks and maps nowhere: runs in them could not move.
func againstProblems(def, old *workflow.Definition) []string {
	m, _ := def.MigrationFrom(old.Version())
	var out []string
	for _, s := range old.States {
		if _, ok := def.State(s.Name); ok {
			continue
		}
		if _, ok := m.States[s.Name]; ok {
			continue
		}
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}
