package oip

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// TypeKeyRotation is the record appended when the signing key changes
// (asmp serve --ledger-rotate-key): its body names the old and the new
// verifier keys, so a verifier holding old checkpoints sees the change.
const TypeKeyRotation = "key_rotation"

// keyRotationKey is the dispatch key of key-rotation records.
const keyRotationKey = "asmp.ledger.key"

// TamperError reports a ledger that does not match what was signed: an
// edited, removed or reordered record, a missing or conflicting
// checkpoint, a head file ahead of the database, or a missing key.
type TamperError struct {
	// Seq is the first record found bad; 0 when the fault is not one
	// record's (a checkpoint, the head file or the key).
	Seq int64
	// What says what does not match.
	What string
	// Hint says what to do.
	Hint string
}

func (e *TamperError) Error() string {
	s := "ledger integrity: " + e.What
	if e.Hint != "" {
		s += ". " + e.Hint
	}
	return s
}

const tamperHint = "The database was changed outside asmp (or restored from an older backup). Restore it from a backup that matches the head file and the checkpoints, then run `asmp ledger check --db FILE` to confirm"

func recordFault(seq int64, format string, args ...any) *TamperError {
	return &TamperError{Seq: seq, What: fmt.Sprintf("record seq %d: ", seq) + fmt.Sprintf(format, args...), Hint: tamperHint}
}

func checkpointFault(format string, args ...any) *TamperError {
	return &TamperError{What: fmt.Sprintf(format, args...), Hint: tamperHint}
}

// rangeFactory makes compact Merkle ranges. A range appends in place into
// the hash slice it is given: give it a copy of a stored checkpoint's.
var rangeFactory = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// checkRecord checks one stored record for the full pass: its leaf is the
// RFC 6962 hash of its stored canonical bytes (one SHA-256; the caller
// compares it with the tree or the signed checkpoints), and its body
// column agrees with those bytes. It returns the leaf hash. The other
// columns are compared with the bytes when a record is read (decoded);
// what is served is always what the bytes say.
func checkRecord(sr store.LedgerRecord, seq int64) ([hashSize]byte, error) {
	if sr.Seq != seq {
		return [hashSize]byte{}, recordFault(seq, "is missing (the next record stored has seq %d)", sr.Seq)
	}
	if sr.Canonical == nil {
		return [hashSize]byte{}, recordFault(seq, "has no stored canonical bytes")
	}
	if !bodyAgrees(sr.Body, sr.Canonical) {
		return [hashSize]byte{}, recordFault(seq, "(%s) differs from the bytes it was written with (an edited body)", sr.InvID)
	}
	return leafHash(sr.Canonical), nil
}

// canonicalPrefix begins every record's canonical bytes: RFC 8785 sorts
// "body" before every other member, and "inv_ID" follows it.
const (
	canonicalPrefix = `{"body":`
	canonicalNext   = `,"inv_ID":`
)

// bodyAgrees reports whether the body column stored beside the canonical
// bytes c is the body c holds: byte for byte when it was stored in its
// canonical form (every record appended since canonical bodies were
// stored), else once canonicalised (the records of earlier releases).
func bodyAgrees(body json.RawMessage, c []byte) bool {
	if inCanonical(body, c) {
		return true
	}
	t, err := jcs.Transform(body)
	return err == nil && inCanonical(t, c)
}

func inCanonical(body, c []byte) bool {
	rest, ok := bytes.CutPrefix(c, []byte(canonicalPrefix))
	if !ok {
		return false
	}
	rest, ok = bytes.CutPrefix(rest, body)
	return ok && len(body) > 0 && bytes.HasPrefix(rest, []byte(canonicalNext))
}

// canonicalBody returns the body member of a record's canonical bytes c
// (in its canonical form), nil when c does not decode.
func canonicalBody(c []byte) json.RawMessage {
	var h struct {
		Body json.RawMessage `json:"body"`
	}
	if json.Unmarshal(c, &h) != nil {
		return nil
	}
	return h.Body
}

