package server

import (
	"net/http"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/internal/httpx"
	"github.com/asmp-dev/asmp/protocol"
)

// AuthFailuresPerMinute is the default failure budget of authentication
// (Options.AuthFailures): a client address may send this many requests
// with a missing or unknown token in a minute (they come back one every
// 60/AuthFailuresPerMinute seconds); beyond it every request of that
// address gets 429 with Retry-After before any token is compared. It holds
// whatever Options.RateLimit says, so that guessing tokens stays slow.
const AuthFailuresPerMinute = 10

// authenticate maps the request to its principal (Options.Authenticate),
// within the address's failure budget.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Authenticate == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || isConsoleFile(r) {
			next.ServeHTTP(w, r)
			return
		}
		addr := "ip:" + s.clientAddr(r)
		if ok, wait := s.authFailures.peek(addr, s.now()); !ok {
			secs := retrySeconds(wait)
			httpx.WriteError(w, nil, protocol.Errorf(protocol.ERateLimited,
				"Too many failed authentications from this address (%d a minute); retry after %d s with a valid token.", s.opts.AuthFailures, secs).
				With("retry_after", secs))
			return
		}
		p, err := s.opts.Authenticate(r)
		if err != nil {
			if protocol.ErrorCode(err) == protocol.EUnauthorized {
				s.authFailures.take(addr, s.now())
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
