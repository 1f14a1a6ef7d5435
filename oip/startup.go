package oip

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// open runs the start-up checks of a ledger of n records (SPEC section
// 16): the upgrade of records written before canonical bytes and
// checkpoints were stored, the newest checkpoint against the ledger's
// size and the key, the head file, and the records added since the last
// full check. The older records are checked by Verify, in the background,
// and each one read before it has is proven to its signed checkpoint
// first (checkLeaf).
func (s *Service) open(ctx context.Context, n int64, o Options) error {
	upgraded, err := s.upgrade(ctx, n)
	if err != nil {
		return err
	}
	newest, n, err := newestCheckpoint(ctx, s.st)
	if err != nil {
		return err
	}
	none := newest == nil
	var latest store.LedgerCheckpoint
	if !none {
		latest = *newest
	}
	rotate := false
	if !none {
		opened, err := verify.OpenCheckpoint([]byte(latest.Note), latest.PublicKey)
		if err != nil || opened.TreeSize != latest.TreeSize || opened.RootHash != latest.RootHash {
			return checkpointFault("the newest stored checkpoint (tree size %d) is not validly signed", latest.TreeSize)
		}
		if latest.PublicKey != s.key.vkey {
			if !o.RotateKey {
				return &TamperError{What: fmt.Sprintf("the signing key %s is not the key %s that signed the ledger's newest checkpoint (tree size %d)", keyID(s.key.vkey), keyID(latest.PublicKey), latest.TreeSize),
					Hint: "Restore the ledger's key file from the backup kept with the database's, or start once with --ledger-rotate-key to append a key-rotation record naming the old and the new key"}
			}
			rotate = true
		}
	}
	if err := s.checkHeadFile(ctx, n, latest, none, upgraded || o.SharedStore, o.ResetHead); err != nil {
		return err
	}
	if !none {
		s.noteSigned(wireCheckpoint(s.origin, latest))
	}
	// The records added since the last full check, from its checkpoint.
	from := store.LedgerCheckpoint{}
	if v, err := s.st.LedgerVerified(ctx); err != nil {
		return fmt.Errorf("oip: verified size: %w", err)
	} else if v > 0 && v <= n {
		if cks, err := s.st.LedgerCheckpoints(ctx, v-1, 1); err != nil {
			return fmt.Errorf("oip: read checkpoints: %w", err)
		} else if len(cks) == 1 && cks[0].TreeSize == v {
			from = cks[0]
		}
	}
	c, err := newChecker(s.st, from)
	if err != nil {
		return err
	}
	if from.TreeSize == 0 {
		c.full = &tree{} // a check from the start builds the whole tree
	} else {
		// Until the full pass has built the tree, the leaves checked
		// here are what their records are checked against when read; the
		// older ones are proven to their signed checkpoints on a read.
		c.keep = map[int64][hashSize]byte{}
	}
	if err := c.run(ctx, n); err != nil {
		return err
	}
	s.mu.Lock()
	s.known = c.keep
	s.mu.Unlock()
	s.base = n
	s.verified.Store(from.TreeSize)
	if c.full == nil && n > from.TreeSize {
		// The records since the last verified point are checked, from its
		// trusted checkpoint, as advanceVerified checks them: the next
		// start begins here, whatever happens to the full pass.
		if err := s.st.SetLedgerVerified(ctx, n); err != nil {
			return fmt.Errorf("oip: verified size: %w", err)
		}
		s.verified.Store(n)
	}
	if c.full != nil {
		s.installTree(*c.full)
		s.vOnce.Do(func() {})
		if err := s.st.SetLedgerVerified(ctx, n); err != nil {
			return fmt.Errorf("oip: verified size: %w", err)
		}
		s.verified.Store(n)
	}
	if rotate {
		if err := s.rotateKey(ctx, latest); err != nil {
			return err
		}
	}
	return nil
}

