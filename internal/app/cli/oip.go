package cli

// The OIP client commands (SPEC section 10):
//
//	asmp dispatch FILE|- [--key K]
//	asmp receipt INV_ID
//	asmp history KEY
//	asmp rows [--after KEY] [--limit N] [--all]
//	asmp command KEY|ROW_FILE [--input JSON|@FILE|-] [--argv]
//	asmp verify INV_ID [--key VERIFIER_KEY | --key-file FILE] [--tree-size N]
//
// Readable text by default; --json for machines (docs/CLI_JSON.md). The
// server is --server, else $ASMP_URL, else DefaultServer; the token is
// $ASMP_TOKEN. asmp command on a row file works offline.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/oip/wire"
	"github.com/asmp-dev/asmp/protocol"
)

func init() {
	register(newDispatchCmd)
	register(newReceiptCmd)
	register(newHistoryCmd)
	register(newRowsCmd)
	register(newCommandCmd)
	register(newVerifyCmd)
}

// maxOIPFile caps the dispatch and row files read by dispatch and command.
const maxOIPFile = 32 << 20

// oipFlags are the flags every OIP client command has.
type oipFlags struct{ clientFlags }

func (f *oipFlags) add(cmd *cobra.Command) {
	f.addFlags(cmd, serverHelp)
}

// client returns a client of the server (serverFor: --server, else
// $ASMP_URL, else DefaultServer), with the token of $ASMP_TOKEN. Without a
// timeout it waits as long as the server takes (an executed invocation;
// the server bounds it).
func (f *oipFlags) client(env *Env, noTimeout bool) (*client.Client, error) {
	server := serverFor(env, f.server, "")
	if !noTimeout {
		return agentClient(env, server)
	}
	return client.New(server, &client.Options{Token: agentGetenv(env)("ASMP_TOKEN"), UserAgent: "asmp/" + version(), Timeout: -1})
}

// readOIPFile reads a dispatch or row file, or standard input for "-".
func readOIPFile(env *Env, path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		if env.Stdin == nil {
			return nil, errors.New("-: no standard input")
		}
		r = env.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxOIPFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxOIPFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxOIPFile)
	}
	return b, nil
}