// decodeRecord returns the record its stored canonical bytes say, after
// checking that every column stored beside them (the ones the store
// indexes and answers queries by) says the same: a record is served and
// executed from the bytes its leaf is the hash of, never from a column
// that could be edited apart from them.
func decodeRecord(sr store.LedgerRecord) (store.LedgerRecord, error) {
	h, err := verify.DecodeCanonical(sr.Canonical)
	if err != nil {
		return sr, recordFault(sr.Seq, "(%s): its stored canonical bytes do not decode: %v", sr.InvID, err)
	}
	var field string
	switch {
	case h.Seq != sr.Seq:
		field = "seq (a record moved from another seq)"
	case h.InvID != sr.InvID:
		field = "inv_ID"
	case h.Key != sr.Key:
		field = "key"
	case h.Type != sr.Type:
		field = "type"
	case h.Source != sr.Source:
		field = "source"
	case h.Supersedes != sr.Supersedes:
		field = "supersedes"
	case h.ResultOf != sr.ResultOf:
		field = "result_of"
	case h.ReplayOf != sr.ReplayOf:
		field = "replay_of"
	case h.Timestamp != formatTime(sr.Timestamp):
		field = "timestamp"
	case h.EntryHash != sr.EntryHash:
		field = "entry_hash"
	}
	if field != "" {
		return sr, recordFault(sr.Seq, "(%s): its %s differs from the bytes it was written with (an edited field)", sr.InvID, field)
	}
	sr.Body = h.Body
	return sr, nil
}

// sign is the store.LedgerSigner of the Service: it extends the compact
// range of the newest stored checkpoint by the added records' leaves and
// signs the new tree head.
func (s *Service) sign(prev *store.LedgerCheckpoint, added []store.LedgerRecord) (store.LedgerCheckpoint, error) {
	if err := s.checkExtends(prev); err != nil {
		return store.LedgerCheckpoint{}, err
	}
	r := rangeFactory.NewEmptyRange(0)
	var prevSize int64
	if prev != nil {
		var err error
		if r, err = rangeFactory.NewRange(0, uint64(prev.TreeSize), slices.Clone(prev.Range)); err != nil {
			return store.LedgerCheckpoint{}, checkpointFault("the stored checkpoint of tree size %d has a broken Merkle range: %v", prev.TreeSize, err)
		}
		prevSize = prev.TreeSize
	}
	for i, rec := range added {
		if rec.Seq != prevSize+int64(i)+1 {
			return store.LedgerCheckpoint{}, recordFault(prevSize+int64(i)+1, "is missing before the records being signed")
		}
		if rec.Canonical == nil {
			return store.LedgerCheckpoint{}, recordFault(rec.Seq, "has no stored canonical bytes to sign")
		}
		leaf := leafHash(rec.Canonical)
		// Only what this append built is signed: a record inserted into
		// the database after the newest checkpoint would be bound into
		// the tree by this signature.
		if b, ok := s.building.Load(rec.InvID); !ok || b.([hashSize]byte) != leaf {
			return store.LedgerCheckpoint{}, &TamperError{Seq: rec.Seq, What: fmt.Sprintf("(%s) follows the newest checkpoint but was not written by this server's append: it was inserted into the database; the append was refused so that it is not signed", rec.InvID), Hint: tamperHint}
		}
		if err := r.Append(leaf[:], nil); err != nil {
			return store.LedgerCheckpoint{}, fmt.Errorf("oip: merkle range: %w", err)
		}
	}
	size := prevSize + int64(len(added))
	root, err := r.GetRootHash(nil)
	if err != nil {
		return store.LedgerCheckpoint{}, fmt.Errorf("oip: merkle root: %w", err)
	}
	n, err := s.key.sign(s.origin, uint64(size), root)
	if err != nil {
		return store.LedgerCheckpoint{}, err
	}
	return store.LedgerCheckpoint{
		TreeSize: size, PrevSize: prevSize, RootHash: hex.EncodeToString(root), Note: n,
		PublicKey: s.key.vkey, Range: slices.Clone(r.Hashes()), Time: s.now().UTC(),
	}, nil
}

