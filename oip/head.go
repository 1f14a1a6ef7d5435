package oip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/store"
)

// HeadPath is the head file kept beside a signing key file: the newest
// checkpoint the server signed, outside the database.
func HeadPath(keyPath string) string { return keyPath + ".head" }

// readHead reads a head file; ok is false when there is none.
func readHead(path string) (ck Checkpoint, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("oip: read head file: %w", err)
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		return Checkpoint{}, false, &TamperError{What: fmt.Sprintf("the head file %s is not a checkpoint: %v", path, err), Hint: "Restore it from a backup, or start with --ledger-reset-head to rewrite it from the database"}
	}
	opened, err := verify.OpenCheckpoint([]byte(ck.Note), ck.PublicKey)
	if err != nil || opened.TreeSize != ck.TreeSize || opened.RootHash != ck.RootHash {
		return Checkpoint{}, false, &TamperError{What: fmt.Sprintf("the head file %s does not hold a validly signed checkpoint", path), Hint: "Restore it from a backup, or start with --ledger-reset-head to rewrite it from the database"}
	}
	return opened, true, nil
}

// writeHead replaces the head file atomically and durably: a temporary
// file, fsync, rename, fsync of the directory.
func writeHead(path string, ck Checkpoint) error {
	b, err := json.Marshal(ck)
	if err != nil {
		return fmt.Errorf("oip: encode head: %w", err)
	}
	tmp, err := os.CreateTemp(dirOf(path), ".ledger-head-*")
	if err != nil {
		return fmt.Errorf("oip: write head file: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(append(b, '\n'))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("oip: write head file: %w", err)
	}
	d, err := os.Open(dirOf(path))
	if err != nil {
		return fmt.Errorf("oip: sync head directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("oip: sync head directory: %w", err)
	}
	return nil
}

// checkHead checks that the ledger of n records in st extends the head
// checkpoint: the database holds the checkpoint of the head's tree size,
// with the same root (the background pass then checks that the records
// make that root, and every later checkpoint extends it).
func checkHead(ctx context.Context, st store.LedgerStore, head Checkpoint, n int64) error {
	if head.TreeSize > n {
		return &TamperError{Seq: n + 1, What: fmt.Sprintf("the head file records a tree of %d records, the database holds %d: records %d..%d were removed", head.TreeSize, n, n+1, head.TreeSize), Hint: tamperHint}
	}
	if head.TreeSize == 0 {
		return nil
	}
	cks, err := st.LedgerCheckpoints(ctx, head.TreeSize-1, 1)
	if err != nil {
		return fmt.Errorf("oip: read checkpoints: %w", err)
	}
	if len(cks) == 0 || cks[0].TreeSize != head.TreeSize {
		return checkpointFault("the checkpoint of tree size %d recorded in the head file is missing from the database", head.TreeSize)
	}
	if cks[0].RootHash != head.RootHash {
		return &TamperError{Seq: 0, What: fmt.Sprintf("the database's checkpoint of tree size %d has root %s, the head file %s: the ledger was rewritten", head.TreeSize, cks[0].RootHash, head.RootHash), Hint: tamperHint}
	}
	return nil
}
