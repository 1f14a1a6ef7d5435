package server_test

import (
	"strings"
	"testing"
)

// TestIfMatchComparesStrongTagsOnly: RFC 9110 (13.1.1) says If-Match
// compares strong entity tags; a weak one (W/"1") never matches, even for
// the run's current version. It is no malformed header (so the order puts
// it last: 409), and the strong tag of the same version applies.
func TestIfMatchComparesStrongTagsOnly(t *testing.T) {
	e := start(t, setup{})
	id := e.startRun("").RunID
	r := e.do("POST", "/runs/"+id+"/transitions/start", nil, "If-Match", `W/"1"`)
	if r.status != 409 || !strings.Contains(r.hint(t), "weak entity tag") {
		t.Fatalf("weak If-Match of the current version: %d %s, want 409", r.status, r.body)
	}
	// Not offered now wins over the weak tag, as over a stale one.
	if r := e.do("POST", "/runs/"+id+"/transitions/confirm", nil, "If-Match", `W/"1"`); r.status != 403 {
		t.Fatalf("weak If-Match on an action not offered: %d %s, want 403", r.status, r.body)
	}
	if n := len(e.events(id)); n != 1 {
		t.Fatalf("a refused transition wrote: %d events", n)
	}
	frame(t, e.do("POST", "/runs/"+id+"/transitions/start", nil, "If-Match", `"1"`), 200)
}