// checkExtends checks, before an append signs, that the store's newest
// checkpoint prev extends the newest checkpoint this service signed (or
// checked at start): not a smaller tree, and the same root at that size.
// Otherwise records were removed or rewritten under the running server,
// and signing would bind a second root to a tree size already signed.
// A larger tree (another replica's appends) is compared with the checked
// tree when that has reached it; the background checks cover the rest.
func (s *Service) checkExtends(prev *store.LedgerCheckpoint) error {
	s.signedMu.Lock()
	mine := s.signed
	s.signedMu.Unlock()
	if mine.TreeSize == 0 {
		return nil
	}
	var have store.LedgerCheckpoint
	if prev != nil {
		have = *prev
	}
	switch {
	case have.TreeSize < mine.TreeSize:
		return &TamperError{Seq: have.TreeSize + 1, What: fmt.Sprintf("the database's newest checkpoint is of tree size %d, but this server signed one of tree size %d: records %d..%d and their checkpoints were removed while it ran; the append was refused so that no seq is issued twice and no second root is signed for a tree size", have.TreeSize, mine.TreeSize, have.TreeSize+1, mine.TreeSize), Hint: tamperHint}
	case have.TreeSize == mine.TreeSize && have.RootHash != mine.RootHash:
		return &TamperError{What: fmt.Sprintf("the database's checkpoint of tree size %d has root %s, but this server signed %s for that size: the ledger was rewritten while it ran; the append was refused", have.TreeSize, have.RootHash, mine.RootHash), Hint: tamperHint}
	case have.TreeSize > mine.TreeSize:
		s.mu.RLock()
		var root []byte
		if s.treeOK && int64(s.tree.size()) >= have.TreeSize {
			root, _ = s.tree.root(uint64(have.TreeSize))
		}
		s.mu.RUnlock()
		if root != nil && hex.EncodeToString(root) != have.RootHash {
			return &TamperError{What: fmt.Sprintf("the database's checkpoint of tree size %d has root %s, the checked tree %x: the ledger was rewritten while the server ran; the append was refused", have.TreeSize, have.RootHash, root), Hint: tamperHint}
		}
	}
	return nil
}

// signedSize is the tree size of the newest checkpoint this service
// signed or checked at start (0 before any).
func (s *Service) signedSize() int64 {
	s.signedMu.Lock()
	defer s.signedMu.Unlock()
	return s.signed.TreeSize
}

// notShrunk refuses a read (and stops the server) when the database's
// ledger is smaller than the newest checkpoint this service signed:
// records were removed while it ran, and what would be served (an older
// version as the current one, a 404 for a receipt handed out) is not what
// was signed.
func (s *Service) notShrunk(ctx context.Context) error {
	n, err := s.st.LedgerSize(ctx)
	if err != nil {
		return fmt.Errorf("oip: ledger size: %w", err)
	}
	return s.shrunk(n)
}

// shrunk is notShrunk for a size already read.
func (s *Service) shrunk(n int64) error {
	if mine := s.signedSize(); n < mine {
		err := &TamperError{Seq: n + 1, What: fmt.Sprintf("the database's ledger ends at seq %d, but this server signed a checkpoint of tree size %d: records were removed while it ran", n, mine), Hint: tamperHint}
		s.tamper(err)
		return &protocol.Error{Code: protocol.EUnavailable, Hint: "The ledger in the database is smaller than the checkpoint this server signed last (records were removed); nothing is served from it and the server is stopping. See its log.", Err: err}
	}
	return nil
}

