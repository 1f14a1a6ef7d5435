package oip

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/store"
)

// Before the full pass has built the tree, a record read from the store is
// checked against the signed tree anyway (SPEC section 16: what is served
// or executed is what was signed). The leaves start-up checked, the ones
// this server appended, and the ones proven since are kept in memory
// (known); any other record is proven on its read: the checkpoint of the
// append that wrote it and the one before, both signed by this server's
// key, bound its batch of records; the batch's leaves, grown from the
// earlier checkpoint's compact range (itself checked against its signed
// root), must make the later checkpoint's signed root. That is a few
// indexed reads and two signature checks per batch, whatever the size of
// the ledger, so start-up stays as fast as it was.

// maxKnown bounds the leaves kept before the tree is built; past it,
// records are proven again on each read.
const maxKnown = 1 << 16

// maxProvenBatch is the largest batch of records (the records one signed
// checkpoint added) proven on a read; a record of a larger batch (the
// first checkpoint of an upgraded ledger) waits for the full pass.
const maxProvenBatch = 4096

// errNeedTree says that a record cannot be proven on its read: it waits
// for the full pass.
var errNeedTree = errors.New("oip: the record is proven by the full pass only")

// rememberLeafLocked keeps a leaf checked against the signed tree, until the
// tree is built. The caller holds s.mu.
func (s *Service) rememberLeafLocked(seq int64, leaf [hashSize]byte) {
	if s.treeOK || len(s.known) >= maxKnown {
		return
	}
	if s.known == nil {
		s.known = map[int64][hashSize]byte{}
	}
	s.known[seq] = leaf
}

// checkLeaf checks the leaf of a record read from the store against the
// signed tree: the verified tree once it is built, before that the leaves
// known to be signed, or a proof to a signed checkpoint.
func (s *Service) checkLeaf(ctx context.Context, sr store.LedgerRecord, leaf [hashSize]byte) error {
	for {
		prove, err := s.checkLeafHeld(sr, leaf)
		if err != nil || !prove {
			return err
		}
		err = s.proveSigned(ctx, sr.Seq, leaf)
		if !errors.Is(err, errNeedTree) {
			return err
		}
		if s.Ready() {
			// Another replica's record, beyond the checked tree, of a
			// batch too large to prove on a read: the background checks
			// (catch-up, advanceVerified) cover it.
			return nil
		}
		if err := s.waitTree(ctx); err != nil {
			return err
		}
	}
}

// checkLeafHeld checks leaf against what the service holds; prove reports
// that it holds nothing for the record's seq and the record must be
// proven to a signed checkpoint.
func (s *Service) checkLeafHeld(sr store.LedgerRecord, leaf [hashSize]byte) (prove bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	size := int64(s.tree.size())
	if s.treeOK && sr.Seq <= size {
		if s.tree.levels[0][sr.Seq-1] != leaf {
			return false, recordFault(sr.Seq, "(%s) does not match its leaf in the checked Merkle tree", sr.InvID)
		}
		return false, nil
	}
	if want, ok := s.known[sr.Seq]; ok && !s.treeOK {
		if want != leaf {
			return false, recordFault(sr.Seq, "(%s) does not match its leaf checked against the signed checkpoints", sr.InvID)
		}
		return false, nil
	}
	if want, ok := s.pending[sr.Seq]; ok {
		if want != leaf {
			return false, recordFault(sr.Seq, "(%s) does not match the leaf this server appended", sr.InvID)
		}
		return false, nil
	}
	if s.isBuilding(sr.InvID, leaf) {
		return false, nil
	}
	if s.treeOK && !s.shared {
		// Beyond every record this server appended or checked, and no
		// append of its own in flight: inserted into the file.
		return false, recordFault(sr.Seq, "(%s) is beyond the ledger this server signed (tree size %d): it was inserted into the database", sr.InvID, size)
	}
	return true, nil
}

