package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/cli"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/runner"
	"github.com/asmp-dev/asmp/store/memstore"
)

// ledgerServer serves the OIP API with the example rows, a row "divide"
// (expr A OP B) and an executor allowing factor and expr.
func ledgerServer(t *testing.T) (string, *oip.Service) {
	t.Helper()
	ex, err := runner.New(runner.Options{Allow: []string{"factor", "expr"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := oip.New(memstore.New(), &oip.Options{Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := examples.Rows()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, _, err := svc.EnsureRow(auth.WithPrincipal(context.Background(), auth.Open), r.Key, r.Body); err != nil {
			t.Fatal(err)
		}
	}
	divide := `{"type":"directory_row","command":"expr","args":[{"name":"a","type":"integer","required":true},{"name":"op","type":"string","required":true},{"name":"b","type":"integer","required":true}]}`
	if _, err := svc.Dispatch(context.Background(), "divide", json.RawMessage(divide)); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, svc
}

func runInvoke(t *testing.T, url string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(`{"a": 3, "b": 5}`), Getenv: func(k string) string {
		if k == "ASMP_URL" {
			return url
		}
		return ""
	}}
	code = cli.Main(context.Background(), append([]string{"invoke"}, args...), env)
	return code, out.String(), errb.String()
}

func TestInvokeCommand(t *testing.T) {
	url, svc := ledgerServer(t)

	code, out, _ := runInvoke(t, url, "number-facts.factor", "--input", `{"numbers": [360, 17]}`)
	if code != 0 || !strings.Contains(out, "Command:  factor 360 17   [exec]") || !strings.Contains(out, "Not executed") {
		t.Fatalf("record only (%d):\n%s", code, out)
	}
	code, out, _ = runInvoke(t, url, "number-facts.factor", "--input", `{"numbers": [360, 17]}`, "--execute")
	if code != 0 || !strings.Contains(out, "Outcome:  succeeded, exit code 0") || !strings.Contains(out, "  | 360: 2 2 2 3 3 5\n  | 17: 17\n") {
		t.Fatalf("execute (%d):\n%s", code, out)
	}

	// --json, --key, --input from stdin, output parsed.
	code, out, _ = runInvoke(t, url, "number-facts.multiply", "--input", "-", "--execute", "--key", "mult-1", "--json")
	var res struct {
		Receipt    oip.Receipt `json:"receipt"`
		Invocation string      `json:"invocation"`
		Command    struct {
			Argv []string `json:"argv"`
		} `json:"command"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Receipt.ObjectKey != "mult-1" ||
		res.Receipt.Outcome == nil || string(res.Receipt.Outcome.Output) != "15" || strings.Join(res.Command.Argv, " ") != "expr 3 * 5" {
		t.Fatalf("json (%d): %v\n%s", code, err, out)
	}

	// A replay of it, linked both ways.
	var again struct {
		Receipt    oip.Receipt `json:"receipt"`
		Invocation string      `json:"invocation"`
	}
	code, out, _ = runInvoke(t, url, "number-facts.multiply", "--input", `{"a": 3, "b": 5}`, "--execute", "--json", "--replay-of", res.Invocation)
	if err := json.Unmarshal([]byte(out), &again); err != nil || code != 0 || again.Invocation == "" {
		t.Fatalf("replay (%d): %v\n%s", code, err, out)
	}
	orig, err := svc.Record(context.Background(), res.Invocation)
	rep, err2 := svc.Record(context.Background(), again.Invocation)
	if err != nil || err2 != nil || len(orig.ReplayedBy) != 1 || orig.ReplayedBy[0] != again.Invocation || rep.ReplayOf != res.Invocation {
		t.Fatalf("replay links: %+v / %+v", orig, rep)
	}
	// Replaying the result record a client received resolves to its attempt.
	code, out, _ = runInvoke(t, url, "number-facts.multiply", "--input", `{"a": 3, "b": 5}`, "--json", "--replay-of", res.Receipt.InvID)
	if err := json.Unmarshal([]byte(out), &again); err != nil || code != 0 {
		t.Fatalf("replay of a result (%d): %v\n%s", code, err, out)
	}
	if rep, err := svc.Record(context.Background(), again.Invocation); err != nil || rep.ReplayOf != res.Invocation {
		t.Fatalf("replay of the result %s: replay_of %q, want the attempt %s (%v)", res.Receipt.InvID, rep.ReplayOf, res.Invocation, err)
	}

	// A failing command: exit 2, the reason and stderr shown.
	code, out, errOut := runInvoke(t, url, "divide", "--input", `{"a": 1, "op": "/", "b": 0}`, "--execute")
	if code != 2 || !strings.Contains(out, "Outcome:  failed, exit code 2") || !strings.Contains(out, "division by zero") || !strings.Contains(errOut, "the command failed") {
		t.Fatalf("failed (%d):\n%s\n%s", code, out, errOut)
	}

	// Refused input: exit 3 with the reason; failed command: exit 2.
	code, out, errOut = runInvoke(t, url, "number-facts.multiply", "--input", `{"a": 0, "b": 5}`, "--execute")
	if code != 3 || !strings.Contains(out, "Outcome:  refused") || !strings.Contains(errOut, "refused") {
		t.Fatalf("refused (%d):\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runInvoke(t, url, "no-such-row", "--input", `{}`)
	if code != 1 || !strings.Contains(errOut, `No directory row has the key "no-such-row"`) {
		t.Fatalf("unknown row (%d): %s", code, errOut)
	}
	code, _, errOut = runInvoke(t, url, "number-facts.factor", "--input", `[1]`)
	if code != 1 || !strings.Contains(errOut, "--input must be a JSON object") {
		t.Fatalf("bad --input (%d): %s", code, errOut)
	}
}
