package cli_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/internal/app/cli"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/oip/runner"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// seedRequest is the body of the seed's curl example, verbatim.
const seedRequest = `{
    "key": "my-cli-tool-v1",
    "body": {
      "type": "directory_row",
      "command": "mytool",
      "description": "A sample CLI tool for processing files.",
      "args": [
        {
          "name": "input_file",
          "type": "string",
          "description": "Path to the input file.",
          "required": true
        }
      ],
      "flags": [
        {
          "name": "output",
          "type": "string",
          "description": "Path for the output file.",
          "required": false,
          "default": "./output.txt",
          "short_alias": "-o"
        },
        {
          "name": "verbose",
          "type": "boolean",
          "description": "Enable verbose logging.",
          "required": false,
          "default": false,
          "short_alias": "-v"
        }
      ],
      "output_format": "text",
      "invocation_method": "exec",
      "source_url": "https://github.com/example/mytool/releases/v1.0.0"
    }
  }`

// seedInput is the seed's example input; seedCommand its command.
const (
	seedInput   = `{"input_file": "data.txt", "output": "result.txt", "verbose": true}`
	seedCommand = "mytool data.txt -o result.txt -v\n"
)

// oipServer serves the ASMP API with an empty OIP ledger (and an executor
// allowing echo when exec is set) and returns its URL and the ledger.
func oipServer(t *testing.T, execute bool) (string, *oip.Service) {
	t.Helper()
	st := memstore.New()
	var opts *oip.Options
	if execute {
		ex, err := runner.New(runner.Options{Allow: []string{"echo"}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		opts = &oip.Options{Executor: ex}
	}
	svc, err := oip.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(st, examples.All(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, &server.Options{API: svc.API()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	return ts.URL, svc
}

// asmpRun runs asmp in-process with ASMP_URL set to url ("" for none).
func asmpRun(t *testing.T, url string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cli.Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), Getenv: func(k string) string {
		if k == "ASMP_URL" {
			return url
		}
		return ""
	}}
	code = cli.Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

// ok runs asmp and fails the test unless it exits 0.
func ok(t *testing.T, url string, args ...string) string {
	t.Helper()
	code, out, errOut := asmpRun(t, url, "", args...)
	if code != 0 {
		t.Fatalf("asmp %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs asmp and fails the test unless it exits 1 with want in its
// "asmp: <hint>" on stderr; it returns stdout.
func fails(t *testing.T, url, want string, args ...string) string {
	t.Helper()
	code, out, errOut := asmpRun(t, url, "", args...)
	if code != 1 || !strings.HasPrefix(errOut, "asmp: ") || !strings.Contains(errOut, want) {
		t.Fatalf("asmp %s: exit %d, want 1 with %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

func mustContain(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

// noNetwork returns a URL whose server fails the test when asked anything.
func noNetwork(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("offline command sent %s %s", r.Method, r.URL)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// The seed's example end to end: dispatch, receipt, repair, history,
// rows, command offline and online, verify.
func TestOIPSeedEndToEnd(t *testing.T) {
	url, svc := oipServer(t, false)
	dir := t.TempDir()
	seedFile := writeFile(t, dir, "seed.json", seedRequest)

	// Dispatch the seed's curl body from a file.
	first := decode[map[string]any](t, ok(t, url, "dispatch", seedFile, "--json"))
	inv1, _ := first["inv_ID"].(string)
	if !strings.HasPrefix(inv1, "inv_") || first["status"] != "success" || first["message"] != "Object dispatched to ledger." ||
		first["object_key"] != "my-cli-tool-v1" || first["seq"] != 1.0 || first["entry_hash"] == "" || first["timestamp"] == "" {
		t.Fatalf("receipt: %v", first)
	}
	if _, ok := first["supersedes"]; ok {
		t.Fatalf("a first version supersedes nothing: %v", first)
	}

	// The receipt replays it.
	out := ok(t, url, "receipt", inv1)
	mustContain(t, "receipt", out,
		"inv_ID:      "+inv1+"\n", "key:         my-cli-tool-v1\n", "type:        directory_row\n", "seq:         1\n",
		"source:      anonymous\n", "supersedes:  none (the key's first version)\n", "command:     mytool\n",
		"description: A sample CLI tool for processing files.\n", `"short_alias": "-o"`)
	rec := decode[oip.Record](t, ok(t, url, "receipt", inv1, "--json"))
	var req struct {
		Body json.RawMessage `json:"body"`
	}
	_ = json.Unmarshal([]byte(seedRequest), &req)
	if rec.InvID != inv1 || rec.Key != "my-cli-tool-v1" || rec.EntryHash != first["entry_hash"] || !sameJSON(rec.Body, req.Body) {
		t.Fatalf("receipt --json: %+v", rec)
	}

	// Repair: a changed version, body only with --key, supersedes it.
	body2 := strings.Replace(string(req.Body), "A sample CLI tool", "A repaired CLI tool", 1)
	bodyFile := writeFile(t, dir, "body.json", body2)
	out = ok(t, url, "dispatch", bodyFile, "--key", "my-cli-tool-v1")
	mustContain(t, "repair receipt", out, "seq:         2\n", "object_key:  my-cli-tool-v1\n", "supersedes:  "+inv1+"\n", "entry_hash:  ")
	inv2 := strings.Fields(out)[1]
	if !strings.HasPrefix(inv2, "inv_") || inv2 == inv1 {
		t.Fatalf("repair receipt:\n%s", out)
	}

	// History: both versions, oldest first.
	out = ok(t, url, "history", "my-cli-tool-v1")
	mustContain(t, "history", out, "my-cli-tool-v1: 2 versions, oldest first\n", "SEQ  INV_ID")
	if i, j := strings.Index(out, inv1), strings.Index(out, inv2); i < 0 || j < i {
		t.Fatalf("history order:\n%s", out)
	}
	h := decode[oip.History](t, ok(t, url, "history", "my-cli-tool-v1", "--json"))
	if h.Key != "my-cli-tool-v1" || len(h.Records) != 2 || h.Records[0].InvID != inv1 || h.Records[1].Supersedes != inv1 {
		t.Fatalf("history --json: %+v", h)
	}

	// Rows: the latest version only.
	out = ok(t, url, "rows")
	mustContain(t, "rows", out, "KEY", "my-cli-tool-v1", "mytool", "exec", "A repaired CLI tool", inv2)
	if strings.Contains(out, inv1) || strings.Contains(out, "More:") {
		t.Fatalf("rows shows the old version or a next page:\n%s", out)
	}
	page := decode[oip.DirectoryPage](t, ok(t, url, "rows", "--json"))
	if len(page.Rows) != 1 || page.Rows[0].InvID != inv2 || page.Rows[0].Type != "cli" || page.Next != "" {
		t.Fatalf("rows --json: %+v", page)
	}
	rowJSON, _ := json.Marshal(page.Rows[0])
	listedFile := writeFile(t, dir, "listed.json", string(rowJSON))

	// Command: offline on the request, the body and the listed row (no
	// request reaches any server), and online by key — all exactly the
	// seed's command.
	offline := noNetwork(t)
	for _, f := range []string{seedFile, bodyFile, listedFile} {
		if out := ok(t, offline, "command", f, "--input", seedInput); out != seedCommand {
			t.Fatalf("command %s offline = %q", f, out)
		}
	}
	if out := ok(t, "", "command", seedFile, "--input", seedInput); out != seedCommand {
		t.Fatalf("command offline without a server = %q", out)
	}
	if out := ok(t, url, "command", "my-cli-tool-v1", "--input", seedInput); out != seedCommand {
		t.Fatalf("command online = %q", out)
	}
	if out := ok(t, offline, "command", seedFile, "--input", seedInput, "--argv"); out != "mytool\ndata.txt\n-o\nresult.txt\n-v\n" {
		t.Fatalf("command --argv = %q", out)
	}
	for _, target := range []struct{ url, arg string }{{offline, seedFile}, {url, "my-cli-tool-v1"}} {
		got := decode[map[string]any](t, ok(t, target.url, "command", target.arg, "--input", seedInput, "--json"))
		want := map[string]any{"argv": []any{"mytool", "data.txt", "-o", "result.txt", "-v"}, "command": strings.TrimSpace(seedCommand), "invocation_method": "exec"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("command %s --json = %v", target.arg, got)
		}
	}
	// --input from a file and from stdin.
	inFile := writeFile(t, dir, "in.json", seedInput)
	if out := ok(t, offline, "command", seedFile, "--input", "@"+inFile); out != seedCommand {
		t.Fatalf("command --input @FILE = %q", out)
	}
	if code, out, _ := asmpRun(t, offline, seedInput, "command", seedFile, "--input", "-"); code != 0 || out != seedCommand {
		t.Fatalf("command --input - = %d %q", code, out)
	}

	// Verify with the server's key, a pinned key (flag and file), an
	// older tree size.
	ck, err := svc.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out = ok(t, url, "verify", inv1)
	mustContain(t, "verify", out, "inv_ID:      "+inv1+" (key my-cli-tool-v1, seq 1)\n", "entry_hash:  "+rec.EntryHash,
		"leaf_index:  0\n", "tree_size:   2\n", "root_hash:   "+ck.RootHash, "checkpoint:  origin "+svc.Origin()+", signed by ",
		"key:         "+svc.VerifierKey()+" (the server's own", "\nverified\n")
	v := decode[map[string]any](t, ok(t, url, "verify", inv1, "--key", svc.VerifierKey(), "--json"))
	if v["verified"] != true || v["inv_ID"] != inv1 || v["seq"] != 1.0 || v["tree_size"] != 2.0 || v["root_hash"] != ck.RootHash ||
		v["origin"] != svc.Origin() || v["key"] != svc.VerifierKey() || v["pinned"] != true || v["error"] != nil {
		t.Fatalf("verify --key --json: %v", v)
	}
	keyFile := writeFile(t, dir, "ledger.pub", svc.VerifierKey()+"\n")
	mustContain(t, "verify --key-file", ok(t, url, "verify", inv2, "--key-file", keyFile), "(pinned)\n", "leaf_index:  1\n", "\nverified\n")
	v = decode[map[string]any](t, ok(t, url, "verify", inv1, "--tree-size", "1", "--key-file", keyFile, "--json"))
	if v["verified"] != true || v["tree_size"] != 1.0 || v["root_hash"] == ck.RootHash {
		t.Fatalf("verify --tree-size 1: %v", v)
	}

	// A different pinned key: a checkpoint the server signed does not
	// open with it.
	_, otherKey, err := note.GenerateKey(rand.Reader, svc.Origin())
	if err != nil {
		t.Fatal(err)
	}
	out = fails(t, url, "receipt "+inv1+" does not verify", "verify", inv1, "--key", otherKey)
	if out != "" {
		t.Fatalf("a failed verify printed %q", out)
	}
	code, out, _ := asmpRun(t, url, "", "verify", inv1, "--key", otherKey, "--json")
	v = decode[map[string]any](t, out)
	if code != 1 || v["verified"] != false || !strings.Contains(v["error"].(string), "checkpoint signature") || v["pinned"] != true {
		t.Fatalf("verify with another key (%d): %v", code, v)
	}

	// A tampering server: one byte of the record body changed.
	proxy := tamperingProxy(t, url)
	mustContain(t, "tampered receipt", ok(t, proxy, "receipt", inv1), "command:     mytoop\n")
	fails(t, proxy, "does not match its content", "verify", inv1)
	fails(t, proxy, "does not match its content", "verify", inv1, "--key", svc.VerifierKey())
	// ... whose other answers are genuine.
	mustContain(t, "verify through the proxy", ok(t, proxy, "verify", inv2), "\nverified\n")
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// tamperingProxy forwards to target, changing the first "mytool" in the
// record answers (GET /api/dispatch?receipt=…) to "mytoop".
func tamperingProxy(t *testing.T, target string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if r.URL.Path == "/api/dispatch" && r.URL.Query().Get("receipt") != "" {
			if i := bytes.Index(b, []byte("mytool")); i >= 0 && bytes.Contains(b, []byte(`"seq":1,`)) {
				b[i+5] = 'p'
			}
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// Error paths print the server's hint (or a local one) and exit 1; with
// --json the error object is on stdout.
func TestOIPErrors(t *testing.T) {
	url, _ := oipServer(t, false)
	dir := t.TempDir()
	seedFile := writeFile(t, dir, "seed.json", seedRequest)
	ok(t, url, "dispatch", seedFile)

	// Unknown receipt, key.
	fails(t, url, `No ledger record has the inv_ID "inv_nope"`, "receipt", "inv_nope")
	code, out, _ := asmpRun(t, url, "", "receipt", "inv_nope", "--json")
	e := decode[map[string]map[string]any](t, out)["error"]
	if code != 1 || e["status"] != 404.0 || e["code"] != "not_found" || !strings.Contains(e["hint"].(string), "inv_nope") {
		t.Fatalf("receipt --json of an unknown inv_ID (%d): %v", code, e)
	}
	fails(t, url, "no-such-key", "history", "no-such-key")
	fails(t, url, `No ledger record has the inv_ID "inv_nope"`, "verify", "inv_nope")
	code, out, _ = asmpRun(t, url, "", "verify", "inv_nope", "--json")
	if v := decode[map[string]any](t, out); code != 1 || v["verified"] != false || !strings.Contains(v["error"].(string), "inv_nope") {
		t.Fatalf("verify --json of an unknown inv_ID (%d): %v", code, v)
	}

	// Invalid rows: the server's hint names the field.
	bad := strings.Replace(seedRequest, `"short_alias": "-v"`, `"short_alias": "-verbose"`, 1)
	badFile := writeFile(t, dir, "bad.json", bad)
	fails(t, url, "flags[1].short_alias", "dispatch", badFile)
	code, out, _ = asmpRun(t, url, "", "dispatch", badFile, "--json")
	e = decode[map[string]map[string]any](t, out)["error"]
	if code != 1 || e["status"] != 400.0 || e["field"] != "flags[1].short_alias" {
		t.Fatalf("dispatch --json of an invalid row (%d): %v", code, e)
	}
	fails(t, url, "flags[1].short_alias", "command", badFile, "--input", seedInput) // offline, same rule
	fails(t, url, "bad.json is not a valid directory row", "command", badFile)
	noCommand := writeFile(t, dir, "nocommand.json", `{"key": "k1", "body": {"type": "directory_row"}}`)
	fails(t, url, "command is required", "dispatch", noCommand)
	fails(t, url, "command is required", "command", noCommand)

	// Malformed dispatch files.
	fails(t, url, "not valid JSON", "dispatch", writeFile(t, dir, "broken.json", `{"key": "k1", "body": {`))
	bodyOnly := writeFile(t, dir, "body.json", `{"type": "directory_row", "command": "x"}`)
	fails(t, url, "give its key with --key K", "dispatch", bodyOnly)
	fails(t, url, "drop --key", "dispatch", seedFile, "--key", "k2")
	fails(t, url, "not valid JSON", "dispatch", writeFile(t, dir, "broken2.json", `{"type": "directory_row",`), "--key", "k2")
	fails(t, url, "no such file", "dispatch", filepath.Join(dir, "missing.json"))
	if code, out, errOut := asmpRun(t, url, `{"key": "piped", "body": {"type": "directory_row", "command": "x"}}`, "dispatch", "-"); code != 0 || !strings.Contains(out, "object_key:  piped\n") {
		t.Fatalf("dispatch - (%d): %s%s", code, out, errOut)
	}
	fails(t, url, "the known types are directory_row and invocation", "dispatch", writeFile(t, dir, "unknowntype.json", `{"key": "k3", "body": {"type": "widget"}}`))

	// Bad input to command, online and offline: the hint names the key.
	for _, arg := range []string{"my-cli-tool-v1", seedFile} {
		fails(t, url, `"input_file"`, "command", arg, "--input", `{"input_file": 5}`)
		fails(t, url, `"input_file"`, "command", arg, "--input", `{"verbose": true}`)
		fails(t, url, `"colour"`, "command", arg, "--input", `{"input_file": "a", "colour": "red"}`)
		fails(t, url, "--input must be a JSON object", "command", arg, "--input", `[1]`)
	}
	fails(t, url, `No directory row has the key "no-such-row"`, "command", "no-such-row")
	fails(t, url, "no such file", "command", "./missing-row.json")
	// Without --server or ASMP_URL the commands go to a bare asmp serve's
	// address (TestServerRule); here a closed port stands for it.
	fails(t, "http://127.0.0.1:1", "cannot reach the ASMP server at http://127.0.0.1:1", "rows")
	fails(t, "http://127.0.0.1:1", "cannot reach the ASMP server at http://127.0.0.1:1", "receipt", "inv_01JB4T3E6W8Y2Q5ZC0M1N9K7PX")
	// --server wins over $ASMP_URL.
	if out := ok(t, "http://127.0.0.1:1", "command", "my-cli-tool-v1", "--server", url, "--input", seedInput); out != seedCommand {
		t.Fatalf("command --server = %q", out)
	}

	// Verify's own flags.
	fails(t, url, "not a note verifier key", "verify", "inv_x", "--key", "garbage")
	fails(t, url, "empty", "verify", "inv_x", "--key-file", writeFile(t, dir, "empty.pub", "\n"))
	fails(t, url, "none of the others can be", "verify", "inv_x", "--key", "a", "--key-file", "b")
	inv := decode[oip.History](t, ok(t, url, "history", "my-cli-tool-v1", "--json")).Records[0].InvID
	fails(t, url, "tree_size must be between", "verify", inv, "--tree-size", "99")
}

// rows pages with --limit and --after and follows every page with --all.
func TestOIPRowsPaging(t *testing.T) {
	url, svc := oipServer(t, false)
	keys := []string{"a-row", "b-row", "c-row"}
	for _, k := range keys {
		if _, err := svc.Dispatch(context.Background(), k, json.RawMessage(`{"type":"directory_row","command":"echo","description":"line one\nline two"}`)); err != nil {
			t.Fatal(err)
		}
	}
	out := ok(t, url, "rows", "--limit", "2")
	mustContain(t, "rows --limit 2", out, "a-row", "b-row", "line one line two", "More: asmp rows --after b-row (or --all)\n")
	if strings.Contains(out, "c-row") {
		t.Fatalf("page 1:\n%s", out)
	}
	out = ok(t, url, "rows", "--limit", "2", "--after", "b-row")
	if !strings.Contains(out, "c-row") || strings.Contains(out, "a-row") || strings.Contains(out, "More:") {
		t.Fatalf("page 2:\n%s", out)
	}
	page := decode[oip.DirectoryPage](t, ok(t, url, "rows", "--limit", "1", "--json"))
	if len(page.Rows) != 1 || page.Next != "a-row" {
		t.Fatalf("rows --limit 1 --json: %+v", page)
	}
	page = decode[oip.DirectoryPage](t, ok(t, url, "rows", "--limit", "1", "--all", "--json"))
	if len(page.Rows) != 3 || page.Rows[2].Key != "c-row" || page.Next != "" {
		t.Fatalf("rows --all --json: %+v", page)
	}
	if out := ok(t, url, "rows", "--after", "c-row"); out != "No directory rows.\n" {
		t.Fatalf("rows after the last: %q", out)
	}
	fails(t, url, "limit must be a positive", "rows", "--limit", "-1")
}

// receipt shows invocations: the command, and for an executed attempt the
// outcome of its result record; dispatch exits like invoke.
func TestOIPReceiptInvocations(t *testing.T) {
	url, svc := oipServer(t, true)
	if _, err := svc.Dispatch(context.Background(), "say", json.RawMessage(`{"type":"directory_row","command":"echo","args":[{"name":"text","type":"string","required":true}]}`)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	// Executed: the receipt is the result's and carries the outcome.
	run := writeFile(t, dir, "run.json", `{"key": "say-1", "body": {"type": "invocation", "object_key": "say", "input": {"text": "hello"}, "execute": true}}`)
	out := ok(t, url, "dispatch", run)
	mustContain(t, "executed dispatch", out, "object_key:  say-1\n", "outcome:     succeeded, exit code 0, ", "stdout:      6 bytes, sha256 ", "  | hello\n")
	h := decode[oip.History](t, ok(t, url, "history", "say-1", "--json"))
	if len(h.Records) != 2 || h.Records[1].ResultOf != h.Records[0].InvID {
		t.Fatalf("history: %+v", h)
	}
	attempt, result := h.Records[0].InvID, h.Records[1].InvID
	mustContain(t, "history", ok(t, url, "history", "say-1"), "invocation  ", "echo hello", "invocation_result", "succeeded")

	// The attempt: its command and, from the key's history, its outcome.
	out = ok(t, url, "receipt", attempt)
	mustContain(t, "attempt receipt", out, "type:        invocation\n", "row:         say (version inv_", `input:       {"text":"hello"}`,
		"command:     echo hello   [exec]\n", "execute:     true\n", "result:      "+result+"\n", "outcome:     succeeded, exit code 0", "  | hello\n")
	// The result: its attempt's command and its outcome.
	out = ok(t, url, "receipt", result)
	mustContain(t, "result receipt", out, "type:        invocation_result\n", "result_of:   "+attempt+"\n", "supersedes:  "+attempt+"\n",
		"command:     echo hello   [exec]\n", "outcome:     succeeded")

	// A replay links both ways; not executed, it shows the command only.
	replay := writeFile(t, dir, "replay.json", `{"key": "say-2", "body": {"type": "invocation", "object_key": "say", "input": {"text": "hi; rm -rf /"}, "replay_of": "`+attempt+`"}}`)
	out = ok(t, url, "dispatch", replay, "--json")
	rc := decode[oip.Receipt](t, out)
	out = ok(t, url, "receipt", rc.InvID)
	mustContain(t, "replay receipt", out, "replay_of:   "+attempt+"\n", "command:     echo 'hi; rm -rf /'   [exec]\n", "execute:     false\n")
	if strings.Contains(out, "outcome:") || strings.Contains(out, "result:") {
		t.Fatalf("an unexecuted invocation shows an outcome:\n%s", out)
	}
	mustContain(t, "replayed attempt", ok(t, url, "receipt", attempt), "replayed_by: "+rc.InvID+"\n")

	// Refused (invalid input): recorded, shown, exit 3 as asmp invoke.
	refused := writeFile(t, dir, "refused.json", `{"type": "invocation", "object_key": "say", "input": {}, "execute": true}`)
	code, out, errOut := asmpRun(t, url, "", "dispatch", refused, "--key", "say-3")
	if code != 3 || !strings.Contains(out, "outcome:     refused\n") || !strings.Contains(out, `reason:      The input does not fit the row`) || !strings.Contains(errOut, "refused") {
		t.Fatalf("refused dispatch (%d):\n%s\n%s", code, out, errOut)
	}
	// Verify works for invocation records too.
	mustContain(t, "verify result", ok(t, url, "verify", result, "--key", svc.VerifierKey()), "\nverified\n")
}

// The real binary: the seed's row dispatched to asmp serve, its command
// built offline with no server configured, and its receipt verified
// against the key the server logs.
func TestOIPBinary(t *testing.T) {
	bin := buildASMP(t)
	url := serveASMP(t, bin)
	dir := t.TempDir()
	seedFile := writeFile(t, dir, "seed.json", seedRequest)
	run := func(env []string, args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, errOut, err := run([]string{"ASMP_URL=" + url}, "dispatch", seedFile, "--json")
	if err != nil {
		t.Fatalf("dispatch: %v\n%s", err, errOut)
	}
	rc := decode[oip.Receipt](t, out)

	out, errOut, err = run(nil, "command", seedFile, "--input", seedInput)
	if err != nil || out != seedCommand {
		t.Fatalf("offline command: %v %q\n%s", err, out, errOut)
	}

	resp, err := http.Get(url + "/api/ledger/key")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out, errOut, err = run([]string{"ASMP_URL=" + url}, "verify", rc.InvID, "--key", strings.TrimSpace(string(key)))
	if err != nil || !strings.HasSuffix(out, "\nverified\n") {
		t.Fatalf("verify: %v\n%s\n%s", err, out, errOut)
	}
	_, otherKey, _ := note.GenerateKey(rand.Reader, "asmp.dev/ledger")
	_, errOut, err = run([]string{"ASMP_URL=" + url}, "verify", rc.InvID, "--key", otherKey)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut, "does not verify") {
		t.Fatalf("verify with another key: %v\n%s", err, errOut)
	}
}