// noteSigned remembers ck as the newest checkpoint signed (or checked at
// start), after its transaction committed.
func (s *Service) noteSigned(ck Checkpoint) {
	s.signedMu.Lock()
	if ck.TreeSize > s.signed.TreeSize {
		s.signed = ck
	}
	s.signedMu.Unlock()
}

// wireCheckpoint is the API form of a stored checkpoint.
func wireCheckpoint(origin string, ck store.LedgerCheckpoint) Checkpoint {
	return Checkpoint{Origin: origin, TreeSize: ck.TreeSize, RootHash: ck.RootHash, Note: ck.Note, PublicKey: ck.PublicKey}
}

// checker walks the ledger in seq order from a verified point, checking
// every record against its canonical bytes and every stored checkpoint
// it reaches against the tree the records make: the chain of checkpoints
// (none removed), their roots, their signatures, and that the signing key
// changes only with a key-rotation record.
type checker struct {
	st   store.LedgerStore
	rng  *compact.Range
	full *tree // when not nil, every leaf is appended to it too
	// keep, when not nil, receives the checked leaves (up to maxKnown).
	keep map[int64][hashSize]byte
	last store.LedgerCheckpoint
	// rotated is the new key named by a key-rotation record since last.
	rotated  map[string]string // old key -> new key
	cks      []store.LedgerCheckpoint
	count    int64 // checkpoints checked
	progress func(done, total int64)
}

// newChecker starts at the stored checkpoint from (TreeSize 0: the empty
// tree), whose compact range it trusts.
func newChecker(st store.LedgerStore, from store.LedgerCheckpoint) (*checker, error) {
	c := &checker{st: st, last: from, rotated: map[string]string{}}
	if from.TreeSize == 0 {
		c.rng = rangeFactory.NewEmptyRange(0)
		return c, nil
	}
	r, err := rangeFactory.NewRange(0, uint64(from.TreeSize), slices.Clone(from.Range))
	if err != nil {
		return nil, checkpointFault("the stored checkpoint of tree size %d has a broken Merkle range: %v", from.TreeSize, err)
	}
	c.rng = r
	return c, nil
}

// run checks the records after c.last up to size, and every stored
// checkpoint up to size; size must be a checkpoint's.
func (c *checker) run(ctx context.Context, size int64) error {
	start := int64(c.rng.End())
	for from := start + 1; from <= size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		to := min(from+loadPage, size+1)
		recs, err := c.st.LedgerRange(ctx, from, to)
		if err != nil {
			return fmt.Errorf("oip: read ledger %d..%d: %w", from, to-1, err)
		}
		if len(recs) == 0 {
			return recordFault(from, "is missing (the ledger ends at %d)", from-1)
		}
		for _, sr := range recs {
			if err := c.add(ctx, sr); err != nil {
				return err
			}
		}
		from = int64(c.rng.End()) + 1
		if c.progress != nil {
			c.progress(from-1-start, size-start)
		}
	}
	if c.last.TreeSize != size {
		return checkpointFault("no stored checkpoint covers records %d..%d (the checkpoint of tree size %d was removed)", c.last.TreeSize+1, size, size)
	}
	return nil
}

func (c *checker) loadCheckpoints(ctx context.Context) error {
	if len(c.cks) > 0 {
		return nil
	}
	cks, err := c.st.LedgerCheckpoints(ctx, c.last.TreeSize, 256)
	if err != nil {
		return fmt.Errorf("oip: read checkpoints: %w", err)
	}
	c.cks = cks
	return nil
}

