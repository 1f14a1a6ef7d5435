package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/internal/mcpbridge"
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

Logs go to stderr; stdout carries only MCP messages.`,
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
			opts := &mcpbridge.Options{Rows: rows, Logger: log}
			if noExecute {
				opts.Execute = func(context.Context) bool { return false }
			}
			t := &mcp.IOTransport{Reader: io.NopCloser(env.Stdin), Writer: nopWriteCloser{env.Stdout}}
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

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
