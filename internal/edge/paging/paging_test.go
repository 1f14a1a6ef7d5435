package paging

import (
	"net/url"
	"testing"

	"github.com/asmp-dev/asmp/protocol"
)

func TestParse(t *testing.T) {
	l := List{Name: "things", Default: 10, Max: 50, After: "after"}
	p, err := l.Parse(url.Values{})
	if err != nil || p.Limit != 10 || p.After != "" {
		t.Fatalf("defaults: %+v %v", p, err)
	}
	p, err = l.Parse(url.Values{"limit": {"50"}, "cursor": {l.Cursor("k-9")}})
	if err != nil || p.Limit != 50 || p.After != "k-9" {
		t.Fatalf("limit and cursor: %+v %v", p, err)
	}
	if p, err = l.Parse(url.Values{"after": {"k-3"}}); err != nil || p.After != "k-3" {
		t.Fatalf("after: %+v %v", p, err)
	}
	other := List{Name: "others", Default: 1, Max: 1}
	for _, q := range []url.Values{
		{"limit": {"0"}}, {"limit": {"51"}}, {"limit": {"1.5"}}, {"limit": {"-1"}},
		{"cursor": {"%%"}}, {"cursor": {other.Cursor("x")}}, {"cursor": {"YWJj"}},
		{"cursor": {l.Cursor("a")}, "after": {"b"}},
	} {
		_, err := l.Parse(q)
		var pe *protocol.Error
		if err == nil || !asError(err, &pe) || pe.Code != protocol.EInvalid || pe.Hint == "" {
			t.Errorf("Parse(%v) = %v, want EInvalid with a hint", q, err)
		}
	}
	if other.Parse(url.Values{"after": {"x"}}); other.After != "" {
		t.Fatal("a list without an after parameter has one")
	}
}

func asError(err error, pe **protocol.Error) bool {
	e, ok := err.(*protocol.Error)
	*pe = e
	return ok
}

func TestNextAndSeq(t *testing.T) {
	l := List{Name: "events"}
	if l.Next("5", false) != nil {
		t.Fatal("a last page has a next cursor")
	}
	c := l.Next("5", true)
	if c == nil || *c == "5" {
		t.Fatalf("next cursor %v is not opaque", c)
	}
	if n, err := Seq("42", "after"); n != 42 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := Seq("4x", "after"); err == nil {
		t.Fatal("Seq accepted 4x")
	}
}
