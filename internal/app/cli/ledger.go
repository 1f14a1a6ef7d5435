package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/asmp-dev/asmp/asmpd"
	"github.com/asmp-dev/asmp/oip"
	oipverify "github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/oip/wire"
)

func init() { register(newLedgerCmd) }

func newLedgerCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Check the OIP ledger: offline in full (check), or as a monitor (watch)",
	}
	cmd.AddCommand(newLedgerCheckCmd(env), newLedgerWatchCmd(env))
	return cmd
}

func newLedgerCheckCmd(env *Env) *cobra.Command {
	var db, keyFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check --db FILE [--key FILE] [--json]",
		Short: "Check every ledger record against its signed checkpoints, offline",
		Long: `Open the database (stop the server first: a SQLite file belongs to one
process) and check the whole ledger: every record against the bytes it was
written with (its entry_hash and Merkle leaf), every stored checkpoint
against the tree the records make, its signature and its place in the
chain of checkpoints (none removed), the signing key (changed only by a
key-rotation record), and the head file beside the key file.

A progress bar goes to standard error. Exit status 0 when the ledger
checks; 1 naming the first bad seq (or the checkpoint or head file)
otherwise. --json prints the report on stdout in both cases.`,
		Example: `  asmp ledger check --db asmp.db
  asmp ledger check --db postgres://asmp@db/asmp --key /etc/asmp/ledger.key --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if db == "" {
				return errors.New("--db is required: the SQLite file or postgres:// URL of the ledger")
			}
			if db != ":memory:" && !strings.Contains(db, "://") {
				if _, err := os.Stat(db); err != nil {
					return fmt.Errorf("--db %s: %w", db, err)
				}
			}
			ctx := cmd.Context()
			st, info, err := asmpd.OpenStore(ctx, db, nil)
			if err != nil {
				return err
			}
			keyPath := info.KeyPath
			defer st.Close()
			if keyFile != "" {
				keyPath = keyFile
			}
			opts := &oip.CheckOptions{Progress: recordsBar(env.Stderr)}
			if keyPath != "" {
				opts.HeadPath = oip.HeadPath(keyPath)
			}
			rep, err := oip.Check(ctx, st, opts)
			fmt.Fprintln(env.Stderr)
			if asJSON {
				if werr := writeJSON(cmd.OutOrStdout(), rep); werr != nil && err == nil {
					return werr
				}
			} else if err == nil {
				out := cmd.OutOrStdout()
				field(out, "records", "%d", rep.Records)
				field(out, "checkpoints", "%d", rep.Checkpoints)
				if rep.RootHash != "" {
					field(out, "root_hash", "%s", rep.RootHash)
				}
				if rep.Head > 0 {
					field(out, "head file", "tree size %d, extended by the database", rep.Head)
				}
				fmt.Fprintln(out, "ledger checked")
			}
			return err
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the database: a SQLite file or a postgres:// URL")
	cmd.Flags().StringVar(&keyFile, "key", "", "the ledger's signing key file, whose head file (FILE.head) is checked too (default: the database's, as asmp serve finds it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// recordsBar draws "[#####.....] 50% 500/1000 records" on w, in place.
func recordsBar(w io.Writer) func(done, total int64) {
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		const width = 30
		n := int(done * width / total)
		fmt.Fprintf(w, "\r[%s%s] %3d%% %d/%d records", strings.Repeat("#", n), strings.Repeat(".", width-n), done*100/total, done, total)
	}
}

func newLedgerWatchCmd(env *Env) *cobra.Command {
	var f oipFlags
	var state, key string
	var every time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "watch --state FILE [--interval 1m] [--once] [--key VERIFIER_KEY]",
		Short: "Monitor the ledger: fail when it stops extending the last checkpoint seen",
		Long: `Keep the last checkpoint seen in the state file and, every --interval,
fetch the ledger's current checkpoint and the consistency proof from the
kept one to it. The state file is updated after every check that passes;
a ledger that does not extend it (records removed or rewritten, a tree
smaller than before, another root for the same size) ends the watch with
exit status 1 and the reason. The first run keeps the current checkpoint
(trust on first use), unless the state file already holds one (a server's
head file, FILE.key.head, can seed it).`,
		Example: `  asmp ledger watch --state ledger.checkpoint --interval 5m
  asmp ledger watch --state ledger.checkpoint --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if state == "" {
				return errors.New("--state is required: the file that keeps the last checkpoint seen")
			}
			out := cmd.OutOrStdout()
			for {
				ck, first, err := monitorOnce(cmd.Context(), env, &f, state, key)
				now := time.Now().UTC().Format(time.RFC3339)
				if f.json {
					no := false
					line := watchLine{Time: now, State: state, Extends: &no, FirstUse: first, Checkpoint: ck}
					if err != nil {
						line.Error = err.Error()
					} else {
						yes := true
						line.Extends = &yes
					}
					if werr := writeJSONLine(out, line); werr != nil && err == nil {
						return werr
					}
				}
				if err != nil {
					return err
				}
				switch {
				case f.json:
				case first:
					fmt.Fprintf(out, "%s no checkpoint was kept in %s: kept the current one (trust on first use): tree size %d, root %s\n", now, state, ck.TreeSize, ck.RootHash)
				default:
					fmt.Fprintf(out, "%s ledger extends the kept checkpoint: tree size %d, root %s\n", now, ck.TreeSize, ck.RootHash)
				}
				if once {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&state, "state", "", "the file keeping the last checkpoint seen (JSON, as GET /api/ledger/checkpoint answers)")
	cmd.Flags().DurationVar(&every, "interval", time.Minute, "time between checks")
	cmd.Flags().BoolVar(&once, "once", false, "check once and exit")
	cmd.Flags().StringVar(&key, "key", "", "the verifier key to trust (default: the kept checkpoint's)")
	return cmd
}

// watchLine is one check of asmp ledger watch --json, a line of its own.
type watchLine struct {
	Time  string `json:"time"`
	State string `json:"state"`
	// Extends: the ledger extends the kept checkpoint (true on first use,
	// when none was kept: FirstUse).
	Extends    *bool            `json:"extends"`
	FirstUse   bool             `json:"first_use"`
	Checkpoint *wire.Checkpoint `json:"checkpoint,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// monitorOnce checks that the ledger extends the checkpoint kept in
// state (or keeps the current one when state does not exist yet: first),
// and keeps the current checkpoint.
func monitorOnce(ctx context.Context, env *Env, f *oipFlags, state, key string) (cur *wire.Checkpoint, first bool, err error) {
	c, err := f.client(env, false)
	if err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(state)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		first = true
		if cur, err = c.Checkpoint(ctx); err != nil {
			return nil, first, err
		}
		if _, err := oipverify.OpenCheckpoint([]byte(cur.Note), firstNonEmpty(key, cur.PublicKey)); err != nil {
			return nil, first, fmt.Errorf("the ledger's checkpoint does not verify: %w", err)
		}
	case err != nil:
		return nil, false, fmt.Errorf("checkpoint file: %w", err)
	default:
		var old wire.Checkpoint
		if err := json.Unmarshal(b, &old); err != nil {
			return nil, false, fmt.Errorf("checkpoint file %s does not hold a checkpoint (JSON as GET /api/ledger/checkpoint answers): %w", state, err)
		}
		if cur, err = oipverify.Extends(ctx, c, old, key); err != nil {
			return nil, false, fmt.Errorf("ledger check against %s failed: %w", state, err)
		}
	}
	out, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return nil, first, err
	}
	tmp := state + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return nil, first, fmt.Errorf("keep checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Clean(state)); err != nil {
		return nil, first, fmt.Errorf("keep checkpoint: %w", err)
	}
	return cur, first, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
