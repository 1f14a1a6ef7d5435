// Command asmp is the Agent State Machine Protocol server, its clients, and
// the OIP directory ledger tools. Run `asmp --help` for the commands.
package main

import (
	"context"
	"os"

	"github.com/asmp-dev/asmp/internal/app/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
}
