package oip

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// Record types the ledger holds.
const (
	TypeDirectoryRow     = "directory_row"     // a CLI directory row (SPEC section 8)
	TypeInvocation       = "invocation"        // an invocation of a row (SPEC section 9)
	TypeInvocationResult = "invocation_result" // the outcome of an executed invocation
)

// TimeFormat is the layout of every ledger timestamp: RFC 3339, UTC, whole
// seconds, "Z" (for example 2023-10-27T10:00:00Z).
const TimeFormat = "2006-01-02T15:04:05Z"

// Receipt statuses and the success message.
const (
	StatusSuccess  = "success"
	StatusError    = "error"
	SuccessMessage = "Object dispatched to ledger."
)

// Record is one immutable ledger entry as the API serves it.
//
// Its entry_hash is the hex SHA-256 of the record's canonical JSON (see
// CanonicalJSON), and the same canonical bytes are the record's leaf in the
// ledger's RFC 6962 Merkle tree. ReplayedBy is computed when the record is
// read and is not part of the hashed content.
type Record struct {
	InvID     string          `json:"inv_ID"`
	Seq       int64           `json:"seq"`
	Key       string          `json:"key"`
	Type      string          `json:"type"`
	Body      json.RawMessage `json:"body"`
	Timestamp string          `json:"timestamp"` // TimeFormat
	Source    string          `json:"source"`    // the principal's name, never a secret
	EntryHash string          `json:"entry_hash"`
	// Supersedes is the inv_ID of the key's previous record, "" for the
	// key's first one. It is always serialised: as null when "".
	Supersedes string `json:"-"`
	// ResultOf, on an invocation_result, is the attempt's inv_ID.
	ResultOf string `json:"result_of,omitempty"`
	// ReplayOf, on an invocation, names the invocation it replays.
	ReplayOf string `json:"replay_of,omitempty"`
	// ReplayedBy lists the inv_IDs of the invocations whose replay_of is
	// this record, oldest first. Computed on read; nil (and omitted from
	// the JSON) when not computed, [] when computed and empty.
	ReplayedBy []string `json:"replayed_by,omitzero"`
}

// recordJSON is Record's wire shape, with supersedes as a nullable string.
type recordJSON struct {
	InvID      string          `json:"inv_ID"`
	Seq        int64           `json:"seq"`
	Key        string          `json:"key"`
	Type       string          `json:"type"`
	Body       json.RawMessage `json:"body"`
	Timestamp  string          `json:"timestamp"`
	Source     string          `json:"source"`
	EntryHash  string          `json:"entry_hash"`
	Supersedes *string         `json:"supersedes"`
	ResultOf   string          `json:"result_of,omitempty"`
	ReplayOf   string          `json:"replay_of,omitempty"`
	ReplayedBy []string        `json:"replayed_by,omitzero"`
}