func (c *checker) add(ctx context.Context, sr store.LedgerRecord) error {
	seq := int64(c.rng.End()) + 1
	leaf, err := checkRecord(sr, seq)
	if err != nil {
		return err
	}
	if sr.Type == TypeKeyRotation {
		// What names a new key is the record's bytes, not its columns.
		rec, err := decodeRecord(sr)
		if err != nil {
			return err
		}
		var b keyRotation
		if json.Unmarshal(rec.Body, &b) == nil && b.OldKey != "" && b.NewKey != "" {
			c.rotated[b.OldKey] = b.NewKey
		}
	}
	if err := c.rng.Append(leaf[:], nil); err != nil {
		return fmt.Errorf("oip: merkle range: %w", err)
	}
	if c.full != nil {
		c.full.append(leaf)
	}
	if c.keep != nil && len(c.keep) < maxKnown {
		c.keep[seq] = leaf
	}
	if err := c.loadCheckpoints(ctx); err != nil {
		return err
	}
	if len(c.cks) == 0 || c.cks[0].TreeSize != seq {
		return nil
	}
	ck := c.cks[0]
	c.cks = c.cks[1:]
	return c.checkpoint(ck)
}

// checkpoint checks the stored checkpoint of the tree just built.
func (c *checker) checkpoint(ck store.LedgerCheckpoint) error {
	if ck.PrevSize != c.last.TreeSize {
		return checkpointFault("the checkpoint of tree size %d follows the one of %d, but the previous stored is of %d: the checkpoint of tree size %d was removed", ck.TreeSize, ck.PrevSize, c.last.TreeSize, ck.PrevSize)
	}
	root, err := c.rng.GetRootHash(nil)
	if err != nil {
		return fmt.Errorf("oip: merkle root: %w", err)
	}
	if hex.EncodeToString(root) != ck.RootHash {
		return &TamperError{Seq: ck.PrevSize + 1, What: fmt.Sprintf("the records %d..%d do not make the root signed in the checkpoint of tree size %d (a record there was rewritten with a new hash, or records were reordered)", ck.PrevSize+1, ck.TreeSize, ck.TreeSize), Hint: tamperHint}
	}
	opened, err := verify.OpenCheckpoint([]byte(ck.Note), ck.PublicKey)
	if err != nil {
		return checkpointFault("the checkpoint of tree size %d does not verify: %v", ck.TreeSize, err)
	}
	if opened.TreeSize != ck.TreeSize || opened.RootHash != ck.RootHash {
		return checkpointFault("the signed note of the checkpoint of tree size %d says tree size %d, root %s", ck.TreeSize, opened.TreeSize, opened.RootHash)
	}
	if c.last.PublicKey != "" && ck.PublicKey != c.last.PublicKey && c.rotated[c.last.PublicKey] != ck.PublicKey {
		return checkpointFault("the checkpoint of tree size %d is signed by %s, the one before by %s, with no key-rotation record between them", ck.TreeSize, keyID(ck.PublicKey), keyID(c.last.PublicKey))
	}
	clear(c.rotated)
	c.last = ck
	c.count++
	return nil
}

// keyRotation is the body of a key-rotation record.
type keyRotation struct {
	Type   string `json:"type"`
	OldKey string `json:"old_key"` // the verifier key of the checkpoints before
	NewKey string `json:"new_key"` // the verifier key of the checkpoints after
}

// keyID is the name+hash part of a verifier key, for messages.
func keyID(vkey string) string {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) < 2 {
		return vkey
	}
	return parts[0] + "+" + parts[1]
}

// CheckReport is the outcome of a full check of a ledger (asmp ledger
// check).
type CheckReport struct {
	OK          bool   `json:"ok"`
	Records     int64  `json:"records"`
	Checkpoints int64  `json:"checkpoints"`
	RootHash    string `json:"root_hash,omitempty"`
	// FirstBadSeq is the first record found bad, 0 when none is.
	FirstBadSeq int64  `json:"first_bad_seq,omitempty"`
	Error       string `json:"error,omitempty"`
	Hint        string `json:"hint,omitempty"`
	// Head is the head file's tree size, when one was checked.
	Head int64 `json:"head_tree_size,omitempty"`
}

// CheckOptions configure Check.
type CheckOptions struct {
	// HeadPath is the head file to check the ledger against ("": none).
	HeadPath string
	// Progress, when set, is called after every page of records.
	Progress func(done, total int64)
}

