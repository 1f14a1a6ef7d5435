package oip

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip/command"
	"github.com/asmp-dev/asmp/oip/row"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// KeyPattern is what a dispatch key must match.
const KeyPattern = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`

var keyRE = regexp.MustCompile(KeyPattern)

// DefaultMaxPage is the largest directory page when Options.MaxPage is 0.
const DefaultMaxPage = 100

// loadPage is how many records one catch-up read asks the store for.
const loadPage = 1000

// maxPending bounds the leaves kept while waiting for an earlier seq; past
// it they are dropped and the next catch-up reads them from the store.
const maxPending = 1 << 16

// Options configures a Service. The zero value (or nil) is usable: an
// ephemeral key, the default origin, the wall clock, no logging.
type Options struct {
	// KeyPath is the file holding the Ed25519 checkpoint signing key (a
	// signed-note signer key). It is created with mode 0600 on first start
	// when missing and reused afterwards; the server keeps it beside the
	// database (for example asmp.db.key). "" means an ephemeral in-memory
	// key, for tests: checkpoints then do not verify across restarts.
	KeyPath string
	// Origin is the checkpoint's first line and the name of a newly
	// created key. "" means DefaultOrigin. It must be a valid signed-note
	// key name: no spaces and no '+'.
	Origin string
	// Now is the clock for timestamps and inv_IDs; nil means time.Now.
	Now func() time.Time
	// Logger receives operational logs (never keys or secrets); nil
	// discards them.
	Logger *slog.Logger
	// MaxPage is the largest directory page (and the default page size);
	// 0 means DefaultMaxPage.
	MaxPage int
	// MaxBody is the request body limit of the HTTP handler in bytes; 0
	// means httpx.DefaultMaxBody (1 MiB). Larger bodies get 413.
	MaxBody int64
	// MaxDepth is the JSON nesting limit of request bodies; 0 means
	// protocol.DefaultMaxDepth.
	MaxDepth int
	// Executor runs invocations dispatched with "execute": true. nil means
	// execution is disabled: such invocations are recorded as refused.
	Executor Executor
	// RotateKey allows starting without the key that signed the ledger
	// (the key file is missing or holds another key): a new key is
	// created and a key-rotation record naming the old and the new key is
	// appended. Without it such a start is refused.
	RotateKey bool
	// ResetHead accepts the database's ledger as it is when the head file
	// (HeadPath(KeyPath)) is missing or ahead of it, and rewrites the head
	// file from the newest stored checkpoint (after restoring a backup on
	// purpose). Without it such a start is refused.
	ResetHead bool
	// SharedStore says that other servers append to the same store
	// (replicas on Postgres): a replica's first start, with no head file
	// of its own yet, creates it from the database's newest checkpoint
	// instead of refusing to start on a non-empty ledger.
	SharedStore bool
	// OnTamper is called (once) when a record read or the background pass
	// finds the ledger does not match what was signed; the server stops.
	// nil only logs.
	OnTamper func(error)
}

// Service is the OIP dispatch ledger over a store.LedgerStore: dispatch,
// replay, the directory, command construction, and the Merkle tree with
// signed checkpoints and proofs. It is safe for concurrent use.
type Service struct {
	st       store.LedgerStore
	origin   string
	key      keyPair
	now      func() time.Time
	log      *slog.Logger
	maxPage  int
	maxBody  int64
	maxDepth int
	exec     Executor

	idMu    sync.Mutex
	entropy *ulid.MonotonicEntropy

	mu      sync.RWMutex // guards tree, treeOK and pending
	tree    tree
	treeOK  bool // tree holds every leaf up to its size, checked
	pending map[int64][hashSize]byte
	loadMu  sync.Mutex // serialises catch-up reads from the store

	// The integrity checks (SPEC section 16).
	keyPath  string
	headPath string // "" with an ephemeral key
	headMu   sync.Mutex
	headSize int64 // tree size of the head file last written or read
	// signed is the newest checkpoint this service signed, or checked at
	// start (the head file's, in memory): an append is refused unless the
	// store's newest checkpoint extends it (checkExtends).
	signedMu sync.Mutex
	signed   Checkpoint
	base     int64 // the ledger's size at start: the background pass checks 1..base
	onTamper func(error)
	tamperMu sync.Once
	vOnce    sync.Once
	vErr     error
	ready    chan struct{} // closed when the full pass succeeded
	failed   chan struct{} // closed when it failed
	// verified is the tree size of the last full check; once verifyEvery
	// records are appended after it, they are checked in the background
	// (advancing is set meanwhile), so start-up never has more to check.
	verified    atomic.Int64
	verifyEvery int64
	advancing   atomic.Bool

	ckMu sync.Mutex
	ck   Checkpoint // the last checkpoint signed, reused while the size holds

	bMu      sync.Mutex
	builders map[string]compiled // by the row's inv_ID

	// building holds the leaf of every record this service has built for
	// an append and not yet added to its tree (by inv_ID): what an append
	// may sign, and what a read may see beyond the tree.
	building sync.Map
	shared   bool // Options.SharedStore: other servers append too

	// known holds, until the tree is built, the leaves checked against
	// the signed checkpoints (at start, or proven on a read; see
	// signed.go), guarded by mu; provedCks the checkpoints whose
	// signatures were checked for those proofs.
	known     map[int64][hashSize]byte
	provedMu  sync.Mutex
	provedCks map[int64]provedCk
}

// New returns a Service over st, loading the ledger's Merkle tree from it
// (in pages) and loading or creating the signing key.
func New(st store.LedgerStore, opts *Options) (*Service, error) {
	if st == nil {
		return nil, errors.New("oip: no store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Service{
		st:       st,
		origin:   o.Origin,
		now:      o.Now,
		log:      o.Logger,
		maxPage:  o.MaxPage,
		maxBody:  o.MaxBody,
		maxDepth: o.MaxDepth,
		exec:     o.Executor,
		entropy:  ulid.Monotonic(rand.Reader, 0),
		pending:  map[int64][hashSize]byte{},
		builders: map[string]compiled{},
		keyPath:  o.KeyPath,
		onTamper: o.OnTamper,
		shared:   o.SharedStore,
		ready:    make(chan struct{}),
		failed:   make(chan struct{}),

		verifyEvery: defaultVerifyEvery,
	}
	if o.KeyPath != "" {
		s.headPath = HeadPath(o.KeyPath)
	}
	if s.origin == "" {
		s.origin = DefaultOrigin
	}
	if !validName(s.origin) {
		return nil, fmt.Errorf("oip: origin %q must be non-empty UTF-8 without spaces or '+'", s.origin)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxPage <= 0 {
		s.maxPage = DefaultMaxPage
	}
	ctx := context.Background()
	n, err := st.LedgerSize(ctx)
	if err != nil {
		return nil, fmt.Errorf("oip: ledger size: %w", err)
	}
	if o.KeyPath != "" && n > 0 && !o.RotateKey {
		if _, err := os.Stat(o.KeyPath); errors.Is(err, fs.ErrNotExist) {
			return nil, &TamperError{What: fmt.Sprintf("the signing key file %s is missing but the ledger holds %d records signed with it", o.KeyPath, n),
				Hint: "Restore the key file from the backup kept with the database's. If it is lost for good, start once with --ledger-rotate-key: a new key is created and a key-rotation record naming the old and the new key is appended, so verifiers see the change"}
		}
	}
	if s.key, err = loadKey(o.KeyPath, s.origin, s.log); err != nil {
		return nil, err
	}
	if err := s.open(ctx, n, o); err != nil {
		return nil, err
	}
	return s, nil
}

func validName(s string) bool {
	return s != "" && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsSpace) && !strings.Contains(s, "+")
}

// VerifierKey returns the signed-note verifier key of the checkpoints
// ("name+hash+base64 Ed25519 public key"). It is public.
func (s *Service) VerifierKey() string { return s.key.vkey }

// Origin returns the checkpoint origin line.
func (s *Service) Origin() string { return s.origin }

// newID returns a fresh "inv_" + ULID for time t.
func (s *Service) newID(t time.Time) (string, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	id, err := ulid.New(ulid.Timestamp(t), s.entropy)
	if err != nil {
		// The monotonic entropy overflowed within one millisecond: start
		// afresh with new randomness.
		s.entropy = ulid.Monotonic(rand.Reader, 0)
		if id, err = ulid.New(ulid.Timestamp(t), s.entropy); err != nil {
			return "", fmt.Errorf("oip: new inv_ID: %w", err)
		}
	}
	return "inv_" + id.String(), nil
}

// CheckKey returns an EInvalid error unless key matches KeyPattern.
func CheckKey(key string) error {
	if !keyRE.MatchString(key) {
		return invalidf("key", "The key %q is not valid: it must match %s (1 to 128 characters: letters, digits, '.', '_', ':', '-', starting with a letter or digit).", protocol.Truncate(key, 140), KeyPattern)
	}
	return nil
}

// kind groups record types that may share a key: a directory row key only
// ever holds directory rows, an invocation key only invocations and their
// results.
func kind(typ string) string {
	if typ == TypeInvocationResult {
		return TypeInvocation
	}
	return typ
}

// appendRecord appends one record under key, built from the template rec
// (whose InvID, Key, Type, Body, Timestamp, Source, ResultOf and ReplayOf
// are set). It fills in seq, supersedes and entry_hash inside the store's
// transaction and adds the record's leaf to the Merkle tree. scopes, when
// not nil, are the dispatcher's (dispatcherScopes), stored with the record
// in the append's transaction.
func (s *Service) appendRecord(ctx context.Context, rec Record, scopes []string) (Record, error) {
	var (
		built Record
		leaf  [hashSize]byte
		canon []byte
	)
	defer func() {
		if built.InvID != "" {
			s.building.Delete(built.InvID)
		}
	}()
	stored, ck, err := s.st.AppendLedgerSigned(ctx, rec.Key, func(p store.LedgerPrev) (store.LedgerRecord, error) {
		if mine := s.signedSize(); p.Seq <= mine {
			// The store's newest record is older than the newest
			// checkpoint this server signed: records were removed.
			return store.LedgerRecord{}, &TamperError{Seq: p.Seq, What: fmt.Sprintf("the database's ledger ends at seq %d, but this server signed a checkpoint of tree size %d: records were removed while it ran; the append was refused so that no seq is issued twice", p.Seq-1, mine), Hint: tamperHint}
		}
		r := rec
		r.Seq = p.Seq
		r.Supersedes = ""
		if p.Latest != nil {
			if kind(p.Latest.Type) != kind(r.Type) {
				return store.LedgerRecord{}, keyKindError(r.Key, p.Latest.Type, r.Type)
			}
			r.Supersedes = p.Latest.InvID
		}
		var err error
		if r.EntryHash, leaf, canon, err = hashes(r); err != nil {
			return store.LedgerRecord{}, err
		}
		// The body column holds the body as the canonical bytes do, so
		// that checking it against them is a comparison of bytes.
		if r.Body = canonicalBody(canon); r.Body == nil {
			return store.LedgerRecord{}, fmt.Errorf("oip: the canonical bytes of %s hold no body", r.InvID)
		}
		built = r
		s.building.Store(r.InvID, leaf)
		ts, err := time.Parse(TimeFormat, r.Timestamp)
		if err != nil {
			return store.LedgerRecord{}, fmt.Errorf("oip: record timestamp: %w", err)
		}
		return store.LedgerRecord{
			InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body,
			Timestamp: ts, Source: r.Source, EntryHash: r.EntryHash,
			Supersedes: r.Supersedes, ResultOf: r.ResultOf, ReplayOf: r.ReplayOf,
			Canonical: canon, DispatcherScopes: scopes,
		}, nil
	}, s.sign)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return Record{}, pe
		}
		var te *TamperError
		if errors.As(err, &te) {
			s.tamper(te)
			return Record{}, &protocol.Error{Code: protocol.EUnavailable, Hint: "The ledger in the database no longer extends the checkpoint this server signed last (records or checkpoints were removed or rewritten); nothing was appended and the server is stopping. See its log.", Err: te}
		}
		return Record{}, fmt.Errorf("oip: append to ledger: %w", err)
	}
	if stored.Seq != built.Seq || stored.InvID != built.InvID {
		// The store returned another record than the last one built.
		built = fromStore(stored)
		if _, leaf, _, err = hashes(built); err != nil {
			return Record{}, err
		}
	}
	s.addLeaf(built.Seq, leaf)
	s.advanceHead(ck)
	s.maybeAdvanceVerified(ck.TreeSize)
	return built, nil
}

func keyKindError(key, have, want string) error {
	if kind(have) == TypeDirectoryRow {
		return invalidf("key", "The key %q names a directory row; an invocation needs a key of its own (for example %q) and names the row in object_key.", key, key+"-run-1")
	}
	return invalidf("key", "The key %q already holds %s records; a %s needs a key of its own.", key, kind(have), want)
}

// addLeaf adds the leaf of the record with seq to the tree, in seq order:
// a leaf whose predecessors are not in yet waits for them.
func (s *Service) addLeaf(seq int64, leaf [hashSize]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := int64(s.tree.size())
	switch {
	case !s.treeOK:
		if len(s.pending) < maxPending {
			s.pending[seq] = leaf
		}
	case seq <= size:
		return // a catch-up read it already
	case seq == size+1:
		s.tree.append(leaf)
		s.drainLocked()
	case len(s.pending) < maxPending:
		s.pending[seq] = leaf
	}
}

func (s *Service) drainLocked() {
	for len(s.pending) > 0 {
		next := int64(s.tree.size()) + 1
		leaf, ok := s.pending[next]
		if !ok {
			for q := range s.pending {
				if q < next {
					delete(s.pending, q)
				}
			}
			return
		}
		delete(s.pending, next)
		s.tree.append(leaf)
	}
}

// catchUp appends to the tree every record the store has beyond it: those
// written by other processes, or whose appends have not returned yet. Each
// is checked against its canonical bytes. Before the full pass has built
// the tree it does nothing.
func (s *Service) catchUp(ctx context.Context) error {
	s.mu.RLock()
	ok := s.treeOK
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	n, err := s.st.LedgerSize(ctx)
	if err != nil {
		return fmt.Errorf("oip: ledger size: %w", err)
	}
	if n <= s.size() {
		return nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	for from := s.size() + 1; from <= n; {
		to := min(from+loadPage, n+1)
		recs, err := s.st.LedgerRange(ctx, from, to)
		if err != nil {
			return fmt.Errorf("oip: read ledger %d..%d: %w", from, to-1, err)
		}
		if len(recs) == 0 {
			return nil // the store reported n but has not shown them yet
		}
		leaves := make([][hashSize]byte, len(recs))
		for i, sr := range recs {
			if leaves[i], err = checkRecord(sr, sr.Seq); err != nil {
				s.tamper(err)
				return err
			}
		}
		s.mu.Lock()
		for i, sr := range recs {
			size := int64(s.tree.size())
			if sr.Seq <= size {
				continue
			}
			if sr.Seq != size+1 {
				s.mu.Unlock()
				err := recordFault(size+1, "is missing (seq %d follows %d)", sr.Seq, size)
				s.tamper(err)
				return err
			}
			s.tree.append(leaves[i])
		}
		s.drainLocked()
		s.mu.Unlock()
		from = s.size() + 1
	}
	return nil
}

func (s *Service) size() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(s.tree.size())
}

// Size returns the number of records in the ledger, after catching up
// with the store (and waiting for the full check of the ledger).
func (s *Service) Size(ctx context.Context) (int64, error) {
	if err := s.waitTree(ctx); err != nil {
		return 0, err
	}
	if err := s.catchUp(ctx); err != nil {
		return 0, err
	}
	return s.size(), nil
}

// Dispatch appends body under key for the principal in ctx (its name is
// the record's source) and returns the receipt. body must be a JSON object
// whose "type" is directory_row or invocation. Errors are *protocol.Error
// values (EInvalid, ENotFound) with a hint; nothing is appended on error.
// Dispatch does not check the dispatch scope (the HTTP handler does);
// executing an invocation needs the exec scope of the principal in ctx.
func (s *Service) Dispatch(ctx context.Context, key string, body json.RawMessage) (Receipt, error) {
	if err := CheckKey(key); err != nil {
		return Receipt{}, err
	}
	b, err := checkBody(body)
	if err != nil {
		return Receipt{}, err
	}
	if _, err := protocol.DecodeValue(b, s.maxDepth); err != nil {
		return Receipt{}, err
	}
	var head struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Receipt{}, invalidf("body", "The body is not valid JSON: %v.", err)
	}
	var typ string
	if len(head.Type) == 0 || json.Unmarshal(head.Type, &typ) != nil || typ == "" {
		return Receipt{}, invalidf("body.type", "body.type is required: one of %s, %s.", TypeDirectoryRow, TypeInvocation).
			With("known_types", []string{TypeDirectoryRow, TypeInvocation})
	}
	switch typ {
	case TypeDirectoryRow:
		return s.dispatchRow(ctx, key, b)
	case TypeInvocation:
		return s.dispatchInvocation(ctx, key, b)
	}
	return Receipt{}, invalidf("body.type", "Unknown body.type %q; the known types are %s and %s.", protocol.Truncate(typ, 64), TypeDirectoryRow, TypeInvocation).
		With("known_types", []string{TypeDirectoryRow, TypeInvocation})
}

// DispatchJSON decodes a dispatch request {"key": K, "body": {...}} and
// dispatches it (see Dispatch).
func (s *Service) DispatchJSON(ctx context.Context, request []byte) (Receipt, error) {
	key, body, err := parseDispatch(request, s.maxDepth)
	if err != nil {
		return Receipt{}, err
	}
	return s.Dispatch(ctx, key, body)
}

// parseDispatch decodes the request envelope.
func parseDispatch(request []byte, maxDepth int) (string, json.RawMessage, error) {
	if _, err := protocol.DecodeObject(request, maxDepth); err != nil {
		return "", nil, err
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(request, &env); err != nil || env == nil {
		return "", nil, protocol.Errorf(protocol.EInvalid, `The request must be a JSON object {"key": K, "body": {"type": T, ...}}.`)
	}
	for k := range env {
		if k != "key" && k != "body" {
			return "", nil, invalidf(k, `Unknown field %q in the dispatch request; send {"key": K, "body": {"type": T, ...}}.`, protocol.Truncate(k, 64))
		}
	}
	var key string
	if raw, ok := env["key"]; !ok || json.Unmarshal(raw, &key) != nil {
		return "", nil, invalidf("key", `key is required and must be a string matching %s.`, KeyPattern)
	}
	body, ok := env["body"]
	if !ok || len(body) == 0 || body[0] != '{' {
		return "", nil, invalidf("body", `body is required and must be a JSON object with a "type" (%s or %s).`, TypeDirectoryRow, TypeInvocation)
	}
	return key, body, nil
}

func (s *Service) template(ctx context.Context, key, typ string, body []byte) (Record, error) {
	now := s.now()
	id, err := s.newID(now)
	if err != nil {
		return Record{}, err
	}
	source := auth.FromContext(ctx).Name
	if source == "" {
		source = auth.Anonymous
	}
	return Record{
		InvID: id, Key: key, Type: typ, Body: json.RawMessage(body),
		Timestamp: formatTime(now), Source: source,
	}, nil
}

func (s *Service) dispatchRow(ctx context.Context, key string, body []byte) (Receipt, error) {
	if _, err := row.Decode(body); err != nil {
		return Receipt{}, err
	}
	t, err := s.template(ctx, key, TypeDirectoryRow, body)
	if err != nil {
		return Receipt{}, err
	}
	scopes, err := s.dispatcherScopes(ctx, t.InvID)
	if err != nil {
		return Receipt{}, err
	}
	rec, err := s.appendRecord(ctx, t, scopes)
	if err != nil {
		return Receipt{}, err
	}
	return receiptOf(rec), nil
}

// Record returns the record with that inv_ID, with replayed_by.
func (s *Service) Record(ctx context.Context, invID string) (Record, error) {
	sr, err := s.st.LedgerRecord(ctx, invID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if err := s.notShrunk(ctx); err != nil {
				return Record{}, err // a receipt handed out is answered or the server stops
			}
			return Record{}, protocol.Errorf(protocol.ENotFound, "No ledger record has the inv_ID %q; check the receipt's inv_ID.", protocol.Truncate(invID, 64))
		}
		return Record{}, fmt.Errorf("oip: read record: %w", err)
	}
	r, err := s.checked(ctx, sr)
	if err != nil {
		return Record{}, err
	}
	return s.withReplays(ctx, r)
}

func (s *Service) withReplays(ctx context.Context, r Record) (Record, error) {
	by, err := s.st.ReplayedBy(ctx, r.InvID, MaxReplayedBy+1)
	if err != nil {
		return Record{}, fmt.Errorf("oip: replayed by: %w", err)
	}
	if by == nil {
		by = []string{}
	}
	if len(by) > MaxReplayedBy {
		by, r.ReplayedByMore = by[:MaxReplayedBy], true
	}
	r.ReplayedBy = by
	return r, nil
}

// History returns the records of key after seq after, oldest first, each
// with replayed_by: at most limit (0: the page bound only), and fewer once
// their bodies reach store.MaxPageBytes. more reports whether records
// follow the page (read on after its last seq). ENotFound for a key with
// no record.
func (s *Service) History(ctx context.Context, key string, after int64, limit int) (recs []Record, more bool, err error) {
	ask := limit
	if ask > 0 {
		ask++ // one more tells whether the page is the last
	}
	srs, err := s.st.LedgerHistory(ctx, key, after, ask)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, protocol.Errorf(protocol.ENotFound, "Nothing was dispatched under the key %q; dispatch it first or check the key.", protocol.Truncate(key, 140))
	}
	if err != nil {
		return nil, false, fmt.Errorf("oip: read history: %w", err)
	}
	if limit > 0 && len(srs) > limit {
		srs, more = srs[:limit], true
	}
	size := 0
	for i, sr := range srs {
		if size += len(sr.Body); store.PageFull(size) && i < len(srs)-1 {
			srs, more = srs[:i+1], true
			break
		}
	}
	if store.PageFull(size) {
		more = true // the store may have ended the page early
	}
	out := make([]Record, len(srs))
	for i, sr := range srs {
		r, err := s.checked(ctx, sr)
		if err != nil {
			return nil, false, err
		}
		if out[i], err = s.withReplays(ctx, r); err != nil {
			return nil, false, err
		}
	}
	return out, more, nil
}

// Latest returns the latest record of key, with replayed_by: one lookup,
// whatever the length of the key's history.
func (s *Service) Latest(ctx context.Context, key string) (Record, error) {
	if err := s.notShrunk(ctx); err != nil {
		return Record{}, err
	}
	sr, err := s.st.LedgerHead(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, protocol.Errorf(protocol.ENotFound, "Nothing was dispatched under the key %q; dispatch it first or check the key.", protocol.Truncate(key, 140))
	}
	if err != nil {
		return Record{}, fmt.Errorf("oip: read the key's latest record: %w", err)
	}
	r, err := s.checked(ctx, sr)
	if err != nil {
		return Record{}, err
	}
	return s.withReplays(ctx, r)
}

// DirectoryRow is one row of the directory listing, rendered as the seed's
// Directory Row object: key, type "cli", the row's fields, and the inv_ID
// of the version shown.
type DirectoryRow struct {
	Key  string `json:"key"`
	Type string `json:"type"` // row.Category ("cli")
	row.Row
	InvID string `json:"inv_ID"`
}

// DirectoryPage is one page of the directory.
type DirectoryPage struct {
	Rows []DirectoryRow `json:"rows"`
	// Next is the cursor for the following page (pass it as after); ""
	// on the last page.
	Next string `json:"next,omitempty"`
	// NextCursor is the same position as an opaque cursor (pass it as
	// cursor); null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Directory returns the current directory rows (the latest version of
// every key whose latest record is a directory row) with keys after the
// cursor, in key order, at most limit (0 or more than MaxPage: MaxPage).
func (s *Service) Directory(ctx context.Context, after string, limit int) (DirectoryPage, error) {
	if limit <= 0 || limit > s.maxPage {
		limit = s.maxPage
	}
	if err := s.notShrunk(ctx); err != nil {
		return DirectoryPage{}, err
	}
	recs, err := s.st.LedgerLatest(ctx, TypeDirectoryRow, after, limit+1)
	if err != nil {
		return DirectoryPage{}, fmt.Errorf("oip: read directory: %w", err)
	}
	page := DirectoryPage{Rows: make([]DirectoryRow, 0, min(len(recs), limit))}
	if len(recs) > limit {
		recs = recs[:limit]
		page.Next = recs[limit-1].Key
	}
	size := 0
	for i, sr := range recs {
		// A page of large rows ends early (the store ends its read at the
		// same record), with a cursor.
		if size += len(sr.Body); store.PageFull(size) {
			recs = recs[:i+1]
			page.Next = sr.Key
			break
		}
	}
	for _, sr := range recs {
		sr, err := s.checkedStore(ctx, sr)
		if err != nil {
			return DirectoryPage{}, err
		}
		page.Rows = append(page.Rows, DirectoryRow{Key: sr.Key, Type: row.Category, Row: *s.decodeRow(sr), InvID: sr.InvID})
	}
	return page, nil
}

// decodeRow decodes a stored directory row. A row that no longer passes
// validation (the rules became stricter) is shown as stored.
func (s *Service) decodeRow(sr store.LedgerRecord) *row.Row {
	r, err := row.Decode(sr.Body)
	if err == nil {
		return r
	}
	s.log.Warn("stored directory row no longer validates", "key", sr.Key, "inv_ID", sr.InvID, "err", err)
	var lax row.Row
	_ = json.Unmarshal(sr.Body, &lax)
	return &lax
}

// rowRecord returns the latest record of key when it is a directory row.
func (s *Service) rowRecord(ctx context.Context, key string) (store.LedgerRecord, error) {
	head, err := s.st.LedgerHead(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.LedgerRecord{}, fmt.Errorf("oip: read row: %w", err)
	}
	if err != nil || head.Type != TypeDirectoryRow {
		return store.LedgerRecord{}, protocol.Errorf(protocol.ENotFound, "No directory row has the key %q; dispatch one (type %s) first, or list them at /api/directory.", protocol.Truncate(key, 140), TypeDirectoryRow).
			With("field", "object_key")
	}
	return s.checkedStore(ctx, head)
}

// compiled is a decoded row version with its command builder.
type compiled struct {
	b *command.Builder
	r *row.Row
}

// builder returns the compiled command builder of a stored row version.
func (s *Service) builder(sr store.LedgerRecord) (*command.Builder, *row.Row, error) {
	s.bMu.Lock()
	c, ok := s.builders[sr.InvID]
	s.bMu.Unlock()
	if ok {
		return c.b, c.r, nil
	}
	r, err := row.Decode(sr.Body)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.EInvalid, "The directory row %q (%s) no longer validates: %s", sr.Key, sr.InvID, protocol.ErrorHint(err))
	}
	b, err := command.Compile(r)
	if err != nil {
		return nil, nil, err
	}
	s.bMu.Lock()
	if len(s.builders) >= 256 {
		clear(s.builders)
	}
	s.builders[sr.InvID] = compiled{b, r}
	s.bMu.Unlock()
	return b, r, nil
}

// Command builds the command of the directory row key (its latest
// version) for input, without writing anything. ENotFound for an unknown
// row; EInvalid, with a hint naming the input key, for bad input.
func (s *Service) Command(ctx context.Context, key string, input map[string]any) (*command.Command, error) {
	sr, err := s.rowRecord(ctx, key)
	if err != nil {
		return nil, err
	}
	b, _, err := s.builder(sr)
	if err != nil {
		return nil, err
	}
	if input == nil {
		input = map[string]any{}
	}
	return b.Build(input)
}

// Checkpoint returns the newest checkpoint stored in the ledger (signed
// in the transaction of the records it covers); for an empty ledger, the
// signed checkpoint of the empty tree.
func (s *Service) Checkpoint(ctx context.Context) (Checkpoint, error) {
	ck, err := s.st.LatestLedgerCheckpoint(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return s.signEmpty()
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("oip: read checkpoint: %w", err)
	}
	return wireCheckpoint(s.origin, ck), nil
}

func (s *Service) signEmpty() (Checkpoint, error) {
	root := sha256.Sum256(nil)
	n, err := s.key.sign(s.origin, 0, root[:])
	if err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Origin: s.origin, TreeSize: 0, RootHash: hex.EncodeToString(root[:]), Note: n, PublicKey: s.key.vkey}, nil
}

// checkpointAt returns the checkpoint of the tree's first size leaves:
// the stored one when an append signed that size (checked against the
// verified tree), else one signed now from the verified tree.
func (s *Service) checkpointAt(ctx context.Context, size int64) (Checkpoint, error) {
	s.ckMu.Lock()
	if s.ck.Note != "" && s.ck.TreeSize == size {
		ck := s.ck
		s.ckMu.Unlock()
		return ck, nil
	}
	s.ckMu.Unlock()
	root, err := s.root(size)
	if err != nil {
		return Checkpoint{}, err
	}
	var ck Checkpoint
	stored, err := s.st.LedgerCheckpoints(ctx, size-1, 1)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("oip: read checkpoint: %w", err)
	}
	if len(stored) == 1 && stored[0].TreeSize == size {
		if stored[0].RootHash != hex.EncodeToString(root) {
			err := checkpointFault("the stored checkpoint of tree size %d has root %s, the verified records make %x", size, stored[0].RootHash, root)
			s.tamper(err)
			return Checkpoint{}, err
		}
		ck = wireCheckpoint(s.origin, stored[0])
	} else {
		n, err := s.key.sign(s.origin, uint64(size), root)
		if err != nil {
			return Checkpoint{}, err
		}
		ck = Checkpoint{Origin: s.origin, TreeSize: size, RootHash: hex.EncodeToString(root), Note: n, PublicKey: s.key.vkey}
	}
	s.ckMu.Lock()
	if size >= s.ck.TreeSize {
		s.ck = ck
	}
	s.ckMu.Unlock()
	return ck, nil
}

func (s *Service) root(size int64) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tree.root(uint64(size))
}

// Proof returns the inclusion proof of the record invID in the tree of
// treeSize records (0: the current size). EInvalid when treeSize is
// smaller than the record's seq or beyond the ledger; ENotFound for an
// unknown inv_ID.
func (s *Service) Proof(ctx context.Context, invID string, treeSize int64) (Proof, error) {
	sr, err := s.st.LedgerRecord(ctx, invID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Proof{}, protocol.Errorf(protocol.ENotFound, "No ledger record has the inv_ID %q; check the receipt's inv_ID.", protocol.Truncate(invID, 64))
		}
		return Proof{}, fmt.Errorf("oip: read record: %w", err)
	}
	if err := s.waitTree(ctx); err != nil {
		return Proof{}, err
	}
	if _, err := s.checked(ctx, sr); err != nil {
		return Proof{}, err
	}
	if err := s.catchUp(ctx); err != nil {
		return Proof{}, err
	}
	size := s.size()
	if treeSize == 0 {
		treeSize = size
	}
	if treeSize < sr.Seq || treeSize > size {
		return Proof{}, invalidf("tree_size", "tree_size must be between the record's seq (%d) and the ledger's size (%d); got %d.", sr.Seq, size, treeSize)
	}
	s.mu.RLock()
	path, err := s.tree.inclusion(uint64(sr.Seq-1), uint64(treeSize))
	var leaf [hashSize]byte
	if err == nil {
		leaf = s.tree.levels[0][sr.Seq-1]
	}
	s.mu.RUnlock()
	if err != nil {
		return Proof{}, err
	}
	ck, err := s.checkpointAt(ctx, treeSize)
	if err != nil {
		return Proof{}, err
	}
	return Proof{
		InvID: sr.InvID, Seq: sr.Seq, LeafIndex: sr.Seq - 1, TreeSize: treeSize,
		LeafHash: hex.EncodeToString(leaf[:]), RootHash: ck.RootHash, Proof: hexAll(path),
		EntryHash: sr.EntryHash, Checkpoint: ck.Note,
	}, nil
}

// Consistency returns the consistency proof between the trees of from and
// to records (to 0: the current size). EInvalid unless
// 1 <= from <= to <= size.
func (s *Service) Consistency(ctx context.Context, from, to int64) (ConsistencyProof, error) {
	if err := s.waitTree(ctx); err != nil {
		return ConsistencyProof{}, err
	}
	if err := s.catchUp(ctx); err != nil {
		return ConsistencyProof{}, err
	}
	size := s.size()
	if to == 0 {
		to = size
	}
	if from < 1 || from > to || to > size {
		return ConsistencyProof{}, invalidf("from", "from and to must satisfy 1 <= from <= to <= %d (the ledger's size); got from=%d to=%d.", size, from, to)
	}
	s.mu.RLock()
	path, err := s.tree.consistency(uint64(from), uint64(to))
	var r1 []byte
	if err == nil {
		r1, err = s.tree.root(uint64(from))
	}
	s.mu.RUnlock()
	if err != nil {
		return ConsistencyProof{}, err
	}
	ck, err := s.checkpointAt(ctx, to)
	if err != nil {
		return ConsistencyProof{}, err
	}
	return ConsistencyProof{From: from, To: to, Proof: hexAll(path), RootFrom: hex.EncodeToString(r1), RootTo: ck.RootHash, Checkpoint: ck.Note}, nil
}

func hexAll(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h)
	}
	return out
}
