package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/workflow"
)

func init() {
	register(newValidateCmd)
	register(newGraphCmd)
}

func newValidateCmd(env *Env) *cobra.Command {
	var asJSON bool
	var against string
	cmd := &cobra.Command{
		Use:   "validate WF_FILE... [--against OLD_FILE]",
		Short: "Check workflow files (YAML or JSON) and report every problem with its position",
		Long: `Check each workflow file on its own and report every problem with its
position. With --against OLD_FILE, also compare each file with the older
version of the same workflow in OLD_FILE, before anyone restarts a server
on it: every state of the old version that the new one lacks and that its
migrate: block for the old version does not map is an error, since runs
in that state could not be moved to the new version.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			type result struct {
				File       string   `json:"file"`
				Valid      bool     `json:"valid"`
				WorkflowID string   `json:"workflow_id,omitempty"`
				Version    string   `json:"version,omitempty"`
				States     int      `json:"states,omitempty"`
				Errors     []string `json:"errors,omitempty"`
				Warnings   []string `json:"warnings,omitempty"`
			}
			var old *workflow.Definition
			if against != "" {
				d, err := workflow.LoadFile(against)
				if err != nil {
					return &exitError{code: 1, err: fmt.Errorf("--against %s: %w", against, err)}
				}
				old = d
			}
			var results []result
			failed := 0
			for _, f := range args {
				def, err := workflow.LoadFile(f)
				r := result{File: f, Valid: err == nil}
				if err != nil {
					failed++
					r.Errors = strings.Split(err.Error(), "\n")
				} else {
					r.WorkflowID, r.Version, r.States = def.ID, def.Version(), len(def.States)
					for _, w := range def.Warnings {
						if w.DeadEnd {
							// A run there could never end: serve warns, validate refuses.
							w.Warning = false
							r.Errors = append(r.Errors, f+":"+w.String())
							continue
						}
						r.Warnings = append(r.Warnings, f+":"+w.String())
					}
					if old != nil {
						if old.ID != def.ID {
							r.Errors = append(r.Errors, fmt.Sprintf("%s: workflow %s is not a version of %s (%s)", f, def.ID, old.ID, against))
						}
						for _, st := range againstProblems(def, old) {
							r.Errors = append(r.Errors, fmt.Sprintf("%s: state %s of the old version (%s, %s) is missing here and no migrate: block maps it; add `migrate: [{from: %s, states: {%s: NEW_STATE}}]`",
								f, st, against, old.Version(), old.Version(), st))
						}
					}
					if len(r.Errors) > 0 {
						r.Valid = false
						failed++
					}
				}
				results = append(results, r)
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.Valid {
						fmt.Fprintf(out, "%s: ok (workflow %s, %d states)\n", r.File, r.WorkflowID, r.States)
					}
					for _, e := range r.Errors {
						fmt.Fprintln(out, e)
					}
					for _, w := range r.Warnings {
						fmt.Fprintln(out, w)
					}
				}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d workflow files are invalid", failed, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print machine-readable results")
	cmd.Flags().StringVar(&against, "against", "", "an older version of the workflow: report its states this one drops without a migrate: mapping")
	return cmd
}

func newGraphCmd(env *Env) *cobra.Command {
	var format, current string
	cmd := &cobra.Command{
		Use:   "graph WF_FILE|WORKFLOW_ID",
		Short: "Print a workflow (a file, or a built-in id such as expense-approval-v1) as a Mermaid state diagram or Graphviz DOT",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := graphDefinition(args[0])
			if err != nil {
				return err
			}
			switch format {
			case "mermaid":
				fmt.Fprint(cmd.OutOrStdout(), def.Mermaid(current))
			case "dot":
				fmt.Fprint(cmd.OutOrStdout(), def.DOT(current))
			default:
				return fmt.Errorf("unknown --format %q: use mermaid or dot", format)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "output format: mermaid or dot")
	cmd.Flags().StringVar(&current, "highlight", "", "state to highlight")
	return cmd
}

// graphDefinition loads a workflow file, or names a built-in workflow by
// its id when no such file exists.
func graphDefinition(arg string) (*workflow.Definition, error) {
	if _, err := os.Stat(arg); err != nil {
		builtins, _ := loadWorkflows(nil)
		var ids []string
		for _, d := range builtins {
			if d.ID == arg {
				return d, nil
			}
			ids = append(ids, d.ID)
		}
		return nil, fmt.Errorf("%q is neither a workflow file nor a built-in workflow (built-in: %s)", arg, strings.Join(ids, ", "))
	}
	return workflow.LoadFile(arg)
}
