package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Token is one configured bearer token: a name (recorded as the principal),
// a secret (compared in constant time, never logged) and scopes.
type Token struct {
	Name   string
	secret [32]byte // SHA-256 of the secret: comparisons never touch the secret itself
	Scopes []string
}

// Tokens authenticates requests against a fixed set of tokens.
type Tokens struct {
	list []Token
}

// ParseToken parses NAME=SECRET[:SCOPE,...]. No scopes means all scopes.
// Secrets must be at least 16 characters.
func ParseToken(spec string) (Token, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return Token{}, fmt.Errorf("a token is not of the form NAME=SECRET[:SCOPE,...] (it has no '='); the value is not shown, as it may be the secret")
	}
	if !tokenName.MatchString(name) {
		return Token{}, fmt.Errorf("a token's name (before the first '=') is not letters, digits, '.', '_', '-' (at most 64); it is not shown, as it may be part of the secret: use NAME=SECRET[:SCOPE,...]")
	}
	secret, scopeList, hasScopes := cutLast(rest, ":")
	if len(secret) < 16 {
		return Token{}, fmt.Errorf("token %q: the secret must be at least 16 characters", name)
	}
	t := Token{Name: name, secret: sha256.Sum256([]byte(secret))}
	if !hasScopes || scopeList == "" {
		t.Scopes = AllScopes
		return t, nil
	}
	for _, s := range strings.Split(scopeList, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(AllScopes, s) {
			return Token{}, fmt.Errorf("token %q: what follows the last ':' is not a list of scopes (%s); it is not shown, as it may be part of the secret: if the secret contains ':', end the token with its scopes", name, strings.Join(AllScopes, ", "))
		}
		if !slices.Contains(t.Scopes, s) {
			t.Scopes = append(t.Scopes, s)
		}
	}
	return t, nil
}

// cutLast splits s at the last sep when what follows looks like a scope
// list (lowercase words and commas only), so secrets may contain ':'
// themselves while a mistyped scope is an error, not part of the secret.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 || !scopeList.MatchString(s[i+1:]) {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

var scopeList = regexp.MustCompile(`^[a-z]+( *, *[a-z]+)*$`)

// NewTokens builds an authenticator from token specs (see ParseToken);
// envList holds more specs separated by ';' (the ASMP_TOKENS variable).
func NewTokens(specs []string, envList string) (*Tokens, error) {
	all := append([]string{}, specs...)
	for _, s := range strings.Split(envList, ";") {
		if s = strings.TrimSpace(s); s != "" {
			all = append(all, s)
		}
	}
	ts := &Tokens{}
	for _, spec := range all {
		t, err := ParseToken(spec)
		if err != nil {
			return nil, err
		}
		for _, prev := range ts.list {
			if prev.Name == t.Name {
				return nil, fmt.Errorf("token name %q is given twice", t.Name)
			}
			if subtle.ConstantTimeCompare(prev.secret[:], t.secret[:]) == 1 {
				return nil, fmt.Errorf("tokens %q and %q have the same secret", prev.Name, t.Name)
			}
		}
		ts.list = append(ts.list, t)
	}
	return ts, nil
}

// Len returns the number of tokens.
func (ts *Tokens) Len() int { return len(ts.list) }

// Names returns the token names (never secrets).
func (ts *Tokens) Names() []string {
	out := make([]string, len(ts.list))
	for i, t := range ts.list {
		out[i] = t.Name + "(" + strings.Join(t.Scopes, ",") + ")"
	}
	return out
}

// The two forms of a bearer token. A client may send the secret alone
// (Authorization: Bearer SECRET, what every client sends unless told
// otherwise) or prefixed with its token's name (Bearer NAME:SECRET; names
// hold no ':', so the first ':' ends the name). To the client either is
// one opaque string: ASMP_TOKEN=NAME:SECRET works with any of them. The
// named form lets a server keep a failure budget per token (Claim), so
// that the failures of others on the same address (unknown tokens,
// guesses) never lock it out.

// Claim returns the name of the configured token r's bearer token names
// in the NAME:SECRET form, or "" when it names none (no token, the
// secret-only form, or a name that is not configured). The secret is not
// looked at.
func (ts *Tokens) Claim(r *http.Request) string {
	name, _, ok := ts.named(bearerToken(r))
	if !ok {
		return ""
	}
	return ts.list[name].Name
}

// named splits token into a configured token's index and the rest, when
// it has the NAME:SECRET form and NAME is configured.
func (ts *Tokens) named(token string) (int, string, bool) {
	name, secret, ok := strings.Cut(token, ":")
	if !ok || !tokenName.MatchString(name) {
		return 0, "", false
	}
	for i := range ts.list {
		if ts.list[i].Name == name {
			return i, secret, true
		}
	}
	return 0, "", false
}

// bearerToken is the token of r's Authorization header ("" without one).
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, _ := strings.Cut(h, " ")
	if h == "" || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Authenticate returns the principal of r's bearer token. In the
// NAME:SECRET form the secret is compared with NAME's only; otherwise
// (and when that fails: a secret may itself begin with a token's name and
// a ':') the token is compared with every configured secret in constant
// time, without stopping at a match, so timing reveals nothing about
// which prefix matched. A missing or unknown token is an EUnauthorized
// *protocol.Error.
func (ts *Tokens) Authenticate(r *http.Request) (Principal, error) {
	token := bearerToken(r)
	if token == "" {
		return Principal{}, protocol.Errorf(protocol.EUnauthorized, "This server needs a token: send Authorization: Bearer <token> (the asmp CLI reads ASMP_TOKEN).")
	}
	if i, secret, ok := ts.named(token); ok {
		sum := sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(sum[:], ts.list[i].secret[:]) == 1 {
			t := ts.list[i]
			return Principal{Name: t.Name, Scopes: t.Scopes}, nil
		}
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.list {
		if subtle.ConstantTimeCompare(sum[:], ts.list[i].secret[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, protocol.Errorf(protocol.EUnauthorized, "Unknown token: check the secret you send as Authorization: Bearer <token> (the secret, or NAME:SECRET).")
	}
	t := ts.list[found]
	return Principal{Name: t.Name, Scopes: t.Scopes}, nil
}