// topLevel returns the members of a JSON object, or nil when b is not one.
func topLevel(b []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// --- asmp dispatch ---------------------------------------------------------

func newDispatchCmd(env *Env) *cobra.Command {
	var f oipFlags
	var key string
	cmd := &cobra.Command{
		Use:   "dispatch FILE|-",
		Short: "Append a directory row or an invocation to the OIP ledger and print its receipt",
		Long: `Dispatch a work object to the OIP ledger (POST /api/dispatch) and print
the receipt: inv_ID, seq, object_key, the inv_ID it supersedes and the
entry_hash. FILE (or - for standard input) holds a whole dispatch request,
{"key": K, "body": {"type": "directory_row", ...}}, or with --key K just the
body. Dispatching a key again is a repair: the new version supersedes the
old one, which stays readable (asmp history KEY).

An invocation body with "execute": true waits for the outcome; the exit
status is then as for asmp invoke: 2 when the command failed, 3 when the
invocation was refused. Any other error exits 1 with the server's hint.`,
		Example: `  asmp dispatch my-cli-tool-v1.json
  asmp dispatch row-body.json --key my-cli-tool-v1
  cat request.json | asmp dispatch - --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			b, err := readOIPFile(env, args[0])
			if err != nil {
				return fail(err)
			}
			top := topLevel(b)
			_, hasType := top["type"]
			_, hasBody := top["body"]
			_, hasKey := top["key"]
			switch {
			case key != "" && hasBody && !hasType:
				return fail(fmt.Errorf(`%s holds a whole dispatch request ({"key", "body"}): drop --key, or give the body alone`, args[0]))
			case key == "" && hasType && !hasBody && !hasKey:
				return fail(fmt.Errorf(`%s holds a body only: give its key with --key K, or write {"key": K, "body": {...}}`, args[0]))
			case key != "" && !json.Valid(b):
				return fail(fmt.Errorf("%s is not valid JSON: %s", args[0], jsonSyntaxError(b)))
			}
			// An executed invocation answers when its command ends.
			var probe struct {
				Execute bool `json:"execute"`
				Body    struct {
					Execute bool `json:"execute"`
				} `json:"body"`
			}
			_ = json.Unmarshal(b, &probe)
			execute := probe.Execute && key != "" || probe.Body.Execute && key == ""
			c, err := f.client(env, execute)
			if err != nil {
				return fail(err)
			}
			var rc *oip.Receipt
			if key != "" {
				rc, err = c.Dispatch(cmd.Context(), key, json.RawMessage(b))
			} else {
				rc, err = c.DispatchJSON(cmd.Context(), b)
			}
			if err != nil {
				return fail(err)
			}
			if f.json {
				if err := writeJSON(out, rc); err != nil {
					return err
				}
			} else {
				writeReceipt(out, rc)
			}
			return invokeExit(rc)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the ledger key; FILE then holds the body alone")
	return cmd
}

// jsonSyntaxError says where b stops being JSON.
func jsonSyntaxError(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "unexpected content"
}

// field prints one "name: value" line of the readable OIP output.
func field(out io.Writer, name, format string, args ...any) {
	fmt.Fprintf(out, "%-13s%s\n", name+":", fmt.Sprintf(format, args...))
}

// writeReceipt prints a dispatch receipt for people.
func writeReceipt(out io.Writer, rc *oip.Receipt) {
	field(out, "inv_ID", "%s", rc.InvID)
	field(out, "seq", "%d", rc.Seq)
	field(out, "object_key", "%s", rc.ObjectKey)
	if rc.Supersedes != "" {
		field(out, "supersedes", "%s", rc.Supersedes)
	} else {
		field(out, "supersedes", "none (the key's first version)")
	}
	field(out, "entry_hash", "%s", rc.EntryHash)
	field(out, "timestamp", "%s", rc.Timestamp)
	writeOutcome(out, rc.Outcome)
}

// writeOutcome prints an invocation's outcome (nothing for nil).
func writeOutcome(out io.Writer, o *oip.Outcome) {
	if o == nil {
		return
	}
	line := oneLine(o.Class, 40)
	if o.ExitCode != nil {
		line += ", exit code " + strconv.Itoa(*o.ExitCode)
	}
	if o.Class != oip.OutcomeRefused {
		line += ", " + (time.Duration(o.DurationMS) * time.Millisecond).String()
	}
	field(out, "outcome", "%s", line)
	if o.Reason != "" {
		field(out, "reason", "%s", oneLine(o.Reason, 2000))
	}
	for _, s := range []struct {
		name string
		s    *oip.Stream
	}{{"stdout", o.Stdout}, {"stderr", o.Stderr}} {
		if s.s == nil || (s.s.Size == 0 && s.name == "stderr") {
			continue
		}
		cut := ""
		if s.s.Truncated {
			cut = ", truncated"
		}
		field(out, s.name, "%d bytes%s, sha256 %s", s.s.Size, cut, oneLine(s.s.SHA256, 64))
		if s.s.Text == "" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(textHead(s.s.Text, 4000, 20), "\n"), "\n") {
			fmt.Fprintf(out, "  | %s\n", l)
		}
	}
	if len(o.Output) > 0 {
		field(out, "output", "%s", strings.TrimSuffix(textHead(compactJSON(o.Output), 2000, 1), "\n"))
	}
}

// oneLine makes server text safe for one line of a terminal: control
// characters become spaces, and it is cut to max bytes.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// compactJSON returns raw JSON on one line (as is when it is not JSON).
func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return oneLine(string(raw), 4000)
	}
	return buf.String()
}

// --- asmp receipt ----------------------------------------------------------

// invocationView is the part of an invocation or invocation_result body
// that receipt shows.
type invocationView struct {
	ObjectKey string           `json:"object_key"`
	RowInvID  string           `json:"row_inv_ID"`
	Input     json.RawMessage  `json:"input"`
	Execute   bool             `json:"execute"`
	Command   *command.Command `json:"command"`
	Outcome   *oip.Outcome     `json:"outcome"`
}

func newReceiptCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "receipt INV_ID",
		Short: "Replay a ledger record by its receipt's inv_ID",
		Long: `Read the ledger record of a receipt (GET /api/dispatch?receipt=INV_ID) and
print it: key, type, seq, time, source, the inv_ID it supersedes, replay
links and, for invocations, the command and its outcome (class, exit code,
duration, stdout and stderr heads with their sizes). For an executed
invocation's attempt the result record is looked up in the key's history.
With --json the record exactly as the server sent it.`,
		Example: `  asmp receipt inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX
  asmp receipt inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX --json | jq .body`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			ctx := cmd.Context()
			rec, err := c.Receipt(ctx, args[0])
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, rec)
			}
			writeRecord(ctx, out, c, rec)
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// writeRecord prints a ledger record for people, looking up the related
// records of invocations (best effort: what cannot be read is said so).
func writeRecord(ctx context.Context, out io.Writer, c *client.Client, rec *oip.Record) {
	field(out, "inv_ID", "%s", oneLine(rec.InvID, 200))
	field(out, "key", "%s", oneLine(rec.Key, 200))
	field(out, "type", "%s", oneLine(rec.Type, 200))
	field(out, "seq", "%d", rec.Seq)
	field(out, "time", "%s", oneLine(rec.Timestamp, 64))
	field(out, "source", "%s", oneLine(rec.Source, 200))
	if rec.Supersedes != "" {
		field(out, "supersedes", "%s", oneLine(rec.Supersedes, 200))
	} else {
		field(out, "supersedes", "none (the key's first version)")
	}
	field(out, "entry_hash", "%s", oneLine(rec.EntryHash, 200))
	if rec.ResultOf != "" {
		field(out, "result_of", "%s", oneLine(rec.ResultOf, 200))
	}
	if rec.ReplayOf != "" {
		field(out, "replay_of", "%s", oneLine(rec.ReplayOf, 200))
	}
	if len(rec.ReplayedBy) > 0 {
		field(out, "replayed_by", "%s", oneLine(strings.Join(rec.ReplayedBy, ", "), 4000))
	}

	switch rec.Type {
	case oip.TypeDirectoryRow:
		var r row.Row
		_ = json.Unmarshal(rec.Body, &r)
		field(out, "command", "%s", oneLine(r.Command, 400))
		if r.Description != "" {
			field(out, "description", "%s", oneLine(r.Description, 400))
		}
		var buf bytes.Buffer
		if json.Indent(&buf, rec.Body, "  ", "  ") == nil {
			fmt.Fprintf(out, "body:\n  %s\n", strings.TrimSuffix(textHead(buf.String(), 8000, 200), "\n"))
		}
	case oip.TypeInvocation, oip.TypeInvocationResult:
		var v invocationView
		_ = json.Unmarshal(rec.Body, &v)
		if v.ObjectKey != "" {
			desc := oneLine(v.ObjectKey, 200)
			if v.RowInvID != "" {
				desc += " (version " + oneLine(v.RowInvID, 200) + ")"
			}
			field(out, "row", "%s", desc)
		}
		if rec.Type == oip.TypeInvocationResult && rec.ResultOf != "" {
			// The command is the attempt's.
			if a, err := c.Receipt(ctx, rec.ResultOf); err == nil {
				var av invocationView
				_ = json.Unmarshal(a.Body, &av)
				v.Input, v.Command = av.Input, av.Command
			}
		}
		if len(v.Input) > 0 {
			field(out, "input", "%s", strings.TrimSuffix(textHead(compactJSON(v.Input), 2000, 1), "\n"))
		}
		if v.Command != nil {
			field(out, "command", "%s   [%s]", oneLine(v.Command.Line, 4000), oneLine(v.Command.Method, 20))
		}
		if rec.Type == oip.TypeInvocation {
			field(out, "execute", "%t", v.Execute)
		}
		if v.Outcome == nil && rec.Type == oip.TypeInvocation && v.Execute {
			res, err := resultOf(ctx, c, rec)
			switch {
			case err != nil:
				field(out, "result", "unknown (%s)", oneLine(client.HintOf(err), 400))
			case res == nil:
				field(out, "result", "none yet (still running, or the server stopped before recording it)")
			default:
				field(out, "result", "%s", oneLine(res.InvID, 200))
				var rv invocationView
				_ = json.Unmarshal(res.Body, &rv)
				v.Outcome = rv.Outcome
			}
		}
		writeOutcome(out, v.Outcome)
	}
}

// resultOf returns the invocation_result of the attempt rec from its key's
// history, or nil when there is none.
func resultOf(ctx context.Context, c *client.Client, rec *oip.Record) (*oip.Record, error) {
	h, err := c.History(ctx, rec.Key)
	if err != nil {
		return nil, err
	}
	for i := range h.Records {
		if r := &h.Records[i]; r.Type == oip.TypeInvocationResult && r.ResultOf == rec.InvID {
			return r, nil
		}
	}
	return nil, nil
}

// --- asmp history ----------------------------------------------------------

func newHistoryCmd(env *Env) *cobra.Command {
	var f oipFlags
	cmd := &cobra.Command{
		Use:   "history KEY",
		Short: "List every version of a ledger key, oldest first",
		Long: `List every record of KEY in the OIP ledger, oldest first
(GET /api/dispatch?key=KEY&history=true): each version of a directory row,
or an invocation's attempts and results. Each record but the first
supersedes the one before it. With --json the server's
{"key": K, "records": [...]}.`,
		Example: `  asmp history my-cli-tool-v1
  asmp history my-cli-tool-v1 --json | jq '.records[-1].inv_ID'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			h, err := c.History(cmd.Context(), args[0])
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, h)
			}
			n := len(h.Records)
			fmt.Fprintf(out, "%s: %d version%s, oldest first\n", oneLine(h.Key, 200), n, plural(n))
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tINV_ID\tTIME\tTYPE\tSOURCE\tSUMMARY")
			for _, r := range h.Records {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, oneLine(r.InvID, 64), oneLine(r.Timestamp, 32),
					oneLine(r.Type, 32), oneLine(r.Source, 64), summary(r))
			}
			return tw.Flush()
		},
	}
	f.add(cmd)
	return cmd
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// summary describes a record's body in a few words for a table.
func summary(r oip.Record) string {
	switch r.Type {
	case oip.TypeDirectoryRow:
		var rw row.Row
		_ = json.Unmarshal(r.Body, &rw)
		return oneLine(rw.Command, 60)
	case oip.TypeInvocation, oip.TypeInvocationResult:
		var v invocationView
		_ = json.Unmarshal(r.Body, &v)
		switch {
		case v.Outcome != nil:
			return oneLine(v.Outcome.Class, 20)
		case v.Command != nil:
			return oneLine(v.Command.Line, 60)
		}
	}
	return ""
}

