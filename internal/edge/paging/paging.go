// Package paging is the one vocabulary of every list the server answers
// (SPEC section 16): a request pages with `limit` and an opaque `cursor`,
// an answer names the following page with `next_cursor` (null on the
// last), and each page is bounded in count (a default and a maximum per
// list) and in bytes (store.MaxPageBytes of records, ending early with a
// cursor). Lists that had their own parameter keep accepting it (events
// `after=SEQ`, the directory `after=KEY`).
//
// A cursor is the position of the last record of a page (a seq, a key, a
// timestamp and id), wrapped so that clients treat it as opaque: its form
// may change without breaking anyone who passes it back as given.
package paging

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
)

// MaxBytes bounds the records of one page.
const MaxBytes = store.MaxPageBytes

// List describes one list: its name (in cursors, so that a cursor of one
// list is refused by another), its default and maximum page sizes, and the
// legacy parameter naming a position, if it has one.
type List struct {
	Name         string
	Default, Max int
	// After, when not "", is the name of a query parameter that gives the
	// position directly (events: after=SEQ; directory: after=KEY).
	After string
}

// Page is a parsed list request: how many records, after which position
// ("" from the start).
type Page struct {
	Limit int
	After string
}

// Parse reads limit, cursor and the list's legacy after parameter from q.
// A limit that is not an integer in 1..Max, a cursor that is not one of
// this list's, or a cursor together with after is an EInvalid error (400)
// with a hint.
func (l List) Parse(q url.Values) (Page, error) {
	p := Page{Limit: l.Default}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > l.Max {
			return Page{}, protocol.Errorf(protocol.EInvalid, "limit must be an integer from 1 to %d (the page size of %s), not %q.", l.Max, l.Name, protocol.Truncate(v, 20)).
				With("field", "limit")
		}
		p.Limit = n
	}
	c := q.Get("cursor")
	if c != "" {
		pos, ok := l.decode(c)
		if !ok {
			return Page{}, protocol.Errorf(protocol.EInvalid, "cursor %q is not a cursor of %s: pass back the next_cursor of the previous page as given, or leave cursor out to start at the beginning.", protocol.Truncate(c, 40), l.Name).
				With("field", "cursor")
		}
		p.After = pos
	}
	if l.After != "" {
		if a := q.Get(l.After); a != "" {
			if c != "" {
				return Page{}, protocol.Errorf(protocol.EInvalid, "Give either cursor or %s, not both.", l.After).With("field", l.After)
			}
			p.After = a
		}
	}
	return p, nil
}

// Only refuses, as an EInvalid error (400) with a hint naming what route
// takes, a query parameter of q that is not one of params (a typo such as
// limt=5 would otherwise be ignored without a word) or one given more than
// once.
func Only(q url.Values, route string, params ...string) error {
	for k, vs := range q {
		if !slices.Contains(params, k) {
			return protocol.Errorf(protocol.EInvalid, "Unknown query parameter %q: %s takes %s.", protocol.Truncate(k, 64), route, strings.Join(params, ", ")).With("field", protocol.Truncate(k, 64))
		}
		if len(vs) > 1 {
			return protocol.Errorf(protocol.EInvalid, "Query parameter %s is given %d times; give it once.", k, len(vs)).With("field", k)
		}
	}
	return nil
}

// Of returns the list l of one owner (a subscription's deliveries, a
// delivery's attempts): its cursors are refused by the same list of
// another owner.
func (l List) Of(owner string) List {
	l.Name += " of " + owner
	return l
}

// Cursor returns the opaque cursor of position pos in this list.
func (l List) Cursor(pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(l.Name + "\x00" + pos))
}

// Next returns the next_cursor of a page: the cursor of pos, or nil when
// the page is the last.
func (l List) Next(pos string, more bool) *string {
	if !more {
		return nil
	}
	c := l.Cursor(pos)
	return &c
}

func (l List) decode(c string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", false
	}
	name, pos, ok := strings.Cut(string(b), "\x00")
	if !ok || name != l.Name {
		return "", false
	}
	return pos, true
}

// Seq parses a position that must be a non-negative integer (a seq), as
// given in the parameter param. An empty position is 0.
func Seq(pos, param string) (int64, error) {
	if pos == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || n < 0 {
		return 0, protocol.Errorf(protocol.EInvalid, "%s must be a non-negative integer (a seq), not %q.", param, protocol.Truncate(pos, 20)).With("field", param)
	}
	return n, nil
}

// Bytes counts the bytes of a page's records, so that a list ends its page
// once they reach MaxBytes.
type Bytes struct{ n int }

// Add counts a record of size bytes and reports whether the page has room
// for another.
func (b *Bytes) Add(size int) bool {
	b.n += size
	return b.n < MaxBytes
}