// checkHeadFile checks the ledger against the head file, or writes one.
func (s *Service) checkHeadFile(ctx context.Context, n int64, latest store.LedgerCheckpoint, none, mayCreate, reset bool) error {
	if s.headPath == "" {
		return nil
	}
	head, ok, err := readHead(s.headPath)
	if err != nil && !reset {
		return err
	}
	switch {
	case ok && !reset:
		if err := checkHead(ctx, s.st, head, n); err != nil {
			return err
		}
		s.headSize = head.TreeSize
		s.noteSigned(head)
	case !ok && n > 0 && !mayCreate && !reset:
		return &TamperError{What: fmt.Sprintf("the head file %s is missing but the ledger holds %d records", s.headPath, n),
			Hint: "Restore the head file from the backup kept with the key file; or, to accept the database's ledger as it is (a database restored on purpose), start once with --ledger-reset-head"}
	case reset:
		s.log.Warn("rewriting the ledger head file from the database", "path", s.headPath, "tree_size", latest.TreeSize)
	}
	if !none && latest.TreeSize > s.headSize {
		s.advanceHead(latest)
	}
	return nil
}

// upgrade gives the records of an earlier release their canonical bytes,
// after checking that each one's entry_hash matches its content, and the
// ledger its first checkpoint when it has none. It reports whether it
// changed anything.
func (s *Service) upgrade(ctx context.Context, n int64) (bool, error) {
	first, err := s.st.LedgerUncanonical(ctx)
	if err != nil {
		return false, fmt.Errorf("oip: upgrade ledger: %w", err)
	}
	if first == 0 {
		return false, nil
	}
	_, err = s.st.LatestLedgerCheckpoint(ctx)
	noCheckpoint := errors.Is(err, store.ErrNotFound)
	if err != nil && !noCheckpoint {
		return false, fmt.Errorf("oip: read checkpoint: %w", err)
	}
	if noCheckpoint {
		first = 1 // the first checkpoint needs every leaf
	}
	s.log.Info("upgrading the ledger: storing canonical bytes and a checkpoint", "records", n, "from_seq", first)
	rng := rangeFactory.NewEmptyRange(uint64(first - 1))
	for from := first; from <= n; {
		recs, err := s.st.LedgerRange(ctx, from, min(from+loadPage, n+1))
		if err != nil {
			return false, fmt.Errorf("oip: upgrade ledger: %w", err)
		}
		if len(recs) == 0 {
			return false, recordFault(from, "is missing from the ledger being upgraded (it ends at %d)", from-1)
		}
		canon := map[int64][]byte{}
		for _, sr := range recs {
			if sr.Seq != from {
				return false, recordFault(from, "is missing from the ledger being upgraded (the next record stored has seq %d)", sr.Seq)
			}
			c := sr.Canonical
			if c == nil {
				if c, err = CanonicalJSON(fromStore(sr)); err != nil {
					return false, recordFault(sr.Seq, "cannot be canonicalised: %v", err)
				}
				sum := sha256.Sum256(c)
				if hex.EncodeToString(sum[:]) != sr.EntryHash {
					return false, recordFault(sr.Seq, "entry_hash %s does not match its content", sr.EntryHash)
				}
				canon[sr.Seq] = c
			}
			leaf := leafHash(c)
			if err := rng.Append(leaf[:], nil); err != nil {
				return false, fmt.Errorf("oip: merkle range: %w", err)
			}
			from++
		}
		if err := s.st.SetLedgerCanonical(ctx, canon); err != nil {
			return false, fmt.Errorf("oip: upgrade ledger: %w", err)
		}
	}
	if !noCheckpoint || n == 0 {
		return true, nil
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return false, fmt.Errorf("oip: merkle root: %w", err)
	}
	note, err := s.key.sign(s.origin, uint64(n), root)
	if err != nil {
		return false, err
	}
	ck := store.LedgerCheckpoint{TreeSize: n, RootHash: hex.EncodeToString(root), Note: note, PublicKey: s.key.vkey, Range: rng.Hashes(), Time: s.now().UTC()}
	if err := s.st.PutLedgerCheckpoint(ctx, ck); err != nil && !errors.Is(err, store.ErrExists) {
		return false, fmt.Errorf("oip: upgrade ledger: %w", err)
	}
	return true, nil
}

