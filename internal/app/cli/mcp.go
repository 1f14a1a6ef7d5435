package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/internal/bridge/mcpbridge"
)

// defaultServer is the server a client command talks to when neither
// --server nor $ASMP_URL names one.
const defaultServer = "http://127.0.0.1:8000"

func init() { register(newMCPCmd) }

func newMCPCmd(env *Env) *cobra.Command {
	var (
		server, rows, logLevel string
		noExecute              bool
		poll                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve an asmp server's workflows and directory rows to an MCP host over stdio",
		Long: `Speak the Model Context Protocol on stdin/stdout, for MCP hosts (agents,
editors, desktop assistants), against an asmp server over HTTP.

The server is --server, else $ASMP_URL, else ` + defaultServer + `; the token is
$ASMP_TOKEN. Tools: asmp_list_workflows, asmp_start_run, asmp_get_run,
asmp_transition, asmp_invoke, asmp_dispatch, asmp_receipt; after
asmp_start_run or asmp_get_run, the run's offered actions (by name) and
stage tools (tool_<name>), which follow the run's state; and one tool per
directory row of type cli (row_<key>, filtered by --rows GLOB). A row tool
records an invocation and answers the built argv; it asks the server to run
the command when the token may (GET /whoami at start: the server runs with
--allow-exec and the token holds the exec scope), never with --no-execute.

Logs go to stderr; stdout carries only MCP messages. A stdin line that is
not JSON is answered with JSON-RPC's parse error, and the session goes on.`,
		Example: `  ASMP_TOKEN=s3cret asmp mcp --server http://127.0.0.1:8000
  asmp mcp --rows 'number-facts.*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(env, logLevel, "text")
			if err != nil {
				return err
			}
			if err := mcpbridge.CheckRows(rows); err != nil {
				return fmt.Errorf("--rows: %w", err)
			}
			if server == "" {
				server = agentGetenv(env)("ASMP_URL")
			}
			if server == "" {
				server = defaultServer
			}
			c, err := agentClient(env, server)
			if err != nil {
				return err
			}
			if err := mcpCredentials(cmd.Context(), c, server, agentGetenv(env)("ASMP_TOKEN") != ""); err != nil {
				return err
			}
			opts := &mcpbridge.Options{Rows: rows, Logger: log}
			if noExecute {
				opts.Execute = func(context.Context) bool { return false }
			}
			out := &lockedWriter{w: env.Stdout}
			t := &mcp.IOTransport{Reader: jsonLines(env.Stdin, out, log), Writer: nopWriteCloser{out}}
			return mcpbridge.Serve(cmd.Context(), c, opts, poll, t)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", "ASMP server base URL (default: $ASMP_URL, else "+defaultServer+")")
	fl.StringVar(&rows, "rows", "", "only directory rows whose key matches this glob become tools (default: all)")
	fl.BoolVar(&noExecute, "no-execute", false, "row tools only build their command, never run it (default: they run it when the token may)")
	fl.DurationVar(&poll, "poll", mcpbridge.DefaultPoll, "how often the directory is read for changed rows")
	fl.StringVar(&logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	return cmd
}

// mcpCredentials asks GET /whoami once before the bridge starts reading
// the directory every poll: a server that refuses the credentials (no
// token where it has tokens, or an unknown one) would otherwise be polled
// with them until it locks out the caller's address (429). A server that
// cannot be reached, or predates /whoami, is left to the bridge, which
// reports its errors as they come.
func mcpCredentials(ctx context.Context, c *client.Client, server string, haveToken bool) error {
	_, err := c.WhoAmI(ctx)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusUnauthorized {
		return nil
	}
	if !haveToken {
		return fmt.Errorf("the server %s needs a token and ASMP_TOKEN is not set: set ASMP_TOKEN to the secret of one of its tokens (asmp serve --token NAME=SECRET, or ASMP_TOKENS) and start asmp mcp again (it stopped rather than poll without one into the server's lockout of failed attempts)", server)
	}
	return fmt.Errorf("the server %s refused the token in ASMP_TOKEN (%s): set ASMP_TOKEN to a valid token and start asmp mcp again (it stopped rather than poll with it into the server's lockout of failed attempts)", server, ce.Hint)
}

// maxMCPLine bounds one message on stdin (the SDK's own frame limit).
const maxMCPLine = 4 << 20

// jsonLines passes the lines of in that are JSON on to the MCP transport
// and answers each other one itself with JSON-RPC's parse error (-32700,
// id null), as JSON-RPC asks: one malformed line from a host must not end
// the session. Blank lines are skipped.
func jsonLines(in io.Reader, out io.Writer, log *slog.Logger) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, long, err := readLine(r, maxMCPLine)
			if msg := bytes.TrimSpace(line); long || len(msg) > 0 {
				var werr error
				if !long && json.Valid(msg) {
					_, werr = pw.Write(append(msg, '\n'))
				} else {
					werr = parseError(out, long, log)
				}
				if werr != nil {
					pw.CloseWithError(werr)
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// parseError answers a line that is no JSON-RPC message (long: one over
// maxMCPLine) with JSON-RPC's parse error.
func parseError(out io.Writer, long bool, log *slog.Logger) error {
	why := "Parse error: the line is not JSON"
	if long {
		why = fmt.Sprintf("Parse error: the line is longer than %d bytes", maxMCPLine)
	}
	log.Warn("a stdin line that is not a JSON-RPC message was answered with a parse error", "too_long", long)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": why}})
	_, err := out.Write(append(b, '\n'))
	return err
}

// readLine reads one line, its newline included. A line longer than limit
// is read to its end and dropped: long is set and line is nil.
func readLine(r *bufio.Reader, limit int) (line []byte, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > limit {
				line, long = nil, true
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// lockedWriter serialises writes to w: the transport's messages and the
// parse errors jsonLines writes are each one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