// --- asmp rows -------------------------------------------------------------

func newRowsCmd(env *Env) *cobra.Command {
	var f oipFlags
	var after string
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "rows [--after KEY] [--limit N] [--all]",
		Short: "List the current directory rows (the latest version of each key)",
		Long: `List the directory (GET /api/directory): the current version of every
directory row, in key order, one page at a time. --after continues after a
key (the "next" cursor of the previous page), --limit sets the page size,
--all follows the cursor to the end. With --json the page as the server
sent it ({"rows": [...], "next": KEY}), or with --all {"rows": [...]}
holding every row.`,
		Example: `  asmp rows
  asmp rows --limit 20 --after my-cli-tool-v1
  asmp rows --all --json | jq -r '.rows[].key'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			if limit < 0 {
				return fail(errors.New("--limit must be a positive number of rows"))
			}
			c, err := f.client(env, false)
			if err != nil {
				return fail(err)
			}
			page, err := directory(cmd.Context(), c, after, limit, all)
			if err != nil {
				return fail(err)
			}
			if f.json {
				return writeJSON(out, page)
			}
			writeRows(out, page)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&after, "after", "", "list the rows whose keys come after KEY (the next cursor of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", 0, "rows per page (default: the server's page size)")
	cmd.Flags().BoolVar(&all, "all", false, "follow the next cursor and list every row")
	return cmd
}

// directory reads one page of the directory, or with all every page from
// after on (the result then has no Next).
func directory(ctx context.Context, c *client.Client, after string, limit int, all bool) (*wire.DirectoryPage, error) {
	page, err := c.Directory(ctx, &client.DirectoryOptions{After: after, Limit: limit})
	if err != nil || !all {
		return page, err
	}
	acc := &wire.DirectoryPage{Rows: page.Rows}
	for cursor := page.Next; cursor != ""; cursor = page.Next {
		if cursor <= after {
			return nil, fmt.Errorf("the server's next cursor %q does not advance past %q", oneLine(cursor, 140), oneLine(after, 140))
		}
		after = cursor
		if page, err = c.Directory(ctx, &client.DirectoryOptions{After: after, Limit: limit}); err != nil {
			return nil, err
		}
		acc.Rows = append(acc.Rows, page.Rows...)
	}
	if acc.Rows == nil {
		acc.Rows = []wire.DirectoryRow{}
	}
	return acc, nil
}

// writeRows prints a directory page as a table.
func writeRows(out io.Writer, page *wire.DirectoryPage) {
	if len(page.Rows) == 0 {
		fmt.Fprintln(out, "No directory rows.")
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tCOMMAND\tMETHOD\tDESCRIPTION\tINV_ID")
		for _, r := range page.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(r.Key, 128), oneLine(r.Command, 40), oneLine(r.Method(), 10),
				oneLine(r.Description, 60), oneLine(r.InvID, 64))
		}
		_ = tw.Flush()
	}
	if page.Next != "" {
		fmt.Fprintf(out, "More: asmp rows --after %s (or --all)\n", command.Quote(oneLine(page.Next, 140)))
	}
}

// --- asmp command ----------------------------------------------------------

func newCommandCmd(env *Env) *cobra.Command {
	var f oipFlags
	var input string
	var argv bool
	cmd := &cobra.Command{
		Use:   "command KEY|ROW_FILE [--input JSON|@FILE|-]",
		Short: "Build the exact command of a directory row for an input (offline on a row file)",
		Long: `Build the command a directory row runs for an input, writing nothing.

If the argument is an existing file (or a path with a slash), it is a
directory row: a dispatch request {"key": K, "body": {...}}, the body alone,
or a row of asmp rows --json. The command is then built here, offline, with
no server and no network. Otherwise the argument is a row's key and the
server builds it (POST /api/commands/KEY) from the row's current version.

--input is a JSON object keyed by the row's arg and flag names, @FILE, or -
for standard input (default {}). Prints the command line (for shell rows
the exact string /bin/sh runs); --argv prints the argument vector instead,
one word per line; --json prints {"argv", "command", "invocation_method"}.`,
		Example: `  asmp command my-cli-tool-v1.json --input '{"input_file": "data.txt", "output": "result.txt", "verbose": true}'
  asmp command my-cli-tool-v1 --input @input.json --argv
  asmp command number-facts.factor --input '{"numbers": [360]}' --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fail := func(err error) error { return agentError(out, f.json, err) }
			in, err := readInputFlag(env, input)
			if err != nil {
				return fail(err)
			}
			var built *command.Command
			if isRowFile(args[0]) {
				r, err := rowFromFile(env, args[0])
				if err != nil {
					return fail(err)
				}
				if built, err = command.Build(r, in); err != nil {
					return fail(fmt.Errorf("building the command of %s: %w", args[0], err))
				}
			} else {
				c, err := f.client(env, false)
				if err != nil {
					return fail(err)
				}
				if built, err = c.Command(cmd.Context(), args[0], in); err != nil {
					return fail(err)
				}
			}
			switch {
			case f.json:
				return writeJSON(out, built)
			case argv:
				for _, a := range built.Argv {
					fmt.Fprintln(out, a)
				}
			default:
				fmt.Fprintln(out, built.Line)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&input, "input", "", "the row's input: a JSON object keyed by its arg and flag names, @FILE, or - for stdin (default {})")
	cmd.Flags().BoolVar(&argv, "argv", false, "print the argument vector, one word per line, instead of the command line")
	return cmd
}

