package oip

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/asmp-dev/asmp/oip/verify"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// CanonicalJSON returns the bytes a record's entry_hash and Merkle leaf are
// computed from (see verify.CanonicalJSON).
func CanonicalJSON(r Record) ([]byte, error) { return verify.CanonicalJSON(r) }

// EntryHash returns the hex SHA-256 of CanonicalJSON(r), the value a
// genuine record carries as entry_hash.
func EntryHash(r Record) (string, error) { return verify.EntryHash(r) }

// LeafHash returns the record's RFC 6962 Merkle leaf hash:
// SHA-256(0x00 || CanonicalJSON(r)).
func LeafHash(r Record) ([]byte, error) { return verify.LeafHash(r) }

// leafHash is the RFC 6962 hash of a leaf holding data.
func leafHash(data []byte) [32]byte { return verify.LeafHashOf(data) }

// hashes returns entry_hash, the leaf hash and the canonical bytes of r in
// one canonicalisation.
func hashes(r Record) (entry string, leaf [32]byte, canonical []byte, err error) {
	c, err := CanonicalJSON(r)
	if err != nil {
		return "", leaf, nil, err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), leafHash(c), c, nil
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
	if err := protocol.CheckSurrogates(buf.Bytes()); err != nil {
		return nil, invalidf("body", "%s", protocol.ErrorHint(err))
	}
	if _, err := jcs.Transform(buf.Bytes()); err != nil {
		return nil, invalidf("body", "The body cannot be canonicalised (RFC 8785): %s. Remove duplicate keys.", protocol.Truncate(err.Error(), 200))
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