// MarshalJSON writes the record with supersedes as a string or null.
func (r Record) MarshalJSON() ([]byte, error) {
	w := recordJSON{
		InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body,
		Timestamp: r.Timestamp, Source: r.Source, EntryHash: r.EntryHash,
		ResultOf: r.ResultOf, ReplayOf: r.ReplayOf, ReplayedBy: r.ReplayedBy,
	}
	if r.Supersedes != "" {
		s := r.Supersedes
		w.Supersedes = &s
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a record written by MarshalJSON (supersedes may be a
// string, null or absent).
func (r *Record) UnmarshalJSON(b []byte) error {
	var w recordJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Record{
		InvID: w.InvID, Seq: w.Seq, Key: w.Key, Type: w.Type, Body: w.Body,
		Timestamp: w.Timestamp, Source: w.Source, EntryHash: w.EntryHash,
		ResultOf: w.ResultOf, ReplayOf: w.ReplayOf, ReplayedBy: w.ReplayedBy,
	}
	if w.Supersedes != nil {
		r.Supersedes = *w.Supersedes
	}
	return nil
}

// hashedRecord is exactly the content that entry_hash and the Merkle leaf
// commit to: every record field except entry_hash (which is derived from
// it) and replayed_by (which is computed on read).
type hashedRecord struct {
	InvID      string          `json:"inv_ID"`
	Seq        int64           `json:"seq"`
	Key        string          `json:"key"`
	Type       string          `json:"type"`
	Body       json.RawMessage `json:"body"`
	Timestamp  string          `json:"timestamp"`
	Source     string          `json:"source"`
	Supersedes *string         `json:"supersedes"`
	ResultOf   string          `json:"result_of,omitempty"`
	ReplayOf   string          `json:"replay_of,omitempty"`
}

// CanonicalJSON returns the bytes a record's entry_hash and Merkle leaf are
// computed from: the RFC 8785 (JCS) canonical JSON of the object
//
//	{"body", "inv_ID", "key", "seq", "source", "supersedes", "timestamp",
//	 "type"} plus "result_of" and "replay_of" when they are not empty
//
// with supersedes null when the record supersedes nothing. entry_hash and
// replayed_by are not hashed. In canonical JSON object keys are sorted,
// insignificant whitespace is removed, strings are minimally escaped and
// numbers are written in their shortest IEEE-754 double form.
func CanonicalJSON(r Record) ([]byte, error) {
	h := hashedRecord{
		InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body,
		Timestamp: r.Timestamp, Source: r.Source, ResultOf: r.ResultOf, ReplayOf: r.ReplayOf,
	}
	if len(h.Body) == 0 {
		h.Body = json.RawMessage("null")
	}
	if r.Supersedes != "" {
		s := r.Supersedes
		h.Supersedes = &s
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("oip: encode record %s: %w", r.InvID, err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("oip: canonicalise record %s: %w", r.InvID, err)
	}
	return c, nil
}

// EntryHash returns the hex SHA-256 of CanonicalJSON(r), the value a
// genuine record carries as entry_hash.
func EntryHash(r Record) (string, error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// LeafHash returns the record's RFC 6962 Merkle leaf hash:
// SHA-256(0x00 || CanonicalJSON(r)).
func LeafHash(r Record) ([]byte, error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return nil, err
	}
	h := leafHash(c)
	return h[:], nil
}

// leafHash is the RFC 6962 hash of a leaf holding data.
func leafHash(data []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(data)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// hashes returns entry_hash and the leaf hash of r in one canonicalisation.
func hashes(r Record) (entry string, leaf [32]byte, err error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return "", leaf, err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), leafHash(c), nil
}

// fromStore converts a stored record to its API form (without replayed_by).
func fromStore(r store.LedgerRecord) Record {
	return Record{
		InvID: r.InvID, Seq: r.Seq, Key: r.Key, Type: r.Type, Body: r.Body,
		Timestamp: formatTime(r.Timestamp), Source: r.Source, EntryHash: r.EntryHash,
		Supersedes: r.Supersedes, ResultOf: r.ResultOf, ReplayOf: r.ReplayOf,
	}
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Receipt is the answer to a successful dispatch: the seed's receipt plus
// the record's seq, entry_hash and the inv_ID it supersedes.
type Receipt struct {
	InvID      string `json:"inv_ID"`
	Status     string `json:"status"`  // StatusSuccess
	Message    string `json:"message"` // SuccessMessage
	ObjectKey  string `json:"object_key"`
	Timestamp  string `json:"timestamp"` // TimeFormat
	Seq        int64  `json:"seq"`
	EntryHash  string `json:"entry_hash"`
	Supersedes string `json:"supersedes,omitempty"`
	// Outcome is set on receipts of invocations: refused, or the result of
	// an execution.
	Outcome *Outcome `json:"outcome,omitempty"`
}

func receiptOf(r Record) Receipt {
	return Receipt{
		InvID: r.InvID, Status: StatusSuccess, Message: SuccessMessage, ObjectKey: r.Key,
		Timestamp: r.Timestamp, Seq: r.Seq, EntryHash: r.EntryHash, Supersedes: r.Supersedes,
	}
}

// checkBody checks that body is one JSON object the ledger can hash
// faithfully and returns it compacted: valid UTF-8, no duplicate member
// names, no lone surrogates, and every number exactly representable as an
// IEEE-754 double (RFC 8785 hashes numbers in that form, so a number that
// is not would be hashed as a different value than the one stored).
func checkBody(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, invalidf("body", "The body is not valid UTF-8; send UTF-8 JSON.")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return nil, invalidf("body", "The body is not valid JSON: %v.", err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, invalidf("body", "body must be a JSON object with a \"type\".")
	}
	if err := exactNumbers(buf.Bytes()); err != nil {
		return nil, err
	}
	if _, err := jcs.Transform(buf.Bytes()); err != nil {
		return nil, invalidf("body", "The body cannot be canonicalised (RFC 8785): %s. Remove duplicate keys and unpaired surrogate escapes.", protocol.Truncate(err.Error(), 200))
	}
	return buf.Bytes(), nil
}

// exactNumbers refuses numbers whose decimal value differs from the value
// of the nearest IEEE-754 double.
func exactNumbers(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalidf("body", "The body is not valid JSON: %v.", err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if !exactNumber(string(n)) {
			return invalidf("body", "The number %s in the body cannot be represented exactly as an IEEE-754 double, so its canonical (RFC 8785) form would differ from it; send it as a string.", protocol.Truncate(string(n), 40))
		}
	}
}

// exactNumber reports whether the JSON number s has exactly the decimal
// value of the double nearest to it.
func exactNumber(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	a, ok1 := decimalOf(s)
	b, ok2 := decimalOf(strconv.FormatFloat(f, 'e', -1, 64))
	return ok1 && ok2 && a == b
}

type decimal struct {
	neg    bool
	digits string // no leading or trailing zeros; "" for zero
	exp    int    // value = 0.digits × 10^exp
}

// decimalOf normalises a JSON (or strconv 'e') number.
func decimalOf(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if strings.Trim(intPart+frac, "0") == "" {
		return decimal{}, true // zero, whatever the exponent; -0 equals 0
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > 1<<20 || e < -(1<<20) {
			return d, false
		}
		exp = e
	}
	digits := intPart + frac
	exp += len(intPart)
	trimmed := strings.TrimLeft(digits, "0")
	exp -= len(digits) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	d.exp = exp
	return d, true
}

func invalidf(field, format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.EInvalid, format, args...).With("field", field)
}