// isRowFile reports whether the argument of asmp command names a row file
// rather than a key: an existing file, or a path (keys have no slash).
func isRowFile(arg string) bool {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return true
	}
	return strings.ContainsRune(arg, '/') || strings.ContainsRune(arg, os.PathSeparator)
}

// rowFromFile reads and validates a directory row from a file: a dispatch
// request, a row body, or a row of the directory listing.
func rowFromFile(env *Env, path string) (*row.Row, error) {
	b, err := readOIPFile(env, path)
	if err != nil {
		return nil, err
	}
	if top := topLevel(b); top != nil {
		_, hasCommand := top["command"]
		var typ string
		_ = json.Unmarshal(top["type"], &typ)
		switch body, hasBody := top["body"]; {
		case hasBody && !hasCommand:
			b = body // a dispatch request
		case typ == row.Category:
			// A row of the directory listing: its key and inv_ID are
			// not row fields.
			delete(top, "key")
			delete(top, "inv_ID")
			if b, err = json.Marshal(top); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	r, err := row.Decode(b)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, &protocol.Error{Code: pe.Code, Hint: path + " is not a valid directory row: " + pe.Hint, Fields: pe.Fields, Err: err}
		}
		return nil, fmt.Errorf("%s is not a valid directory row: %w", path, err)
	}
	return r, nil
}

