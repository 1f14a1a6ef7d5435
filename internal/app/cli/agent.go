package cli

// Agent mode: one shell call per step, for LLM agents and scripts.
//
//	asmp start [URL] [--workflow ID] [--data JSON]
//	asmp step RUN INPUT...
//	asmp show RUN
//	asmp watch RUN [--until-idle]
//	asmp call RUN TOOL key=value...   (runcmds.go)
//	asmp events RUN                   (runcmds.go)
//
// Readable text by default, ending with the exact next commands; --json
// for machines (the contract is docs/CLI_JSON.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/internal/app/agentstate"
	"github.com/asmp-dev/asmp/protocol"
)

func init() {
	register(newStartCmd)
	register(newStepCmd)
	register(newShowCmd)
	register(newWatchCmd)
}

// clientFlags are the flags every client command has: the server and
// the output format.
type clientFlags struct {
	server string
	json   bool
}

// addFlags declares --server (described by serverHelp) and --json.
func (f *clientFlags) addFlags(cmd *cobra.Command, serverHelp string) {
	cmd.Flags().StringVar(&f.server, "server", "", serverHelp)
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON for machines (see docs/CLI_JSON.md) instead of text")
}

// agentFlags are the flags every agent command has.
type agentFlags struct {
	clientFlags
	// asked and source are the server client chose for a run and why
	// (serverFor's rule), for fail's hint.
	asked, source string
}

func (f *agentFlags) add(cmd *cobra.Command) {
	f.addFlags(cmd, serverHelp)
}

// client returns a client of the server runID lives on (see
// agentServerFor), with the token of $ASMP_TOKEN.
func (f *agentFlags) client(env *Env, runID string) (*client.Client, error) {
	server, err := agentServerFor(env, f.server, runID)
	if err != nil {
		return nil, err
	}
	if runID != "" {
		f.asked, f.source = server, serverSource(env, f.server, runID)
	}
	return agentClient(env, server)
}

// fail is agentError, with a run not found told which server was asked
// and why that one: a run of another server is not found on the default.
func (f *agentFlags) fail(out io.Writer, err error) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Code == protocol.ENotFound && f.asked != "" {
		ce.Hint = strings.TrimSpace(ce.Hint) + fmt.Sprintf(" (Asked %s, %s: if the run lives on another server, pass --server URL or set ASMP_URL.)", f.asked, f.source)
	}
	return agentError(out, f.json, err)
}

func agentGetenv(env *Env) func(string) string {
	if env.Getenv != nil {
		return env.Getenv
	}
	return os.Getenv
}

// agentClient returns a client of server with the token of $ASMP_TOKEN.
func agentClient(env *Env, server string) (*client.Client, error) {
	getenv := agentGetenv(env)
	return client.New(server, &client.Options{Token: getenv("ASMP_TOKEN"), UserAgent: "asmp/" + version()})
}

func agentState(env *Env) (*agentstate.Store, error) {
	dir, err := agentstate.Dir(agentGetenv(env))
	if err != nil {
		return nil, err
	}
	return agentstate.Open(dir), nil
}

// agentServerFor picks the server of a run by the rule of every client
// command (serverFor).
func agentServerFor(env *Env, flag, runID string) (string, error) {
	return serverFor(env, flag, runID), nil
}

// agentRemember records the run's server; failing to is not fatal.
func agentRemember(env *Env, server string, f *client.RunFrame) {
	if st, err := agentState(env); err == nil {
		_ = st.Remember(f.RunID, agentstate.Entry{Server: server, WorkflowID: f.WorkflowID})
	}
}