// proveSigned checks that leaf is the leaf of seq in a tree signed by
// this server's key: the checkpoints around seq's batch, their signatures,
// and the batch's leaves against them (see the comment at the top). The
// batch's leaves are remembered. errNeedTree when the proof needs more
// than one batch's records or a checkpoint signed by another key (before
// a key rotation): the full pass decides.
func (s *Service) proveSigned(ctx context.Context, seq int64, leaf [hashSize]byte) error {
	cks, err := s.st.LedgerCheckpoints(ctx, seq-1, 1)
	if err != nil {
		return fmt.Errorf("oip: read checkpoints: %w", err)
	}
	if len(cks) == 0 {
		return recordFault(seq, "is beyond every signed checkpoint: it was inserted into the database")
	}
	hi := cks[0]
	hiRoot, err := s.signedRoot(hi)
	if err != nil {
		return err
	}
	lo := store.LedgerCheckpoint{}
	rng := rangeFactory.NewEmptyRange(0)
	if hi.PrevSize > 0 {
		prev, err := s.st.LedgerCheckpoints(ctx, hi.PrevSize-1, 1)
		if err != nil {
			return fmt.Errorf("oip: read checkpoints: %w", err)
		}
		if len(prev) == 0 || prev[0].TreeSize != hi.PrevSize || prev[0].TreeSize >= seq {
			return errNeedTree // a broken chain: the full pass names it
		}
		lo = prev[0]
		loRoot, err := s.signedRoot(lo)
		if err != nil {
			return err
		}
		// The stored compact range is trusted only once it makes the
		// signed root.
		if rng, err = rangeFactory.NewRange(0, uint64(lo.TreeSize), slices.Clone(lo.Range)); err != nil {
			return checkpointFault("the stored checkpoint of tree size %d has a broken Merkle range: %v", lo.TreeSize, err)
		}
		if root, err := rng.GetRootHash(nil); err != nil || hex.EncodeToString(root) != loRoot {
			return checkpointFault("the stored Merkle range of the checkpoint of tree size %d does not make its signed root", lo.TreeSize)
		}
	}
	if hi.TreeSize-lo.TreeSize > maxProvenBatch {
		return errNeedTree
	}
	recs, err := s.st.LedgerRange(ctx, lo.TreeSize+1, hi.TreeSize+1)
	if err != nil {
		return fmt.Errorf("oip: read ledger %d..%d: %w", lo.TreeSize+1, hi.TreeSize, err)
	}
	leaves := make([][hashSize]byte, 0, len(recs))
	for i, r := range recs {
		l, err := checkRecord(r, lo.TreeSize+int64(i)+1)
		if err != nil {
			return err
		}
		if err := rng.Append(l[:], nil); err != nil {
			return fmt.Errorf("oip: merkle range: %w", err)
		}
		leaves = append(leaves, l)
	}
	if int64(len(leaves)) != hi.TreeSize-lo.TreeSize {
		return recordFault(lo.TreeSize+int64(len(leaves))+1, "is missing (the checkpoint of tree size %d covers it)", hi.TreeSize)
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return fmt.Errorf("oip: merkle root: %w", err)
	}
	if hex.EncodeToString(root) != hiRoot {
		return &TamperError{Seq: lo.TreeSize + 1, What: fmt.Sprintf("the records %d..%d do not make the root signed in the checkpoint of tree size %d (a record there was rewritten with a new hash, or records were reordered); found on a read, before the full check reached them", lo.TreeSize+1, hi.TreeSize, hi.TreeSize), Hint: tamperHint}
	}
	if leaves[seq-lo.TreeSize-1] != leaf {
		return recordFault(seq, "differs from the record at its seq that the signed checkpoint of tree size %d covers", hi.TreeSize)
	}
	s.mu.Lock()
	for i, l := range leaves {
		s.rememberLeafLocked(lo.TreeSize+int64(i)+1, l)
	}
	s.mu.Unlock()
	return nil
}

// signedRoot returns the root of a stored checkpoint as its note, signed
// by this server's key, says it; errNeedTree for a checkpoint signed by
// another key (before a key rotation), a *TamperError for one that does
// not verify.
func (s *Service) signedRoot(ck store.LedgerCheckpoint) (string, error) {
	if ck.PublicKey != s.key.vkey {
		return "", errNeedTree
	}
	s.provedMu.Lock()
	seen, ok := s.provedCks[ck.TreeSize]
	s.provedMu.Unlock()
	if ok && seen.note == ck.Note {
		return seen.root, nil
	}
	opened, err := verify.OpenCheckpoint([]byte(ck.Note), s.key.vkey)
	if err != nil {
		return "", checkpointFault("the checkpoint of tree size %d does not verify: %v", ck.TreeSize, err)
	}
	if opened.TreeSize != ck.TreeSize || opened.RootHash != ck.RootHash {
		return "", checkpointFault("the signed note of the checkpoint of tree size %d says tree size %d, root %s", ck.TreeSize, opened.TreeSize, opened.RootHash)
	}
	s.provedMu.Lock()
	if len(s.provedCks) >= maxProvedCks {
		clear(s.provedCks)
	}
	if s.provedCks == nil {
		s.provedCks = map[int64]provedCk{}
	}
	s.provedCks[ck.TreeSize] = provedCk{note: ck.Note, root: opened.RootHash}
	s.provedMu.Unlock()
	return opened.RootHash, nil
}

// provedCk is a checkpoint note whose signature was checked, with the
// root it signs.
type provedCk struct{ note, root string }

// maxProvedCks bounds the checkpoints whose signatures are remembered as
// checked.
const maxProvedCks = 4096