// --- asmp verify -----------------------------------------------------------

// verifyResult is the --json output of asmp verify.
type verifyResult struct {
	Verified  bool   `json:"verified"`
	InvID     string `json:"inv_ID"`
	ObjectKey string `json:"object_key,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	EntryHash string `json:"entry_hash,omitempty"`
	LeafIndex *int64 `json:"leaf_index,omitempty"`
	TreeSize  int64  `json:"tree_size,omitempty"`
	RootHash  string `json:"root_hash,omitempty"`
	Origin    string `json:"origin,omitempty"`
	Signer    string `json:"signer,omitempty"`
	Key       string `json:"key,omitempty"`
	Pinned    bool   `json:"pinned"`
	Error     string `json:"error,omitempty"`
	// Extends is set with --checkpoint: the ledger extends the kept
	// checkpoint (now replaced by Checkpoint, the current one).
	Extends    *bool            `json:"extends,omitempty"`
	Checkpoint *wire.Checkpoint `json:"checkpoint,omitempty"`
	// FirstUse is set with --checkpoint when FILE held no checkpoint: the
	// current one was kept without a check (trust on first use).
	FirstUse bool `json:"first_use,omitempty"`
}

func newVerifyCmd(env *Env) *cobra.Command {
	var f oipFlags
	var key, keyFile string
	var treeSize int64
	var kept string
	cmd := &cobra.Command{
		Use:   "verify [INV_ID] [--key VERIFIER_KEY | --key-file FILE] [--tree-size N] [--checkpoint FILE]",
		Short: "Check that a receipt's record is in the ledger under a signed checkpoint, or that the ledger still extends a kept checkpoint (fetched from the server, checked here)",
		Long: `Fetch the record of INV_ID, its inclusion proof and the signed checkpoint
of the ledger's tree from the server, and check them here, without trusting
the server's word: the record's entry_hash is the
SHA-256 of its canonical JSON (RFC 8785), the proof leads from its Merkle
leaf (index seq-1) to the checkpoint's root hash (RFC 6962), and the
checkpoint is signed (Ed25519 signed note) by the verifier key.

The key is the server's own (GET /api/ledger/key) unless you pin one with
--key or --key-file: only a pinned key, obtained from a source you trust
(for example the "ledger_key" that asmp serve logs at start), stops a lying
server, since it could otherwise sign its lies with a key of its own.
--tree-size proves against the checkpoint of an older tree size.

--checkpoint FILE is a monitor's check (with or without INV_ID): FILE keeps
a checkpoint seen earlier; the ledger's current checkpoint must extend it
(the same root at the same size, or a consistency proof to a larger tree),
else verify fails. FILE is then replaced by the current checkpoint; a
missing FILE is created with it (trust on first use). A server's head file
(the key file's name + .head) is such a file.

Exit status 0 when verified; 1 with the reason otherwise. With --json
{"verified": bool, ...} on stdout in both cases.`,
		Example: `  asmp verify inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX
  asmp verify inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX --key 'asmp.dev/ledger+1a2b3c4d+AU…'
  asmp verify inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX --key-file ledger.pub --tree-size 12 --json
  asmp verify --checkpoint ledger.checkpoint`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 && kept == "" {
				return errors.New("give the INV_ID of a receipt to verify, or --checkpoint FILE to check that the ledger extends a kept checkpoint")
			}
			var res verifyResult
			var err error
			if kept != "" {
				var ck *wire.Checkpoint
				var first bool
				if ck, first, err = monitorOnce(cmd.Context(), env, &f, kept, key); err == nil {
					ok := true
					res.Extends, res.Checkpoint, res.FirstUse = &ok, ck, first
					res.Verified = len(args) == 0 // the only check asked for passed
					switch {
					case f.json:
					case first:
						fmt.Fprintf(out, "no checkpoint was kept in %s: kept the current one (trust on first use): tree size %d, root %s\n", kept, ck.TreeSize, ck.RootHash)
					default:
						fmt.Fprintf(out, "ledger extends the kept checkpoint: tree size %d, root %s (kept in %s)\n", ck.TreeSize, ck.RootHash, kept)
					}
				} else {
					no := false
					res.Extends = &no
				}
			}
			if len(args) == 1 && err == nil {
				res.InvID = args[0]
				err = verify(cmd.Context(), env, &f, &res, key, keyFile, treeSize)
			}
			if err != nil {
				res.Verified, res.Error = false, err.Error()
			}
			if f.json {
				if werr := writeJSON(out, res); werr != nil && err == nil {
					return werr
				}
			} else if err == nil && res.InvID != "" {
				writeVerified(out, res)
			}
			return err
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&kept, "checkpoint", "", "check that the ledger extends the checkpoint kept in FILE, then keep the current one there")
	cmd.Flags().StringVar(&key, "key", "", "the verifier key to trust (name+hash+base64), instead of the server's")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "read the verifier key to trust from FILE")
	cmd.Flags().Int64Var(&treeSize, "tree-size", 0, "prove against the checkpoint of this tree size (default: the current one)")
	cmd.MarkFlagsMutuallyExclusive("key", "key-file")
	return cmd
}

// verify fetches and checks INV_ID's record, filling res as it goes.
func verify(ctx context.Context, env *Env, f *oipFlags, res *verifyResult, key, keyFile string, treeSize int64) error {
	if treeSize < 0 {
		return errors.New("--tree-size must be a positive tree size")
	}
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return fmt.Errorf("--key-file: %w", err)
		}
		key = strings.TrimSpace(string(b))
		if key == "" {
			return fmt.Errorf("--key-file %s is empty: it must hold the ledger's verifier key", keyFile)
		}
	}
	res.Pinned = key != ""
	if res.Pinned {
		if _, err := note.NewVerifier(strings.TrimSpace(key)); err != nil {
			return fmt.Errorf("the pinned key is not a note verifier key (name+hash+base64, as GET /api/ledger/key answers): %w", err)
		}
	}
	c, err := f.client(env, false)
	if err != nil {
		return err
	}
	rec, err := c.Receipt(ctx, res.InvID)
	if err != nil {
		return err
	}
	if rec.InvID != res.InvID {
		return fmt.Errorf("the server answered with the record %s for %s", oneLine(rec.InvID, 64), res.InvID)
	}
	res.ObjectKey, res.Seq = rec.Key, rec.Seq
	p, err := c.Proof(ctx, res.InvID, treeSize)
	if err != nil {
		return err
	}
	signed := p.Checkpoint
	if signed == "" {
		ck, err := c.Checkpoint(ctx)
		if err != nil {
			return err
		}
		signed = ck.Note
	}
	if !res.Pinned {
		if key, _, err = c.LedgerKey(ctx); err != nil {
			return err
		}
	}
	key = strings.TrimSpace(key)
	res.Key = key
	if treeSize > 0 && p.TreeSize != treeSize {
		return fmt.Errorf("receipt %s does not verify: asked for tree size %d, the server proved against %d", res.InvID, treeSize, p.TreeSize)
	}
	plain := *rec
	plain.ReplayedBy = nil // computed on read, not hashed
	if err := oip.VerifyReceipt(plain, *p, []byte(signed), key); err != nil {
		return fmt.Errorf("receipt %s does not verify: %w", res.InvID, err)
	}
	ck, err := oip.OpenCheckpoint([]byte(signed), key)
	if err != nil {
		return fmt.Errorf("receipt %s does not verify: %w", res.InvID, err)
	}
	v, err := note.NewVerifier(key)
	if err != nil {
		return fmt.Errorf("verifier key: %w", err)
	}
	leaf := p.LeafIndex
	res.Verified = true
	res.EntryHash, res.LeafIndex = rec.EntryHash, &leaf
	res.TreeSize, res.RootHash, res.Origin, res.Signer = ck.TreeSize, ck.RootHash, ck.Origin, v.Name()
	return nil
}

// writeVerified prints what verify checked.
func writeVerified(out io.Writer, res verifyResult) {
	field(out, "inv_ID", "%s (key %s, seq %d)", res.InvID, oneLine(res.ObjectKey, 200), res.Seq)
	field(out, "entry_hash", "%s (the SHA-256 of the record's canonical JSON)", res.EntryHash)
	field(out, "leaf_index", "%d", *res.LeafIndex)
	field(out, "tree_size", "%d", res.TreeSize)
	field(out, "root_hash", "%s (the inclusion proof leads to it)", res.RootHash)
	field(out, "checkpoint", "origin %s, signed by %s", oneLine(res.Origin, 200), oneLine(res.Signer, 200))
	if res.Pinned {
		field(out, "key", "%s (pinned)", oneLine(res.Key, 400))
	} else {
		field(out, "key", "%s (the server's own: pin it with --key or --key-file to not trust the server)", oneLine(res.Key, 400))
	}
	fmt.Fprintln(out, "verified")
}