// rotateKey appends the key-rotation record: the checkpoints from here on
// are signed by the new key.
func (s *Service) rotateKey(ctx context.Context, old store.LedgerCheckpoint) error {
	body, err := json.Marshal(keyRotation{Type: TypeKeyRotation, OldKey: old.PublicKey, NewKey: s.key.vkey})
	if err != nil {
		return fmt.Errorf("oip: key rotation: %w", err)
	}
	t, err := s.template(ctx, keyRotationKey, TypeKeyRotation, body)
	if err != nil {
		return err
	}
	t.Source = "asmp"
	rec, err := s.appendRecord(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("oip: key rotation: %w", err)
	}
	s.log.Warn("rotated the ledger signing key", "old_key", keyID(old.PublicKey), "new_key", keyID(s.key.vkey), "seq", rec.Seq, "inv_ID", rec.InvID)
	return nil
}

// advanceHead replaces the head file with ck when ck is newer; it is
// called after ck's transaction committed, so the head file is never
// ahead of the database.
func (s *Service) advanceHead(ck store.LedgerCheckpoint) {
	if ck.TreeSize == 0 {
		return
	}
	s.noteSigned(wireCheckpoint(s.origin, ck))
	if s.headPath == "" {
		return
	}
	s.headMu.Lock()
	defer s.headMu.Unlock()
	if ck.TreeSize <= s.headSize {
		return
	}
	if err := writeHead(s.headPath, wireCheckpoint(s.origin, ck)); err != nil {
		s.log.Error("writing the ledger head file failed", "path", s.headPath, "err", err)
		return
	}
	s.headSize = ck.TreeSize
}

// installTree makes t the verified tree and adds the leaves appended
// meanwhile.
func (s *Service) installTree(t tree) {
	s.mu.Lock()
	s.tree = t
	s.treeOK = true
	s.known = nil
	for q := range s.pending {
		if q <= int64(s.tree.size()) {
			delete(s.pending, q)
		}
	}
	s.drainLocked()
	s.mu.Unlock()
	close(s.ready)
}

// Verify runs the full check of the records older than the start-up
// check covered: every record against its canonical bytes, every stored
// checkpoint against the tree they make. It builds the tree that proofs
// are served from. It runs once; later calls wait for it and return its
// result, a *TamperError when the ledger does not match (OnTamper is
// called too). progress, when set, is called after every page.
func (s *Service) Verify(ctx context.Context, progress func(done, total int64)) error {
	s.vOnce.Do(func() {
		s.vErr = s.verifyAll(ctx, progress)
		if s.vErr != nil {
			// OnTamper first: a read waiting for the pass is answered
			// once the server has been told.
			var te *TamperError
			if errors.As(s.vErr, &te) {
				s.tamper(s.vErr)
			}
			close(s.failed)
		}
	})
	select {
	case <-s.ready:
		return nil
	default:
	}
	if s.vErr != nil {
		return s.vErr
	}
	return nil
}

func (s *Service) verifyAll(ctx context.Context, progress func(done, total int64)) error {
	c, err := newChecker(s.st, store.LedgerCheckpoint{})
	if err != nil {
		return err
	}
	c.full = &tree{}
	c.progress = progress
	if err := c.run(ctx, s.base); err != nil {
		return err
	}
	if err := checkHeads(ctx, s.st); err != nil {
		return err
	}
	s.installTree(*c.full)
	if err := s.st.SetLedgerVerified(ctx, s.base); err != nil {
		s.log.Warn("recording the verified ledger size failed", "err", err)
	} else if s.base > s.verified.Load() {
		s.verified.Store(s.base)
	}
	return s.catchUp(ctx)
}

// Ready reports whether the full check of the ledger has finished and
// passed (the server's /readyz).
func (s *Service) Ready() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// waitTree waits for the verified tree, starting the full check if
// nobody did.
func (s *Service) waitTree(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	default:
	}
	go func() { _ = s.Verify(context.WithoutCancel(ctx), nil) }()
	select {
	case <-s.ready:
		return nil
	case <-s.failed:
		return protocol.Errorf(protocol.EUnavailable, "The ledger failed its integrity check; the server is stopping. See its log.")
	case <-ctx.Done():
		return protocol.Errorf(protocol.EUnavailable, "The ledger is still being checked after start; retry in a moment (GET /readyz says when it is ready).")
	}
}

// checked checks a record read from the store against its canonical
// bytes and the signed tree, and returns it as those bytes say (see
// checkedStore).
func (s *Service) checked(ctx context.Context, sr store.LedgerRecord) (Record, error) {
	rec, err := s.checkedStore(ctx, sr)
	if err != nil {
		return Record{}, err
	}
	return fromStore(rec), nil
}

