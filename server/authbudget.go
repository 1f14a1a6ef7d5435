package server

import (
	"net/http"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// AuthFailuresPerMinute is the default failure budget of authentication
// (Options.AuthFailures): a client address may send this many requests
// with a missing or unknown token in a minute (they come back one every
// 60/AuthFailuresPerMinute seconds); beyond it every such request of that
// address gets 429 with Retry-After before any token is compared. It
// holds whatever Options.RateLimit says, so that guessing tokens stays
// slow.
//
// A token sent in the NAME:SECRET form (Options.TokenClaim) has a budget
// of its own on each address instead, of the same size: its secret is
// compared with NAME's only, its failures count against that budget
// alone, and the address's budget does not apply to it. So guesses and
// unknown tokens from an address (every agent on a loopback server,
// everyone behind one NAT) never lock out a valid token sent that way,
// and guessing stays bounded: per address, the budget of each configured
// name plus the address's own.
const AuthFailuresPerMinute = 10

// authenticate maps the request to its principal (Options.Authenticate),
// within its failure budget.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Authenticate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || isConsoleFile(r) {
			next.ServeHTTP(w, r)
			return
		}
		addr := s.clientAddr(r)
		key, name := "ip:"+addr, ""
		if s.opts.TokenClaim != nil {
			if name = s.opts.TokenClaim(r); name != "" {
				key = "token:" + name + "@" + addr
			}
		}
		if ok, wait := s.authFailures.peek(key, s.now()); !ok {
			secs := retrySeconds(wait)
			var err error
			if name != "" {
				err = protocol.Errorf(protocol.ERateLimited,
					"Too many failed authentications as token %q from this address (%d a minute); retry after %d s with its right secret.", name, s.opts.AuthFailures, secs)
			} else {
				hint := "Too many failed authentications from this address (%d a minute); retry after %d s with a valid token."
				if s.opts.TokenClaim != nil {
					hint += " A token sent as NAME:SECRET (Authorization: Bearer NAME:SECRET) has a budget of its own, which others' failures do not spend."
				}
				err = protocol.Errorf(protocol.ERateLimited, hint, s.opts.AuthFailures, secs)
			}
			httpx.WriteError(w, nil, err.(*protocol.Error).With("retry_after", secs))
			return
		}
		p, err := s.opts.Authenticate(r)
		if err != nil {
			if protocol.ErrorCode(err) == protocol.EUnauthorized {
				s.authFailures.take(key, s.now())
				w.Header().Set("WWW-Authenticate", `Bearer realm="asmp"`)
			}
			httpx.WriteError(w, s.log, err)
			return
		}
		if ri := infoOf(w, r); ri != nil {
			ri.actor = p.Name
		}
		// What a token was needed for is kept by no cache (a shared proxy,
		// the browser's disk): handlers may say otherwise for their answers.
		w.Header()["Cache-Control"] = noStore
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}
