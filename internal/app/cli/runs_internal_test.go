package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// asmp runs takes subcommands (asmp runs NAME …) besides listing runs.
func TestRunsTakesSubcommands(t *testing.T) {
	saved := runsSubcommands
	t.Cleanup(func() { runsSubcommands = saved })
	registerRunsSubcommand(func(env *Env) *cobra.Command {
		return &cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Println("probe ran with", strings.Join(args, " "))
			return nil
		}}
	})
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"runs", "probe", "x"}, &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	if code != 0 || !strings.Contains(out.String(), "probe ran with x") {
		t.Fatalf("asmp runs probe x: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := Main(context.Background(), []string{"runs", "stray"}, &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}); code == 0 {
		t.Fatalf("asmp runs stray: exit 0, %q", out.String())
	}
}
