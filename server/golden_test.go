package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/clock"
)

var update = flag.Bool("update", false, "rewrite the golden exchanges in testdata/golden")

// exchange is one request of a golden conversation.
type exchange struct {
	method, path string
	body         any
}

// TestGoldenExchanges replays fixed conversations and compares every
// answer (status, ETag and body, with the run id and base URL replaced by
// placeholders) with testdata/golden. Run with -update to rewrite them
// after an intended change of the wire format, and review the diff.
func TestGoldenExchanges(t *testing.T) {
	conversations := map[string]struct {
		workflow string
		steps    []exchange
	}{
		"config-wizard": {"", []exchange{
			{"GET", "/runs/RUN", nil},
			{"GET", "/runs/RUN/cli", nil},
			{"POST", "/runs/RUN/transitions/start", nil},
			{"GET", "/runs/RUN/cli", nil},
			{"POST", "/runs/RUN/transitions/save", map[string]any{"value": 7}},
			{"POST", "/runs/RUN/transitions/save", map[string]any{"value": "dark-mode"}},
			{"GET", "/runs/RUN/cli", nil},
			{"POST", "/runs/RUN/transitions/start", nil},
			{"POST", "/runs/RUN/transitions/cancel", nil},
			{"GET", "/runs/RUN/cli", nil},
		}},
		"expense-approval": {"expense-approval-v1", []exchange{
			{"GET", "/runs/RUN", nil},
			{"POST", "/runs/RUN/invoke/policy_check", map[string]any{"amount": 1500}},
			{"POST", "/runs/RUN/transitions/submit", map[string]any{"amount": 1500, "description": "Conference ticket"}},
			{"POST", "/runs/RUN/transitions/approve", nil},
			{"GET", "/runs/RUN/cli", nil},
			{"POST", "/runs/RUN/transitions/reject", map[string]any{"reason": "Not budgeted"}},
		}},
	}
	for name, conv := range conversations {
		t.Run(name, func(t *testing.T) {
			// A fixed clock: the due times of timer links are part of the
			// exchange.
			e := start(t, setup{clock: clock.NewFake(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))})
			created := e.do("POST", "/runs", map[string]any{"workflow_id": conv.workflow})
			if conv.workflow == "" {
				created = e.do("POST", "/runs", nil)
			}
			var f struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal(created.body, &f)
			var out bytes.Buffer
			record := func(method, path string, body any, r resp) {
				fmt.Fprintf(&out, "### %s %s", method, path)
				if body != nil {
					b, _ := json.Marshal(body)
					fmt.Fprintf(&out, " %s", b)
				}
				fmt.Fprintf(&out, "\n%d", r.status)
				if et := r.header.Get("ETag"); et != "" {
					fmt.Fprintf(&out, " ETag: %s", et)
				}
				out.WriteByte('\n')
				var v any
				if err := json.Unmarshal(r.body, &v); err != nil {
					t.Fatalf("%s %s: not JSON: %s", method, path, r.body)
				}
				pretty, _ := json.MarshalIndent(v, "", "  ")
				text := strings.ReplaceAll(string(pretty), f.RunID, "RUN")
				text = strings.ReplaceAll(text, e.url, "BASE")
				out.WriteString(text + "\n\n")
			}
			record("POST", "/runs", nil, created)
			for _, x := range conv.steps {
				r := e.do(x.method, strings.ReplaceAll(x.path, "RUN", f.RunID), x.body)
				record(x.method, x.path, x.body, r)
			}
			file := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./server -run Golden -update to create it)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("the exchange differs from %s (rerun with -update if intended):\n%s", file, firstDiff(string(want), out.String()))
			}
		})
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, w, g)
		}
	}
	return "(no difference found)"
}
