package cli

// asmp call RUN TOOL key=value…  (a stage tool of the run's current state)
// asmp events RUN                 (the run's history)

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

func init() {
	register(newCallCmd)
	register(newEventsCmd)
}

func newCallCmd(env *Env) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "call RUN TOOL [key=value...]",
		Short: "Call a tool of the run's current state and print its result (agent mode)",
		Long: `Call a stage tool: one the run's current state offers (its frame lists it
under tools, and show prints it). Input is key=value pairs typed by the
tool's expects (numbers=360,17 or numbers='[360, 17]' for an array), or one
JSON object. The result is printed as JSON; the run does not move.`,
		Example: `  asmp call RUN policy_check amount=1500
  asmp call RUN factor numbers='[360, 17]'`,
		Args: runArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			runID, tool, input := args[0], args[1], args[2:]
			c, err := f.client(env, runID)
			if err != nil {
				return f.fail(out, err)
			}
			ctx := cmd.Context()
			frame, err := c.Frame(ctx, runID)
			if err != nil {
				return f.fail(out, err)
			}
			in, err := toolInput(frame.Frame, tool, input)
			if err != nil {
				return f.fail(out, err)
			}
			res, err := c.InvokeTool(ctx, runID, tool, in)
			if err != nil {
				return f.fail(out, err)
			}
			if f.json {
				return writeJSON(out, map[string]any{"server": c.BaseURL(), "run_id": runID, "tool": tool, "input": in, "result": res})
			}
			fmt.Fprintf(out, "Called: %s in state %s of run %s\n", tool, frame.State, runID)
			fmt.Fprintln(out, "Result:")
			return writeJSON(out, res)
		},
	}
	f.add(cmd)
	return cmd
}

// toolInput resolves the command line input of tool, which the frame must
// offer, by the same rules as step's input for an action.
func toolInput(frame protocol.Frame, tool string, args []string) (map[string]any, error) {
	var t *protocol.Tool
	var names []string
	for i := range frame.Tools {
		names = append(names, frame.Tools[i].Name)
		if frame.Tools[i].Name == tool {
			t = &frame.Tools[i]
		}
	}
	if t == nil {
		avail := "none"
		if len(names) > 0 {
			avail = strings.Join(names, ", ")
		}
		return nil, protocol.Errorf(protocol.EForbidden, "Tool %q is not available in state %s. Tools here: %s.", tool, frame.State, avail)
	}
	if len(args) == 0 && len(t.Expects) == 0 {
		return map[string]any{}, nil
	}
	one := protocol.CLI{Options: []protocol.CLIOption{{Action: tool, Label: tool}}}
	fake := protocol.Frame{State: frame.State, NextStates: []protocol.NextState{{Action: tool, Expects: t.Expects}}}
	_, in, err := client.ResolveArgs(one, fake, append([]string{tool}, args...))
	return in, err
}

// toolCommand is the call command line of t, with a placeholder per field.
func toolCommand(runID string, t protocol.Tool) string {
	keys := make([]string, 0, len(t.Expects))
	for k := range t.Expects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"asmp call", runID, t.Name}
	for _, k := range keys {
		parts = append(parts, k+"='<"+t.Expects[k]+">'")
	}
	return strings.Join(parts, " ")
}

func newEventsCmd(env *Env) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "events RUN",
		Short: "Print the run's history: every change with its time, action, states, actor and failure reason",
		Args:  runArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, args[0])
			if err != nil {
				return f.fail(out, err)
			}
			log, err := c.Events(cmd.Context(), args[0])
			if err != nil {
				return f.fail(out, err)
			}
			if f.json {
				return writeJSON(out, log)
			}
			writeEvents(out, log)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func writeEvents(out io.Writer, log *client.EventLog) {
	fmt.Fprintf(out, "Run %s (%s): %d events\n", log.RunID, log.WorkflowID, len(log.Events))
	for _, e := range log.Events {
		move := e.To
		if e.From != "" {
			move = e.From + " → " + e.To
		}
		what := e.Kind
		if e.Action != "" {
			what += " " + e.Action
		}
		fmt.Fprintf(out, "[%d] %s  %s  %s  by %s  [%s]\n", e.ID, e.Time.Format("2006-01-02 15:04:05Z07:00"), what, move, e.Actor, e.Status)
		if e.Reason != "" {
			fmt.Fprintf(out, "     reason: %s\n", e.Reason)
		}
	}
}
