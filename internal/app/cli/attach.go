package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/internal/app/tui"
)

func init() { register(newAttachCmd) }

func newAttachCmd(env *Env) *cobra.Command {
	var server, workflowID, runID, data string
	var plain, yes bool
	cmd := &cobra.Command{
		Use:   "attach [URL]",
		Short: "Drive a run in a full-screen terminal UI",
		Long: `Attach a terminal to a run: start a run of --workflow (default: the server's
default workflow), or attach to an existing one with --run, and drive it
through its CLI object and stream.

The screen shows the state's prompt and hint, the options as a list with
their keys (arrows or j/k move, enter selects, 1-9 and the option's keys pick
at once), a typed input field for each value the chosen option expects, a
spinner and a progress bar while the run is processing, the milestones, and
a final screen when the run completes or fails. Errors show the server's
hint; r retries. An action marked is_critical is sent only after you
confirm it with y (--yes sends without asking).

When standard input or output is not a terminal, or TERM is dumb (or with
--plain), attach falls back to a line-oriented loop: it prints the CLI object,
reads one line, and resolves it like asmp step (a number, an action, a key,
or the value to enter).

The server is URL, else --server, else $ASMP_URL, else the --run's
remembered server, else http://127.0.0.1:8000. URL may also be a run's URL
(…/runs/RUN_ID). The token is $ASMP_TOKEN.`,
		Example: `  asmp attach http://127.0.0.1:8000
  asmp attach http://127.0.0.1:8000 --workflow expense-approval-v1
  asmp attach --run 0190c0de-… --plain < answers.txt`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			getenv := agentGetenv(env)
			base := server
			if len(args) == 1 {
				base = args[0]
				if b, id, ok := splitRunURL(base); ok {
					if runID != "" && runID != id {
						return fmt.Errorf("the URL names run %s but --run says %s", id, runID)
					}
					base, runID = b, id
				}
			}
			base = serverFor(env, base, runID)
			if runID != "" && workflowID != "" {
				return fmt.Errorf("--run attaches to an existing run; --workflow only chooses the workflow of a new one: give one of them")
			}
			c, err := agentClient(env, base)
			if err != nil {
				return err
			}
			var initial map[string]any
			if data == "-" {
				return fmt.Errorf("--data -: standard input is the terminal here; give the JSON inline or as @FILE")
			}
			if data != "" {
				if initial, err = readDataFlag(env, data); err != nil {
					return err
				}
			}
			o := tui.Options{
				Backend: c, RunID: runID, WorkflowID: workflowID, Data: initial,
				In: env.Stdin, Out: cmd.OutOrStdout(), ASCII: !tui.UTF8(getenv), AltScreen: true,
				OnRun: func(f *client.RunFrame) { agentRemember(env, c.BaseURL(), f) }, Yes: yes,
			}
			if plain || !tui.Interactive(env.Stdin, env.Stdout, getenv) {
				_, err := tui.RunPlain(cmd.Context(), o)
				return err
			}
			res, err := tui.RunFull(cmd.Context(), o)
			if res.RunID != "" {
				fmt.Fprintln(cmd.OutOrStdout(), res.Summary())
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", serverHelp)
	fl.StringVar(&workflowID, "workflow", "", "workflow of the new run (default: the server's default)")
	fl.StringVar(&runID, "run", "", "attach to this existing run instead of starting one")
	fl.StringVar(&data, "data", "", "initial data of a new run: a JSON object, @FILE, or - for stdin")
	fl.BoolVar(&plain, "plain", false, "use the line-oriented prompt loop even on a terminal")
	fl.BoolVar(&yes, "yes", false, "send critical actions (is_critical) without asking for a y first")
	return cmd
}

// splitRunURL splits http://host/base/runs/ID[/…] into its API base and
// run id.
func splitRunURL(s string) (base, runID string, ok bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", "", false
	}
	i := strings.LastIndex(u.Path, "/runs/")
	if i < 0 {
		return "", "", false
	}
	rest := strings.Trim(u.Path[i+len("/runs/"):], "/")
	id, _, _ := strings.Cut(rest, "/")
	if id == "" {
		return "", "", false
	}
	u.Path = u.Path[:i]
	u.RawPath = ""
	return strings.TrimRight(u.String(), "/"), id, true
}
