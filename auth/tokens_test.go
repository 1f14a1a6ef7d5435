package auth_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/protocol"
)

func TestParseAndAuthenticate(t *testing.T) {
	ts, err := auth.NewTokens([]string{"ci=0123456789abcdef:read,runs", "admin=s3cr3t:with:colons-0123"}, " ; bot=zzzzzzzzzzzzzzzzzzzz:dispatch ; ops=opsopsopsopsopsops:read,admin")
	if err != nil {
		t.Fatal(err)
	}
	if ts.Len() != 4 {
		t.Fatalf("%d tokens", ts.Len())
	}
	for _, c := range []struct {
		header, name string
		scopes       string
		code         string
	}{
		{"Bearer 0123456789abcdef", "ci", "read,runs", ""},
		{"bearer s3cr3t:with:colons-0123", "admin", "read,runs,dispatch,exec,admin", ""},
		{"Bearer opsopsopsopsopsops", "ops", "read,admin", ""},
		{"Bearer zzzzzzzzzzzzzzzzzzzz", "bot", "dispatch", ""},
		{"", "", "", protocol.EUnauthorized},
		{"Basic abc", "", "", protocol.EUnauthorized},
		{"Bearer 0123456789abcdeX", "", "", protocol.EUnauthorized},
		{"Bearer 0123456789abcdef0", "", "", protocol.EUnauthorized},
		// The named form: NAME:SECRET, compared with NAME's secret only.
		{"Bearer ci:0123456789abcdef", "ci", "read,runs", ""},
		{"Bearer admin:s3cr3t:with:colons-0123", "admin", "read,runs,dispatch,exec,admin", ""},
		{"Bearer ops:0123456789abcdef", "", "", protocol.EUnauthorized},
		{"Bearer nobody:0123456789abcdef", "", "", protocol.EUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		p, err := ts.Authenticate(r)
		if c.code != "" {
			if protocol.ErrorCode(err) != c.code || protocol.ErrorHint(err) == "" {
				t.Errorf("%q: err = %v", c.header, err)
			}
			continue
		}
		if err != nil || p.Name != c.name || strings.Join(p.Scopes, ",") != c.scopes {
			t.Errorf("%q: %+v, %v", c.header, p, err)
		}
	}
}

func TestTokenSpecErrorsNeverEchoSecrets(t *testing.T) {
	for _, spec := range []string{"nosecret", "x=short", "bad name=0123456789abcdef", "a=0123456789abcdef:read,fly"} {
		_, err := auth.NewTokens([]string{spec}, "")
		if err == nil {
			t.Errorf("%q accepted", spec)
			continue
		}
		if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "short") && !strings.Contains(err.Error(), "16") {
			t.Errorf("%q: error leaks the secret: %v", spec, err)
		}
	}
	if _, err := auth.NewTokens([]string{"a=0123456789abcdef", "b=0123456789abcdef"}, ""); err == nil {
		t.Error("two tokens with one secret accepted")
	}
	if _, err := auth.NewTokens([]string{"a=0123456789abcdef", "a=fedcba9876543210"}, ""); err == nil {
		t.Error("two tokens with one name accepted")
	}
}

// Claim names the configured token of the NAME:SECRET form, without
// looking at the secret; any other form claims none.
func TestClaim(t *testing.T) {
	ts, err := auth.NewTokens([]string{"ci=0123456789abcdef:read", "admin=admin:0123456789abcdef"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"Bearer ci:wrong": "ci", "bearer admin:0123456789abcdef": "admin", "Bearer 0123456789abcdef": "",
		"Bearer nobody:0123456789abcdef": "", "": "", "Basic ci:x": "", "Bearer :x": "",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := ts.Claim(r); got != want {
			t.Errorf("Claim(%q) = %q, want %q", header, got, want)
		}
	}
	// A secret that begins with a name and ':' still authenticates as
	// the token it is.
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer admin:0123456789abcdef")
	if p, err := ts.Authenticate(r); err != nil || p.Name != "admin" {
		t.Fatalf("%+v %v", p, err)
	}
}
