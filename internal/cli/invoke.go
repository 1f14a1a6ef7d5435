package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	oipexec "github.com/asmp-dev/asmp/oip/exec"
)

// The server side of invocations: the execution flags of asmp serve, the
// executor built from them, and the example rows dispatched at start-up.

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
	fl.DurationVar(&f.timeout, "exec-timeout", oipexec.DefaultMaxTimeout, "the longest any execution may run: it caps each row's own timeout (rows without one get 30s)")
	fl.Int64Var(&f.maxOutput, "exec-max-output", oipexec.DefaultMaxOutput, "bytes of stdout and of stderr kept per execution (their full sizes and SHA-256 are always recorded)")
	fl.IntVar(&f.concurrency, "exec-concurrency", 0, "executions run at once (default: the number of CPUs, at least 2)")
	fl.StringVar(&f.dir, "exec-dir", "", "directory in which each execution gets a fresh working directory, removed afterwards (default: $TMPDIR/asmp-exec)")
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
	ex, err := oipexec.New(oipexec.Options{
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

// installExampleRows dispatches the built-in examples' directory rows,
// each only when the ledger does not hold it unchanged already.
func installExampleRows(ctx context.Context, ledger *oip.Service, log *slog.Logger) error {
	rows, err := examples.Rows()
	if err != nil {
		return err
	}
	ctx = auth.WithPrincipal(ctx, auth.Principal{Name: "asmp-serve", Scopes: auth.AllScopes})
	for _, r := range rows {
		rc, did, err := ledger.EnsureRow(ctx, r.Key, r.Body)
		if err != nil {
			return fmt.Errorf("dispatching the example row %s: %w", r.Key, err)
		}
		if did {
			log.Info("dispatched an example directory row", "key", r.Key, "inv_ID", rc.InvID)
		}
	}
	return nil
}