// checkedStore checks a record read from the store: its body column and
// every other column against its stored canonical bytes, and the leaf
// those bytes make against the signed tree (checkLeaf: the verified tree,
// or before the full pass has built it, a proof to a checkpoint signed by
// this server's key). It returns the record with the body of those
// bytes: whatever is served, executed or used as a row version is what
// the leaf is the hash of. A mismatch stops the server (OnTamper) and is
// answered as 503 with a hint.
func (s *Service) checkedStore(ctx context.Context, sr store.LedgerRecord) (store.LedgerRecord, error) {
	leaf, err := checkRecord(sr, sr.Seq)
	if err == nil && sr.Seq < 1 {
		// No seq below 1 is ever written: inserted into the file, outside
		// every range the checks walk.
		err = recordFault(sr.Seq, "(%s) has a seq below 1, which no append writes: it was inserted into the database", sr.InvID)
	}
	if err == nil {
		err = s.checkLeaf(ctx, sr, leaf)
	}
	if err == nil {
		sr, err = decodeRecord(sr)
	}
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return store.LedgerRecord{}, pe // the full pass failed, or is still running past ctx
		}
		var te *TamperError
		if !errors.As(err, &te) {
			return store.LedgerRecord{}, err
		}
		s.tamper(err)
		return store.LedgerRecord{}, &protocol.Error{Code: protocol.EUnavailable, Hint: "A ledger record failed its integrity check; the server is stopping. See its log.", Err: err}
	}
	return sr, nil
}

// isBuilding reports whether this service built the record of invID, with
// that leaf, for an append it has not finished.
func (s *Service) isBuilding(invID string, leaf [hashSize]byte) bool {
	b, ok := s.building.Load(invID)
	return ok && b.([hashSize]byte) == leaf
}

// tamper reports a failed integrity check, once.
func (s *Service) tamper(err error) {
	s.tamperMu.Do(func() {
		s.log.Error("the ledger failed its integrity check", "err", err)
		if s.onTamper != nil {
			s.onTamper(err)
		}
	})
}

// defaultVerifyEvery is how many records may follow the last full check
// before they are checked in the background: start-up checks at most
// about that many.
const defaultVerifyEvery = 1024

// maybeAdvanceVerified starts the check of the records after the last full
// check, up to the checkpoint of size, once there are enough of them. It
// runs while the full pass does too, so that appends made meanwhile do
// not pile up for the next start to check.
func (s *Service) maybeAdvanceVerified(size int64) {
	if size-s.verified.Load() < s.verifyEvery || !s.advancing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.advancing.Store(false)
		if err := s.advanceVerified(context.Background(), size); err != nil {
			var te *TamperError
			if errors.As(err, &te) {
				s.tamper(err)
				return
			}
			s.log.Warn("checking the newest ledger records failed", "err", err)
		}
	}()
}

// advanceVerified checks the records from the last full check up to the
// checkpoint of size, against their bytes, the stored checkpoints and the
// checked tree, and records size as checked.
func (s *Service) advanceVerified(ctx context.Context, size int64) error {
	from := store.LedgerCheckpoint{}
	if v := s.verified.Load(); v > 0 {
		cks, err := s.st.LedgerCheckpoints(ctx, v-1, 1)
		if err != nil {
			return fmt.Errorf("oip: read checkpoints: %w", err)
		}
		if len(cks) != 1 || cks[0].TreeSize != v {
			return checkpointFault("the checkpoint of tree size %d, where the ledger was last checked in full, is missing", v)
		}
		from = cks[0]
	}
	c, err := newChecker(s.st, from)
	if err != nil {
		return err
	}
	if err := c.run(ctx, size); err != nil {
		return err
	}
	if root, err := s.root(size); err == nil && hex.EncodeToString(root) != c.last.RootHash {
		return checkpointFault("the checkpoint of tree size %d has root %s, the checked tree %x", size, c.last.RootHash, root)
	}
	if err := s.st.SetLedgerVerified(ctx, size); err != nil {
		return fmt.Errorf("oip: verified size: %w", err)
	}
	s.verified.Store(size)
	return nil
}