// agentError writes err as JSON to stdout in --json mode, then returns it
// for Main to print as "asmp: <hint>".
func agentError(out io.Writer, asJSON bool, err error) error {
	if err == nil || !asJSON {
		return err
	}
	forCLI(err)
	body := map[string]any{"code": protocol.EInvalid, "hint": client.HintOf(err)}
	var ce *client.Error
	var pe *protocol.Error
	switch {
	case errors.As(err, &ce):
		for k, v := range ce.Fields {
			body[k] = v
		}
		body["status"], body["code"], body["hint"] = ce.Status, ce.Code, ce.Hint
	case errors.As(err, &pe):
		for k, v := range pe.Fields {
			body[k] = v
		}
		body["code"], body["hint"] = pe.Code, pe.Hint
	default:
		body["code"] = "client_error"
	}
	// One line, so that it also ends an NDJSON stream (watch --json).
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"error": body})
	return err
}

// writeJSONLine writes v as one line of JSON (an NDJSON stream's line).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newStartCmd(env *Env) *cobra.Command {
	var f agentFlags
	var workflowID, data string
	cmd := &cobra.Command{
		Use:   "start [URL]",
		Short: "Start a run and print its first state and the next commands (agent mode)",
		Long: `Start a run of a workflow on an ASMP server and print where it is and what
to type next. The server is the URL argument, else --server, else $ASMP_URL,
else http://127.0.0.1:8000;
a workflow-scoped URL (…/w/WORKFLOW_ID) works too. The token is $ASMP_TOKEN.
The run's server is remembered, so later commands need only the run id.`,
		Example: `  asmp start http://127.0.0.1:8000 --workflow config-wizard-v1
  ASMP_URL=http://127.0.0.1:8000 asmp start --workflow expense-approval-v1 --data '{"team":"ops"}' --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			flag := f.server
			if len(args) == 1 {
				flag = args[0]
			}
			server := serverFor(env, flag, "")
			var initial map[string]any
			if data != "" {
				m, err := readDataFlag(env, data)
				if err != nil {
					return f.fail(out, err)
				}
				initial = m
			}
			c, err := agentClient(env, server)
			if err != nil {
				return f.fail(out, err)
			}
			ctx := cmd.Context()
			run, err := c.StartRun(ctx, workflowID, initial)
			if err != nil {
				return f.fail(out, err)
			}
			agentRemember(env, c.BaseURL(), run)
			cli, err := c.CLI(ctx, run.RunID)
			if err != nil {
				return f.fail(out, err)
			}
			return printRun(out, f.json, runView{Server: c.BaseURL(), Frame: run, CLI: cli})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&workflowID, "workflow", "", "workflow to start (default: the server's default workflow)")
	cmd.Flags().StringVar(&data, "data", "", "initial run data: a JSON object, @FILE, or - for stdin")
	return cmd
}

// readDataFlag reads --data: inline JSON, @file, or - for stdin.
func readDataFlag(env *Env, v string) (map[string]any, error) {
	return readObjectFlag(env, "--data", v, "--data must be a JSON object")
}

// readObjectFlag reads a flag whose value is a JSON object given inline, as
// @FILE, or as - for stdin (at most 1 MiB). what starts the error message
// for a value that is not an object.
func readObjectFlag(env *Env, flag, v, what string) (map[string]any, error) {
	var b []byte
	var err error
	switch {
	case v == "-":
		if env.Stdin == nil {
			return nil, fmt.Errorf("%s -: no standard input", flag)
		}
		b, err = io.ReadAll(io.LimitReader(env.Stdin, 1<<20))
	case strings.HasPrefix(v, "@"):
		b, err = os.ReadFile(v[1:])
	default:
		b = []byte(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	m, err := protocol.DecodeObject(b, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", what, protocol.ErrorHint(err))
	}
	return m, nil
}

func newStepCmd(env *Env) *cobra.Command {
	var f agentFlags
	var ifMatch, forceAction string
	cmd := &cobra.Command{
		Use:   "step RUN [INPUT...]",
		Short: "Answer the run's current CLI prompt: pick an option, give input (agent mode)",
		Long: `Read the run's CLI object, resolve INPUT against it, fire the chosen
action, and print the new state and the next commands.

INPUT is read by the rule of every asmp client: a number picks that option,
an action name or an option's key picks it, and other text is the input of
the one option that takes input. Put the action first to be explicit:
  asmp step RUN save dark mode            value "dark mode" for save
  asmp step RUN submit amount=12.5 description='Team lunch'
  asmp step RUN submit '{"amount": 12.5, "description": "Team lunch"}'
Use -- before input that starts with a dash: asmp step RUN -- set -5.
With --action NAME, INPUT is NAME's input and NAME is sent as is, offered
or not: the server's answer says why it is refused.

The action fires only if the run is still in the state INPUT was resolved
against (If-Match); otherwise nothing happens and the error says so.`,
		Args: runArgs(0, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			runID, input := args[0], args[1:]
			c, err := f.client(env, runID)
			if err != nil {
				return f.fail(out, err)
			}
			ctx := cmd.Context()
			frame, cli, err := loadRun(ctx, c, runID)
			if err != nil {
				return f.fail(out, err)
			}
			var action string
			var in map[string]any
			if _, offered := frame.Action(forceAction); forceAction != "" && !offered {
				// Not offered now: send it anyway, so the server says why.
				action, in = forceAction, map[string]any{}
			} else if forceAction != "" {
				// Fire exactly this action, with INPUT as its input.
				one := protocol.CLI{Options: []protocol.CLIOption{{Action: forceAction, Label: forceAction}}}
				action, in, err = client.ResolveArgs(one, frame.Frame, append([]string{forceAction}, input...))
			} else {
				action, in, err = client.ResolveArgs(cli, frame.Frame, input)
			}
			if err != nil {
				return f.fail(out, err)
			}
			match := frame.ETag
			if ifMatch != "" {
				match = ifMatch
			}
			next, err := c.Transition(ctx, runID, action, in, &client.TransitionOptions{IfMatch: match})
			if err != nil {
				if client.IsConflict(err) {
					ce := err.(*client.Error)
					ce.Hint += " Nothing was fired; run `asmp show " + runID + "` and decide again."
				}
				return f.fail(out, err)
			}
			agentRemember(env, c.BaseURL(), next)
			ncli, err := c.CLI(ctx, runID)
			if err != nil {
				return f.fail(out, err)
			}
			return printRun(out, f.json, runView{Server: c.BaseURL(), Frame: next, CLI: ncli,
				Fired: &fired{Action: action, Input: in, From: frame.State, To: next.State}})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&forceAction, "action", "", "fire this action with INPUT as its input, without matching INPUT against the options")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "fire only if the run is still at this ETag/version (default: the version INPUT was resolved against)")
	return cmd
}

func loadRun(ctx context.Context, b client.Backend, runID string) (*client.RunFrame, protocol.CLI, error) {
	frame, err := b.Frame(ctx, runID)
	if err != nil {
		return nil, protocol.CLI{}, err
	}
	cli, err := b.CLI(ctx, runID)
	if err != nil {
		return nil, protocol.CLI{}, err
	}
	return frame, cli, nil
}

func newShowCmd(env *Env) *cobra.Command {
	var f agentFlags
	var history bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Print the run's state, its CLI prompt and the next commands (agent mode)",
		Args:  runArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := f.client(env, args[0])
			if err != nil {
				return f.fail(out, err)
			}
			frame, cli, err := loadRun(cmd.Context(), c, args[0])
			if err != nil {
				return f.fail(out, err)
			}
			agentRemember(env, c.BaseURL(), frame)
			if history && !f.json {
				log, err := c.Events(cmd.Context(), args[0])
				if err != nil {
					return f.fail(out, err)
				}
				writeEvents(out, log)
				fmt.Fprintln(out)
			}
			return printRun(out, f.json, runView{Server: c.BaseURL(), Frame: frame, CLI: cli})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&history, "history", false, "print the run's history first (as asmp events does; with --json use asmp events --json)")
	return cmd
}

func newWatchCmd(env *Env) *cobra.Command {
	var f agentFlags
	var untilIdle, heartbeats bool
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Follow the run's stream until it ends (agent mode)",
		Long: `Print the run's changes as they happen: its current state, every change,
and the progress of background tasks, until the run completes or fails.
With --until-idle, stop as soon as the run is not processing (it waits for a
client, or has ended) and print the next commands. With --json, print the
stream's NDJSON lines as the server sends them. The stream resumes by itself
after a dropped connection.`,
		Args: runArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			runID := args[0]
			c, err := f.client(env, runID)
			if err != nil {
				return f.fail(out, err)
			}
			return agentError(out, f.json, watchRun(cmd.Context(), out, cmd.ErrOrStderr(), c, runID, f.json, untilIdle, heartbeats))
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "stop when the run is not processing (waits for a client, or has ended)")
	cmd.Flags().BoolVar(&heartbeats, "heartbeats", false, "also print heartbeat lines")
	return cmd
}

func watchRun(ctx context.Context, out, errOut io.Writer, c *client.Client, runID string, asJSON, untilIdle, heartbeats bool) error {
	var last *protocol.StreamFrame
	waiting := false // told the user the run waits for a client
	for it, err := range c.Stream(ctx, runID, nil) {
		if err != nil {
			return err
		}
		if it.Heartbeat != nil && !heartbeats {
			continue
		}
		if asJSON {
			b, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
				return err
			}
		} else {
			writeStreamItem(out, it)
		}
		if it.Frame != nil {
			last = it.Frame
			if untilIdle && it.Frame.Status != protocol.StatusProcessing {
				break
			}
			idle := it.Frame.Status != protocol.StatusProcessing && !protocol.Terminal(it.Frame.Status)
			if idle && !waiting {
				until := "nothing changes until a client fires one"
				if ts := it.Frame.Timers(); len(ts) > 0 {
					until = "a client may fire one, or the server fires timer " + protocol.DescribeTimer(ts[0], time.Now())
				}
				fmt.Fprintf(errOut, "asmp: run %s waits for an action in state %s (%s: asmp show %s lists them). Watching for changes; stop with Ctrl-C, or use --until-idle to stop when the run waits.\n", runID, it.Frame.State, until, runID)
			}
			waiting = idle
		}
	}
	if last == nil || asJSON {
		return nil
	}
	if protocol.Terminal(last.Status) {
		fmt.Fprintf(out, "Done: run %s %s in state %s.\n", runID, last.Status, last.State)
		return nil
	}
	cli, err := c.CLI(ctx, runID)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	rf := &client.RunFrame{Frame: last.Frame}
	writeNext(out, runView{Server: c.BaseURL(), Frame: rf, CLI: cli})
	return nil
}

func writeStreamItem(out io.Writer, it client.StreamItem) {
	switch {
	case it.Frame != nil:
		fr := it.Frame
		fmt.Fprintf(out, "[%d] %s (%s)", fr.ID, fr.State, fr.Status)
		if fr.Hint != "" {
			fmt.Fprintf(out, " — %s", fr.Hint)
		}
		fmt.Fprintln(out)
	case it.Progress != nil:
		fmt.Fprintf(out, "    progress %s", it.Progress.Progress)
		if it.Progress.Hint != "" {
			fmt.Fprintf(out, " — %s", it.Progress.Hint)
		}
		fmt.Fprintln(out)
	case it.Heartbeat != nil:
		fmt.Fprintf(out, "    (heartbeat, last event %d)\n", it.Heartbeat.ID)
	case it.End != nil:
		fmt.Fprintf(out, "    (the server ended the stream: %s; resuming)\n", it.End.End)
	}
}

// runView is what start, step and show print.
type runView struct {
	Server string
	Frame  *client.RunFrame
	CLI    protocol.CLI
	Fired  *fired
	// Now is the time the time left to the frame's timers is counted
	// from (zero: the clock's).
	Now time.Time
}

type fired struct {
	Action string         `json:"action"`
	Input  map[string]any `json:"input"`
	From   string         `json:"from"`
	To     string         `json:"to"`
}

// nextCmd is one command the user (or agent) can type next.
type nextCmd struct {
	Command string            `json:"command"`
	Action  string            `json:"action,omitempty"`
	Tool    string            `json:"tool,omitempty"`
	Label   string            `json:"label,omitempty"`
	Keys    string            `json:"keys,omitempty"`
	Expects map[string]string `json:"expects,omitempty"`
}

// runJSON is the --json output of start, step and show (docs/CLI_JSON.md).
type runJSON struct {
	Server  string         `json:"server"`
	RunID   string         `json:"run_id"`
	ETag    string         `json:"etag"`
	Version int64          `json:"version"`
	Done    bool           `json:"done"`
	Fired   *fired         `json:"fired,omitempty"`
	Frame   protocol.Frame `json:"frame"`
	CLI     protocol.CLI   `json:"cli"`
	Next    []nextCmd      `json:"next"`
}

func printRun(out io.Writer, asJSON bool, v runView) error {
	if asJSON {
		return writeJSON(out, runJSON{Server: v.Server, RunID: v.Frame.RunID, ETag: v.Frame.ETag, Version: v.Frame.Version(),
			Done: protocol.Terminal(v.Frame.Status), Fired: v.Fired, Frame: v.Frame.Frame, CLI: v.CLI, Next: nextCommands(v)})
	}
	writeRun(out, v)
	return nil
}

func writeRun(out io.Writer, v runView) {
	f := v.Frame
	if v.Fired != nil {
		fmt.Fprintf(out, "Fired:  %s (%s → %s)\n", v.Fired.Action, v.Fired.From, v.Fired.To)
	}
	fmt.Fprintf(out, "Run:    %s (%s, version %d)\n", f.RunID, f.WorkflowID, f.Version())
	fmt.Fprintf(out, "State:  %s [%s]\n", f.State, f.Status)
	if f.Hint != "" {
		fmt.Fprintf(out, "Hint:   %s\n", f.Hint)
	}
	if len(f.Milestones) > 0 {
		fmt.Fprintf(out, "Milestones: %s\n", strings.Join(f.Milestones, " → "))
	}
	if len(f.Data) > 0 {
		b, _ := json.Marshal(f.Data)
		fmt.Fprintf(out, "Data:   %s\n", b)
	}
	if f.ActiveSkill != nil {
		fmt.Fprintf(out, "Skill:  %s (%s)\n", f.ActiveSkill.Name, f.ActiveSkill.URL)
	}
	for _, t := range f.Tools {
		fmt.Fprintf(out, "Tool:   %s", t.Name)
		if len(t.Expects) > 0 {
			fmt.Fprintf(out, " (%s)", protocol.DescribeExpects(t.Expects))
		}
		if t.Description != "" {
			fmt.Fprintf(out, " — %s", t.Description)
		}
		fmt.Fprintln(out)
	}
	for _, r := range f.Resources {
		fmt.Fprintf(out, "Resource: %s %s\n", r.Name, r.URI)
	}
	if timers := f.Timers(); len(timers) > 0 {
		now := v.Now
		if now.IsZero() {
			now = time.Now()
		}
		for _, t := range timers {
			fmt.Fprintf(out, "Timer:  %s\n", protocol.DescribeTimer(t, now))
		}
	}
	fmt.Fprintln(out)
	if protocol.Terminal(f.Status) {
		fmt.Fprintf(out, "Done: run %s %s in state %s.\n", f.RunID, f.Status, f.State)
		return
	}
	if v.CLI.Prompt != "" {
		fmt.Fprintln(out, v.CLI.Prompt)
	}
	if v.CLI.Hint != "" && v.CLI.Hint != f.Hint {
		fmt.Fprintln(out, v.CLI.Hint)
	}
	for i, o := range v.CLI.Options {
		fmt.Fprintf(out, "  %d) %s", i+1, o.Label)
		var extra []string
		if o.Label != o.Action {
			extra = append(extra, "action "+o.Action)
		}
		if o.Keys != "" {
			extra = append(extra, "keys "+o.Keys)
		}
		if ns, ok := f.Action(o.Action); ok {
			if len(ns.Expects) > 0 {
				extra = append(extra, "expects "+protocol.DescribeExpects(ns.Expects))
			}
			if ns.IsCritical {
				extra = append(extra, "critical")
			}
		}
		if len(extra) > 0 {
			fmt.Fprintf(out, "  [%s]", strings.Join(extra, ", "))
		}
		fmt.Fprintln(out)
	}
	if v.CLI.InputHint != "" {
		fmt.Fprintln(out, v.CLI.InputHint)
	}
	fmt.Fprintln(out)
	writeNext(out, v)
}

// writeNext prints one "Next: <command>  # <label>" line per option.
func writeNext(out io.Writer, v runView) {
	cmds := nextCommands(v)
	if v.Frame.Status == protocol.StatusProcessing {
		fmt.Fprintln(out, "A background task is running; watch it, or pick an option that is still offered.")
	}
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Command))
	}
	for _, c := range cmds {
		if c.Label != "" {
			fmt.Fprintf(out, "Next: %-*s  # %s\n", width, c.Command, c.Label)
		} else {
			fmt.Fprintf(out, "Next: %s\n", c.Command)
		}
	}
}

// nextCommands lists the exact commands that answer the run's CLI now.
func nextCommands(v runView) []nextCmd {
	f := v.Frame
	id := f.RunID
	var out []nextCmd
	if protocol.Terminal(f.Status) {
		return []nextCmd{}
	}
	if f.Status == protocol.StatusProcessing {
		out = append(out, nextCmd{Command: "asmp watch " + id + " --until-idle", Label: "wait for the background task"})
	}
	inputOptions := 0
	for _, o := range v.CLI.Options {
		if ns, ok := f.Action(o.Action); ok && len(ns.Expects) > 0 {
			inputOptions++
		}
	}
	for i, o := range v.CLI.Options {
		ns, _ := f.Action(o.Action)
		c := nextCmd{Action: o.Action, Label: o.Label, Keys: o.Keys, Expects: ns.Expects}
		switch len(ns.Expects) {
		case 0:
			c.Command = fmt.Sprintf("asmp step %s %d", id, i+1)
		case 1:
			var field string
			for field = range ns.Expects {
			}
			ph := "'<" + field + ">'"
			if inputOptions == 1 && (!ns.IsCritical || len(v.CLI.Options) == 1) {
				c.Command = fmt.Sprintf("asmp step %s %s", id, ph)
			} else {
				c.Command = fmt.Sprintf("asmp step %s %s %s", id, o.Action, ph)
			}
		default:
			keys := make([]string, 0, len(ns.Expects))
			for k := range ns.Expects {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := []string{"asmp step", id, o.Action}
			for _, k := range keys {
				parts = append(parts, k+"='<"+ns.Expects[k]+">'")
			}
			c.Command = strings.Join(parts, " ")
		}
		out = append(out, c)
	}
	for _, t := range f.Tools {
		label := "call the tool " + t.Name
		if t.Description != "" {
			label += ": " + t.Description
		}
		out = append(out, nextCmd{Command: toolCommand(id, t), Tool: t.Name, Label: label, Expects: t.Expects})
	}
	if out == nil {
		out = []nextCmd{{Command: "asmp show " + id, Label: "no action is offered now; look again later"}}
	}
	return out
}
