package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/runner"
)

func init() { register(newInvokeCmd) }

// Exit codes of asmp invoke for executions that did not succeed.
const (
	exitInvokeFailed  = 2 // the command ran and failed
	exitInvokeRefused = 3 // the invocation was refused: nothing ran
)

// invokeResult is the --json output of asmp invoke.
type invokeResult struct {
	// Receipt is the server's receipt: the invocation's, or with
	// --execute the result's, carrying the outcome.
	Receipt *oip.Receipt `json:"receipt"`
	// Invocation is the inv_ID of the invocation record (the attempt, for
	// an execution): what --replay-of takes. Absent when the record could
	// not be read.
	Invocation string `json:"invocation,omitempty"`
	// Command is the constructed command, from the invocation record
	// (absent when the record could not be read).
	Command *command.Command `json:"command,omitempty"`
}

func newInvokeCmd(env *Env) *cobra.Command {
	var (
		server, input, key, replayOf string
		execute, asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "invoke ROW_KEY --input JSON [--execute]",
		Short: "Invoke a directory row: record the command, or run it with --execute",
		Long: `Record an invocation of the directory row ROW_KEY (its current version) in the
OIP ledger: the server builds the command from --input and records it. With
--execute the server also runs it (only with --allow-exec, an allowlisted
program and a token holding the exec scope) and waits for the outcome:
class (succeeded, failed, refused), exit code, duration, and the heads of
stdout and stderr with their full sizes and SHA-256.

The invocation gets its own ledger key: --key, else ROW_KEY:inv:TIME:RANDOM.
--replay-of links it to an earlier invocation's inv_ID. Invalid input or
missing authority are recorded as refused, not dropped.

The server is --server, else $ASMP_URL, else http://127.0.0.1:8000; the token is $ASMP_TOKEN. Exit
status: 0 when recorded (and, with --execute, succeeded), 2 when the
command failed, 3 when the invocation was refused, 1 on any other error.`,
		Example: `  asmp invoke number-facts.factor --input '{"numbers": [360, 17]}'
  asmp invoke number-facts.factor --input '{"numbers": [360]}' --execute
  asmp invoke number-facts.multiply --input @in.json --execute --key mult-1 --json
  asmp invoke number-facts.multiply --input '{"a": 6, "b": 7}' --execute --replay-of inv_01J…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, asJSON, err) }
			server = serverFor(env, server, "")
			in, err := readInputFlag(env, input)
			if err != nil {
				return fail(err)
			}
			if key == "" {
				key = invocationKey(args[0])
			}
			opts := &client.Options{Token: agentGetenv(env)("ASMP_TOKEN"), UserAgent: "asmp/" + version()}
			if execute {
				opts.Timeout = -1 // the server bounds the execution by its timeout
			}
			c, err := client.New(server, opts)
			if err != nil {
				return fail(err)
			}
			ctx := cmd.Context()
			rc, err := c.Invoke(ctx, key, client.Invocation{ObjectKey: args[0], Input: in, Execute: execute, ReplayOf: replayOf})
			if err != nil {
				return fail(err)
			}
			res := invokeResult{Receipt: rc}
			res.Invocation, res.Command = invocationOf(ctx, c, rc)
			if asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else {
				writeInvocation(out, key, res)
			}
			return invokeExit(rc)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", serverHelp)
	fl.StringVar(&input, "input", "", "the row's input: a JSON object keyed by its arg and flag names, @FILE, or - for stdin")
	fl.BoolVar(&execute, "execute", false, "run the command and wait for its outcome (the server needs --allow-exec and the token the exec scope)")
	fl.StringVar(&key, "key", "", "the invocation's ledger key (default: ROW_KEY:inv:TIME:RANDOM)")
	fl.StringVar(&replayOf, "replay-of", "", "the inv_ID of an earlier invocation this one replays")
	fl.BoolVar(&asJSON, "json", false, `print {"receipt": …, "invocation": inv_ID, "command": …} as JSON instead of text`)
	return cmd
}

// readInputFlag reads --input: inline JSON, @FILE, or - for stdin; no
// --input is an empty input.
func readInputFlag(env *Env, v string) (map[string]any, error) {
	if v == "" {
		return map[string]any{}, nil
	}
	return readObjectFlag(env, "--input", v, "--input must be a JSON object keyed by the row's arg and flag names")
}

// invocationKey returns a fresh ledger key for an invocation of row:
// ROW:inv:YYYYMMDDTHHMMSSZ:8 hex digits, cut to 128 characters.
func invocationKey(row string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := ":inv:" + time.Now().UTC().Format("20060102T150405Z") + ":" + hex.EncodeToString(b[:])
	if len(row)+len(suffix) > 128 {
		row = row[:128-len(suffix)]
	}
	return row + suffix
}

// invocationOf reads the invocation record (the receipt's own, or the
// attempt a result belongs to) and returns its inv_ID and command; "" and
// nil when it cannot be read (for example without the read scope).
func invocationOf(ctx context.Context, c *client.Client, rc *oip.Receipt) (string, *command.Command) {
	rec, err := c.Receipt(ctx, rc.InvID)
	if err != nil {
		return "", nil
	}
	if rec.ResultOf != "" {
		if rec, err = c.Receipt(ctx, rec.ResultOf); err != nil {
			return "", nil
		}
	}
	var body struct {
		Command *command.Command `json:"command"`
	}
	_ = json.Unmarshal(rec.Body, &body)
	return rec.InvID, body.Command
}

// writeInvocation prints a receipt for people.
func writeInvocation(out io.Writer, key string, res invokeResult) {
	rc := res.Receipt
	fmt.Fprintf(out, "Receipt:  %s (key %s, seq %d)\n", rc.InvID, key, rc.Seq)
	if res.Invocation != "" && res.Invocation != rc.InvID {
		fmt.Fprintf(out, "Attempt:  %s (replay it with --replay-of %s)\n", res.Invocation, res.Invocation)
	}
	if res.Command != nil {
		fmt.Fprintf(out, "Command:  %s   [%s]\n", res.Command.Line, res.Command.Method)
	}
	o := rc.Outcome
	if o == nil {
		fmt.Fprintln(out, "Not executed (add --execute to run it).")
		return
	}
	line := "Outcome:  " + o.Class
	if o.ExitCode != nil {
		line += ", exit code " + strconv.Itoa(*o.ExitCode)
	}
	if o.Class != oip.OutcomeRefused {
		line += ", " + (time.Duration(o.DurationMS) * time.Millisecond).String()
	}
	fmt.Fprintln(out, line)
	if o.Reason != "" {
		fmt.Fprintf(out, "Reason:   %s\n", o.Reason)
	}
	writeStreamHead(out, "Stdout", o.Stdout)
	writeStreamHead(out, "Stderr", o.Stderr)
	if len(o.Output) > 0 {
		fmt.Fprintf(out, "Output:   %s\n", textHead(string(o.Output), 2000, 1))
	}
}

// writeStreamHead prints the first lines of a captured stream.
func writeStreamHead(out io.Writer, name string, s *oip.Stream) {
	if s == nil || (s.Size == 0 && name == "Stderr") {
		return
	}
	kept := ""
	if s.Truncated {
		kept = ", truncated"
	}
	fmt.Fprintf(out, "%s:   %d bytes%s, sha256 %s\n", name, s.Size, kept, s.SHA256)
	if s.Text == "" {
		return
	}
	for _, l := range strings.Split(strings.TrimSuffix(textHead(s.Text, 4000, 20), "\n"), "\n") {
		fmt.Fprintf(out, "  | %s\n", l)
	}
}

// textHead returns at most max bytes and lines of s, marked when cut.
func textHead(s string, max, lines int) string {
	cut := false
	if len(s) > max {
		s, cut = s[:max], true
		s = strings.ToValidUTF8(s, "")
	}
	if ls := strings.SplitAfter(s, "\n"); len(ls) > lines && !(len(ls) == lines+1 && ls[lines] == "") {
		s, cut = strings.Join(ls[:lines], ""), true
	}
	if cut {
		s = strings.TrimSuffix(s, "\n") + " …\n"
	}
	return s
}

// invokeExit maps the outcome to the exit status.
func invokeExit(rc *oip.Receipt) error {
	if rc.Outcome == nil {
		return nil
	}
	switch rc.Outcome.Class {
	case oip.OutcomeSucceeded:
		return nil
	case oip.OutcomeRefused:
		return &exitError{code: exitInvokeRefused, err: fmt.Errorf("the invocation was refused: %s", rc.Outcome.Reason)}
	default:
		return &exitError{code: exitInvokeFailed, err: fmt.Errorf("the command failed: %s", rc.Outcome.Reason)}
	}
}

// The server side of invocations: the execution flags of asmp serve and
// the executor built from them.

// execFlags are the --allow-exec and --exec-* flags of asmp serve.
type execFlags struct {
	allow       bool
	programs    []string
	timeout     time.Duration
	maxOutput   int64
	concurrency int
	dir         string
}

func addExecFlags(cmd *cobra.Command, f *execFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.allow, "allow-exec", false, "execute directory rows (invocations with execute: true, row-bound tools and tasks); without it they are recorded as refused")
	fl.StringArrayVar(&f.programs, "exec-allow", nil, "a program rows may run (repeatable): a name, resolved on PATH at start-up, or an absolute path; shell rows also need sh")
	fl.DurationVar(&f.timeout, "exec-timeout", runner.DefaultMaxTimeout, "the longest any execution may run: it caps each row's own timeout (rows without one get 30s)")
	fl.Int64Var(&f.maxOutput, "exec-max-output", runner.DefaultMaxOutput, "bytes of stdout and of stderr kept per execution (their full sizes and SHA-256 are always recorded)")
	fl.IntVar(&f.concurrency, "exec-concurrency", 0, "executions run at once (default: the number of CPUs, at least 2)")
	fl.StringVar(&f.dir, "exec-dir", "", "directory in which each execution gets a fresh working directory, removed afterwards; created 0700, refused when owned by another user or writable by group or others (default: $XDG_RUNTIME_DIR/asmp-exec, else ~/.cache/asmp/exec)")
}

// newExecutor returns the executor the flags ask for (nil when execution
// is off) and a description for the start-up log.
func newExecutor(f execFlags, log *slog.Logger) (oip.Executor, string, error) {
	if !f.allow {
		if len(f.programs) > 0 {
			log.Warn("--exec-allow has no effect without --allow-exec: every execution is refused")
		}
		return nil, "off (executions are recorded as refused; enable with --allow-exec --exec-allow PROGRAM)", nil
	}
	if f.timeout <= 0 || f.maxOutput <= 0 || f.concurrency < 0 {
		return nil, "", fmt.Errorf("--exec-timeout and --exec-max-output must be positive and --exec-concurrency not negative")
	}
	ex, err := runner.New(runner.Options{
		Allow:       f.programs,
		MaxTimeout:  f.timeout,
		MaxOutput:   f.maxOutput,
		Concurrency: f.concurrency,
		Dir:         f.dir,
		Logger:      log,
	})
	if err != nil {
		return nil, "", fmt.Errorf("--allow-exec: %w", err)
	}
	var allowed []string
	for _, p := range ex.Allowed() {
		allowed = append(allowed, p.Path)
	}
	if len(allowed) == 0 {
		log.Warn("--allow-exec without --exec-allow: the allowlist is empty, so every execution is refused")
	}
	desc := fmt.Sprintf("on: allow=%s timeout<=%s max_output=%d dir=%s", strings.Join(allowed, ","), f.timeout, f.maxOutput, ex.Dir())
	return ex, desc, nil
}
