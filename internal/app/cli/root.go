// Package cli implements the asmp command line: the server (serve), the
// workflow tools (validate, graph), the clients (attach, start, step, show,
// watch) and the OIP commands (dispatch, receipt, history, rows, command,
// invoke, verify).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/client"
	"github.com/asmp-dev/asmp/protocol"
)

// Version is the asmp version, set at build time with
// -ldflags "-X github.com/asmp-dev/asmp/internal/app/cli.Version=v1.2.3".
var Version = "dev"

// Env is what a command runs with: its streams and environment, so tests
// can run the whole program in-process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// commands registers the subcommands; each file adds its own in init.
var commands []func(env *Env) *cobra.Command

func register(f func(env *Env) *cobra.Command) { commands = append(commands, f) }

// NewRoot returns the asmp root command.
func NewRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "asmp",
		Short:         "Agent State Machine Protocol server, clients and OIP ledger",
		Long:          "asmp serves workflows as State Frames over HTTP+JSON, drives runs as remote dynamic CLIs,\nand keeps CLI tools as directory rows in a verifiable, append-only ledger.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetFlagErrorFunc(flagError)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	for _, f := range commands {
		root.AddCommand(f(env))
	}
	return root
}

// flagError points a mistyped flag at the one meant, and at --help.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	for _, port := range []string{"unknown flag: --port", "unknown shorthand flag: 'p'"} {
		if strings.HasPrefix(msg, port) && cmd.Flags().Lookup("addr") != nil {
			return fmt.Errorf("%s: %s takes the whole address to listen on, e.g. --addr 127.0.0.1:9000", msg, cmd.CommandPath())
		}
	}
	return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
}

// runArgs is the Args check of commands that take a run id first: a
// missing id is explained, with where to find one.
func runArgs(minRest int, maxRest int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("%s needs a run id: %s. A run's id is printed by asmp start (Run: …) and by asmp attach, and is the run_id of every frame; start one with asmp start", cmd.Name(), cmd.UseLine())
		}
		if n := len(args) - 1; n < minRest || (maxRest >= 0 && n > maxRest) {
			return fmt.Errorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

func version() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}

// Main runs asmp with args and returns the process exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	root := NewRoot(env)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		printError(env.Stderr, err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// apiOnlyHints are phrases of server hints written for HTTP clients, and
// what a user of the command line does instead.
var apiOnlyHints = strings.NewReplacer(
	"Start one with POST /runs.", "Start one with `asmp start` (asmp start --workflow ID for another workflow).",
)

// forCLI rewords the HTTP-facing advice in err's hint for command line
// users, in place, and returns err.
func forCLI(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		ce.Hint = apiOnlyHints.Replace(ce.Hint)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		pe.Hint = apiOnlyHints.Replace(pe.Hint)
	}
	return err
}

// printError prints err as "asmp: <message>", once: the sentinel errors of
// package client already start with "asmp: " (Go's convention for a
// package's errors), so that prefix is not repeated.
func printError(w io.Writer, err error) {
	forCLI(err)
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Hint
	}
	for strings.HasPrefix(msg, "asmp: ") {
		msg = strings.TrimPrefix(msg, "asmp: ")
	}
	fmt.Fprintf(w, "asmp: %s\n", msg)
}

func init() {
	register(func(env *Env) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the asmp version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				fmt.Fprintf(cmd.OutOrStdout(), "asmp %s\n", version())
				return nil
			},
		}
	})
}
