package cli

import (
	"testing"

	"github.com/asmp-dev/asmp/internal/app/agentstate"
)

// One rule for every client command: --server, else $ASMP_URL, else the
// run's remembered server, else the address a bare `asmp serve` listens on.
func TestServerRule(t *testing.T) {
	dir := t.TempDir()
	const run = "0190aaaa-0000-7000-8000-000000000001"
	if err := agentstate.Open(dir).Remember(run, agentstate.Entry{Server: "http://remembered:1"}); err != nil {
		t.Fatal(err)
	}
	envWith := func(url string) *Env {
		return &Env{Getenv: func(k string) string {
			switch k {
			case "ASMP_URL":
				return url
			case "ASMP_STATE_DIR":
				return dir
			}
			return ""
		}}
	}
	for _, c := range []struct {
		name, flag, env, run, want string
	}{
		{"flag wins", "http://flag:1", "http://env:1", run, "http://flag:1"},
		{"then ASMP_URL", "", "http://env:1", run, "http://env:1"},
		{"then the remembered server", "", "", run, "http://remembered:1"},
		{"then the default", "", "", "0190aaaa-0000-7000-8000-000000000002", "http://127.0.0.1:8000"},
		{"no run: the default", "", "", "", "http://127.0.0.1:8000"},
	} {
		if got := serverFor(envWith(c.env), c.flag, c.run); got != c.want {
			t.Errorf("%s: serverFor = %q, want %q", c.name, got, c.want)
		}
	}
}