// Check runs the full check of the ledger in st, offline: every record
// against its canonical bytes and leaf, every stored checkpoint against
// the tree, the chain of checkpoints and of signing keys, and the head
// file when given. The error is a *TamperError for a ledger that does not
// match; the report says the same for --json.
func Check(ctx context.Context, st store.LedgerStore, opts *CheckOptions) (CheckReport, error) {
	var o CheckOptions
	if opts != nil {
		o = *opts
	}
	var rep CheckReport
	fail := func(err error) (CheckReport, error) {
		rep.Error = err.Error()
		var te *TamperError
		if errors.As(err, &te) {
			rep.FirstBadSeq, rep.Error, rep.Hint = te.Seq, "ledger integrity: "+te.What, te.Hint
		}
		return rep, err
	}
	_, n, err := newestCheckpoint(ctx, st)
	rep.Records = n
	if err != nil {
		return fail(err)
	}
	if o.HeadPath != "" {
		head, ok, err := readHead(o.HeadPath)
		if err != nil {
			return fail(err)
		}
		if ok {
			rep.Head = head.TreeSize
			if err := checkHead(ctx, st, head, n); err != nil {
				return fail(err)
			}
		}
	}
	c, err := newChecker(st, store.LedgerCheckpoint{})
	if err != nil {
		return fail(err)
	}
	c.progress = o.Progress
	if err := c.run(ctx, n); err != nil {
		rep.Checkpoints = c.count
		return fail(err)
	}
	rep.Checkpoints = c.count
	if err := checkHeads(ctx, st); err != nil {
		return fail(err)
	}
	rep.RootHash = c.last.RootHash
	rep.OK = true
	return rep, nil
}

// newestCheckpoint returns the newest stored checkpoint (nil when none)
// and the ledger's size, which must be that checkpoint's: records and
// their checkpoint are committed together. The checkpoint is read first,
// so that an append committed in between (by another replica) shows as a
// larger size, read again, never as a false truncation.
func newestCheckpoint(ctx context.Context, st store.LedgerStore) (*store.LedgerCheckpoint, int64, error) {
	for attempt := 0; ; attempt++ {
		var latest *store.LedgerCheckpoint
		ck, err := st.LatestLedgerCheckpoint(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, 0, fmt.Errorf("oip: read checkpoint: %w", err)
		default:
			latest = &ck
		}
		n, err := st.LedgerSize(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("oip: ledger size: %w", err)
		}
		size := int64(0)
		if latest != nil {
			size = latest.TreeSize
		}
		switch {
		case size == n:
			return latest, n, nil
		case size > n:
			return latest, n, &TamperError{Seq: n + 1, What: fmt.Sprintf("the newest stored checkpoint is of tree size %d but the ledger holds %d records: records %d..%d were removed", size, n, n+1, size), Hint: tamperHint}
		case attempt < 3:
			continue // an append committed between the two reads
		case latest == nil:
			return nil, n, checkpointFault("the ledger holds %d records but no stored checkpoint (the checkpoints were removed)", n)
		default:
			return latest, n, checkpointFault("no stored checkpoint covers records %d..%d (the checkpoint of tree size %d was removed)", size+1, n, n)
		}
	}
}

// checkHeads checks that the store's index of each key's latest record
// agrees with the ledger: the records are checked
// against the tree, the index is not, and an edited entry could hide a
// row from the directory.
func checkHeads(ctx context.Context, st store.LedgerStore) error {
	key, err := st.CheckLedgerHeads(ctx)
	if err != nil {
		return fmt.Errorf("oip: %w", err)
	}
	if key != "" {
		return &TamperError{What: fmt.Sprintf("the index of each key's latest record (ledger_heads) disagrees with the ledger for the key %q, or the key has a record with a seq below 1: the database was edited (a row could be hidden from the directory, or one inserted outside the tree)", key), Hint: tamperHint}
	}
	return nil
}
