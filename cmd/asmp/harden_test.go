package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// raw sends body as is (no JSON encoding, no Content-Type unless given in
// headers) and returns the answer.
func (p *proc) raw(method, path, body string, headers ...string) response {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

// wire writes a request as raw bytes on a fresh connection and returns
// the answer: for what net/http's client would clean up first.
func (p *proc) wire(request string) response {
	p.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		p.t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

// runAsmp runs the binary with args to its end (at most 20 s) and returns
// its combined output.
func runAsmp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	return string(out), err
}

// errorOf checks r is a JSON error with status and a hint, and returns the hint.
func errorOf(t *testing.T, r response, status int) string {
	t.Helper()
	m := jsonOf(t, r, status)
	h, _ := m["hint"].(string)
	if h == "" {
		t.Fatalf("status %d without a hint: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q: %s", ct, r.body)
	}
	return h
}

// A web page the operator visits cannot drive the server: a cross-site
// POST (simple text/plain, foreign Origin, Sec-Fetch-Site: cross-site) is
// refused, and DNS rebinding meets the Host allowlist; same-origin
// requests (the console at /console/), clients without an Origin, and
// GETs from links still work.
func TestBrowsersCannotDriveTheServer(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	json := []string{"Content-Type", "application/json"}

	// A text/plain form post: no preflight in a browser, so refused here.
	h := errorOf(t, p.raw("POST", "/runs", `{"workflow_id":"config-wizard-v1"}`, "Content-Type", "text/plain"), 415)
	if !strings.Contains(h, "curl --json") {
		t.Fatalf("415 hint shows no curl --json: %q", h)
	}
	errorOf(t, p.raw("POST", "/runs", `{}`), 415) // a body without Content-Type
	// An empty body needs no Content-Type: it is {}.
	frameOf(t, p.raw("POST", "/runs", ""), 201)
	// application/json with parameters, as some clients send it.
	frameOf(t, p.raw("POST", "/runs", `{}`, "Content-Type", "application/json; charset=utf-8"), 201)

	// Foreign origins: 403 on unsafe methods, GET stays open.
	for _, hd := range [][]string{
		{"Origin", "http://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"},
	} {
		h := errorOf(t, p.raw("POST", "/runs", `{}`, append(hd, json...)...), 403)
		if !strings.Contains(h, "--allow-origin") {
			t.Fatalf("403 hint does not name --allow-origin: %q", h)
		}
		errorOf(t, p.raw("POST", "/api/dispatch", `{"key":"k","body":{"type":"note"}}`, append(hd, json...)...), 403)
		frameOf(t, p.raw("GET", "/", "", hd...), 200)
	}
	// The console: same origin, application/json.
	own := p.url
	frameOf(t, p.raw("POST", "/runs", `{}`, "Origin", own, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"), 201)
	frameOf(t, p.raw("POST", "/runs", `{}`, "Origin", own, "Content-Type", "application/json"), 201)

	// DNS rebinding: the page's Origin matches its Host, which is not ours.
	rebound := "rebind.example:" + own[strings.LastIndex(own, ":")+1:]
	h = errorOf(t, p.raw("POST", "/runs", `{}`, "Host", rebound, "Origin", "http://"+rebound, "Content-Type", "application/json"), 421)
	if !strings.Contains(h, "--public-url") {
		t.Fatalf("421 hint: %q", h)
	}
	errorOf(t, p.raw("GET", "/", "", "Host", rebound), 421)
	for _, host := range []string{"127.0.0.1.example", "localhost.example:8000", "10.0.0.1", "[::2]:8000"} {
		errorOf(t, p.raw("GET", "/", "", "Host", host), 421)
	}
	for _, host := range []string{"localhost", "localhost:8000", "127.0.0.1:1", "127.0.0.2:8000", "[::1]:8000", "[::1]", "LOCALHOST"} {
		frameOf(t, p.raw("GET", "/", "", "Host", host), 200)
	}

	// --allow-origin admits a deliberate browser client; --public-url
	// names the address clients use: its host (any port) and, on
	// loopback, the loopback names are answered, no other Host.
	q := serve(t, "--db", ":memory:", "--allow-origin", "https://console.example", "--public-url", "https://asmp.example")
	frameOf(t, q.raw("POST", "/runs", `{}`, "Origin", "https://console.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"), 201)
	frameOf(t, q.raw("POST", "/runs", `{}`, "Origin", "https://asmp.example", "Content-Type", "application/json"), 201)
	errorOf(t, q.raw("POST", "/runs", `{}`, "Origin", "https://other.example", "Content-Type", "application/json"), 403)
	for _, host := range []string{"asmp.example", "ASMP.example:443", "asmp.example.", "localhost:8000", "127.0.0.1"} {
		frameOf(t, q.raw("GET", "/", "", "Host", host), 200)
	}
	// DNS rebinding with a public URL: the page's Host and Origin match
	// each other, not the server.
	h = errorOf(t, q.raw("POST", "/runs", `{}`, "Host", "evil.example", "Origin", "http://evil.example", "Content-Type", "application/json"), 421)
	if !strings.Contains(h, "asmp.example") || !strings.Contains(h, "--public-url") {
		t.Fatalf("421 hint with a public URL: %q", h)
	}
	for _, host := range []string{"evil.example", "asmp.internal:8000", "asmp.example.evil.example", "10.0.0.1"} {
		errorOf(t, q.raw("GET", "/", "", "Host", host), 421)
	}
	// Probes come by address: health checks answer any Host.
	if r := q.raw("GET", "/healthz", "", "Host", "10.0.0.1:8000"); r.status != 200 {
		t.Fatalf("/healthz with another Host: %d %s", r.status, r.body)
	}

	// Behind a trusted proxy the host checked is the one the client asked
	// the proxy for.
	px := serve(t, "--db", ":memory:", "--public-url", "https://asmp.example", "--trust-proxy", "127.0.0.1/32,::1/128")
	frameOf(t, px.raw("GET", "/", "", "X-Forwarded-Host", "asmp.example"), 200)
	errorOf(t, px.raw("POST", "/runs", `{}`, "X-Forwarded-Host", "evil.example", "Content-Type", "application/json"), 421)

	if out, err := runAsmp(t, "serve", "--db", ":memory:", "--public-url", "asmp.example"); err == nil || !strings.Contains(out, "--public-url") {
		t.Fatalf("serve with a public URL without scheme: %v %s", err, out)
	}
}

// The requests of the reference clients (the TypeScript client's fetch
// and CLRUN: JSON bodies sent as application/json, empty bodies without a
// Content-Type, Accept: application/json) pass every check, through a
// whole run.
func TestReferenceClientRequestsStillWork(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	ts := []string{"Content-Type", "application/json", "Accept", "application/json", "User-Agent", "node", "Sec-Fetch-Mode", "cors"}
	f := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"config-wizard-v1"}`, ts...), 201)
	// CLRUN: an empty POST for an action without expects, then a JSON one.
	frameOf(t, p.raw("POST", "/runs/"+f.RunID+"/transitions/start", "", "Accept", "application/json", "User-Agent", "clrun"), 200)
	frameOf(t, p.raw("POST", "/runs/"+f.RunID+"/transitions/save", `{"value":"blue"}`, "Content-Type", "application/json", "User-Agent", "clrun"), 200)
	if f := frameOf(t, p.raw("POST", "/runs/"+f.RunID+"/transitions/confirm", `{}`, ts...), 200); f.Status != "completed" {
		t.Fatalf("after confirm: %+v", f)
	}
}

// Routing errors that net/http words in plain text are JSON with a hint:
// a non-canonical path ("..", "//") and headers over the limit; as are
// invalid UTF-8 bodies and a javascript: source_url.
func TestEveryErrorIsJSON(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	for _, path := range []string{"/runs/../workflows", "//workflows", "/runs/./x", "/api//directory"} {
		r := p.wire("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		if h := errorOf(t, r, 400); !strings.Contains(h, "canonical") {
			t.Fatalf("GET %s: %q", path, h)
		}
	}
	if h := errorOf(t, p.raw("GET", "/api", ""), 404); !strings.Contains(h, "/api/") {
		t.Fatalf("GET /api: %q", h)
	}
	big := strings.Repeat("x", 100<<10)
	if h := errorOf(t, p.raw("GET", "/workflows", "", "X-Big", big), 431); !strings.Contains(h, "limit") {
		t.Fatalf("431 hint: %q", h)
	}
	json := []string{"Content-Type", "application/json"}
	f := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"config-wizard-v1"}`, json...), 201)
	frameOf(t, p.raw("POST", "/runs/"+f.RunID+"/transitions/start", "", json...), 200)
	for _, c := range []struct{ path, body string }{
		{"/runs/" + f.RunID + "/transitions/save", "{\"value\":\"bl\xffue\"}"},
		{"/runs", "{\"data\":{\"a\":\"\xc3\x28\"}}"},
		{"/api/dispatch", "{\"key\":\"note-1\",\"body\":{\"type\":\"note\",\"text\":\"\xff\"}}"},
		{"/mcp", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bl\xffue\",\"version\":\"1\"}}}"},
	} {
		// (Accept as an MCP client sends it; the other routes ignore it.)
		if h := errorOf(t, p.raw("POST", c.path, c.body, append(json, "Accept", "application/json, text/event-stream")...), 400); !strings.Contains(h, "UTF-8") {
			t.Fatalf("POST %s with invalid UTF-8: %q", c.path, h)
		}
	}
	if f := frameOf(t, p.do("GET", "/runs/"+f.RunID, nil), 200); f.Data["value"] != nil {
		t.Fatalf("invalid UTF-8 reached the run's data: %v", f.Data)
	}
	// The MCP transport's own refusals are JSON with a hint too.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if h := errorOf(t, p.raw("POST", "/mcp", initialize, json...), 400); !strings.Contains(h, "Accept") || !strings.Contains(h, "streamable HTTP") {
		t.Fatalf("POST /mcp without Accept: %q", h)
	}
	if h := errorOf(t, p.raw("POST", "/mcp", initialize, append(json, "Accept", "application/json, text/event-stream", "Mcp-Session-Id", "no-such-session")...), 404); !strings.Contains(h, "session") {
		t.Fatalf("POST /mcp with an unknown session: %q", h)
	}
	if r := p.raw("POST", "/mcp", initialize, append(json, "Accept", "application/json, text/event-stream")...); r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %v %s", r.status, r.header, r.body)
	}
	row := `{"key":"js.row","body":{"type":"directory_row","command":"echo","description":"x","source_url":"javascript:alert(1)"}}`
	if h := errorOf(t, p.raw("POST", "/api/dispatch", row, json...), 400); !strings.Contains(h, "http or https") {
		t.Fatalf("javascript: source_url: %q", h)
	}
}

// Token configuration errors never echo any part of the secret.
func TestTokenErrorsEchoNoSecret(t *testing.T) {
	for _, tok := range []string{
		"Zm9vYmFyYmF6cXV4cXV1eA", // no '=': all of it may be the secret
		"Zm9v+/YmFy=YmF6cXV4cXV1eA==",
		"ci=0123456789abcdef:reed", // a mistyped scope: refused, the secret not shown
	} {
		out, err := runAsmp(t, "serve", "--db", ":memory:", "--addr", "127.0.0.1:0", "--token", tok)
		if err == nil || strings.Contains(out, "listening on") { // a server that started runs until runAsmp's timeout kills it
			t.Fatalf("--token %q accepted:\n%s", tok, out)
		}
		for _, part := range []string{"Zm9v", "YmFy", "0123456789"} {
			if strings.Contains(tok, part) && strings.Contains(out, part) {
				t.Fatalf("--token %q: the error shows %q:\n%s", tok, part, out)
			}
		}
		if !strings.Contains(out, "token") {
			t.Fatalf("--token %q: no error about the token:\n%s", tok, out)
		}
	}
}

// --trust-proxy takes CIDRs: behind the proxy, the client is the
// rightmost X-Forwarded-For hop outside them, so a client cannot pick its
// own key by prepending entries; the bare old form is refused.
func TestTrustProxyTakesTheRightmostUntrustedHop(t *testing.T) {
	out, err := runAsmp(t, "serve", "--db", ":memory:", "--addr", "127.0.0.1:0", "--trust-proxy")
	if err == nil || !strings.Contains(out, "--trust-proxy 127.0.0.1/32") {
		t.Fatalf("bare --trust-proxy: %v\n%s", err, out)
	}
	out, err = runAsmp(t, "serve", "--db", ":memory:", "--addr", "127.0.0.1:0", "--trust-proxy", "wf.yaml")
	if err == nil || !strings.Contains(out, "--trust-proxy 127.0.0.1/32") {
		t.Fatalf("--trust-proxy wf.yaml: %v\n%s", err, out)
	}
	p := serve(t, "--db", ":memory:", "--trust-proxy", "127.0.0.1/32", "--rate-limit", "0.001", "--rate-burst", "2")
	// The proxy appends the real client, 192.0.2.7; the client made up the rest.
	for i := range 2 {
		frameOf(t, p.raw("GET", "/", "", "X-Forwarded-For", fmt.Sprintf("10.9.9.%d, 192.0.2.7", i)), 200)
	}
	r := p.raw("GET", "/", "", "X-Forwarded-For", "10.9.9.99, 192.0.2.7")
	errorOf(t, r, 429)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Another client behind the same proxy has its own budget.
	frameOf(t, p.raw("GET", "/", "", "X-Forwarded-For", "192.0.2.8"), 200)
	// The proxy's own headers are believed; a peer outside the CIDRs is not a proxy.
	f := frameOf(t, p.raw("GET", "/", "", "X-Forwarded-For", "192.0.2.9", "X-Forwarded-Host", "asmp.example", "X-Forwarded-Proto", "https"), 200)
	if f.ResourceURL != "https://asmp.example" {
		t.Fatalf("behind a trusted proxy: %s", f.ResourceURL)
	}
	q := serve(t, "--db", ":memory:", "--trust-proxy", "10.0.0.0/8")
	if f := frameOf(t, q.raw("GET", "/", "", "X-Forwarded-Host", "evil.example"), 200); strings.Contains(f.ResourceURL, "evil") {
		t.Fatalf("an untrusted peer's X-Forwarded-Host was used: %s", f.ResourceURL)
	}
}

// Guessing tokens is slow even with --rate-limit off: after 10 failures
// an address gets 429 with Retry-After, before any token is compared (the
// right token too), while other requests of healthy clients are not
// counted.
func TestTokenGuessingIsLimited(t *testing.T) {
	p := serve(t, "--db", ":memory:", "--token", "admin="+adminSecret, "--rate-limit", "0")
	frameOf(t, p.raw("GET", "/", "", bearer(adminSecret)...), 200)
	for i := range 10 {
		if r := p.raw("GET", "/", "", bearer(fmt.Sprintf("guess-%d-0123456789", i))...); r.status != 401 {
			t.Fatalf("guess %d: %d %s", i, r.status, r.body)
		}
	}
	r := p.raw("GET", "/", "", bearer("guess-10-0123456789")...)
	if h := errorOf(t, r, 429); !strings.Contains(h, "failed authentications") || r.header.Get("Retry-After") == "" {
		t.Fatalf("11th guess: %q, Retry-After %q", h, r.header.Get("Retry-After"))
	}
	errorOf(t, p.raw("GET", "/", "", bearer(adminSecret)...), 429) // not even compared
	jsonOf(t, p.raw("GET", "/healthz", ""), 200)
}

// Other clients' failures never lock out a valid token sent as
// NAME:SECRET, the form with a failure budget of its own (per token and
// address): ten bad tokens from the address leave it working. Guessing
// a named token's secret is bounded by that budget, and spending it
// locks out neither the address's other tokens nor the same token from
// elsewhere.
func TestFailuresOfOthersDoNotLockOutANamedToken(t *testing.T) {
	const runnerSecret = "runner-secret-0123456789"
	p := serve(t, "--db", ":memory:", "--token", "admin="+adminSecret, "--token", "runner="+runnerSecret+":read,runs",
		"--rate-limit", "0", "--trust-proxy", "127.0.0.1/32,::1/128")
	for i := range 10 {
		errorOf(t, p.raw("GET", "/", "", bearer(fmt.Sprintf("guess-%d-0123456789", i))...), 401)
	}
	h := errorOf(t, p.raw("GET", "/", "", bearer(adminSecret)...), 429)
	if !strings.Contains(h, "NAME:SECRET") {
		t.Fatalf("the address's 429 does not say how to avoid it: %q", h)
	}
	// The named form gets in; the secret-only form of the same token is
	// the address's (spent) budget.
	frameOf(t, p.raw("GET", "/", "", bearer("admin:"+adminSecret)...), 200)
	frameOf(t, p.raw("GET", "/", "", bearer("runner:"+runnerSecret)...), 200)
	// A name's secret is compared with that token's only.
	errorOf(t, p.raw("GET", "/", "", bearer("runner:"+adminSecret)...), 401)

	// Guessing admin's secret: ten failures, then 429 for admin from
	// this address, before its secret is compared.
	for i := range 10 {
		errorOf(t, p.raw("GET", "/", "", bearer(fmt.Sprintf("admin:guess-%d-0123456789", i))...), 401)
	}
	h = errorOf(t, p.raw("GET", "/", "", bearer("admin:guess-10-0123456789")...), 429)
	if !strings.Contains(h, `"admin"`) {
		t.Fatalf("the named token's 429: %q", h)
	}
	errorOf(t, p.raw("GET", "/", "", bearer("admin:"+adminSecret)...), 429)
	// Neither the address's other tokens nor admin elsewhere are locked out.
	frameOf(t, p.raw("GET", "/", "", bearer("runner:"+runnerSecret)...), 200)
	frameOf(t, p.raw("GET", "/", "", append(bearer("admin:"+adminSecret), "X-Forwarded-For", "192.0.2.1")...), 200)
	// An unknown name is no budget of its own: it is the address's.
	errorOf(t, p.raw("GET", "/", "", bearer("nobody:"+adminSecret)...), 429)
}

// One validation order for transitions: 404 unknown run → 400 malformed
// If-Match → 403 action not offered (even with a bad body and a stale
// If-Match) → 400 body not an object or not matching expects → 409 stale
// If-Match.
func TestTransitionValidationOrder(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	json := []string{"Content-Type", "application/json"}
	unknown := "/runs/0190a0f0-0000-7000-8000-000000000000/transitions/start"
	errorOf(t, p.raw("POST", unknown, `[1]`, append(json, "If-Match", "bogus")...), 404)
	f := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"config-wizard-v1"}`, json...), 201)
	first := p.do("GET", "/runs/"+f.RunID, nil).header.Get("ETag")
	frameOf(t, p.raw("POST", "/runs/"+f.RunID+"/transitions/start", "", json...), 200)
	tr := func(action string) string { return "/runs/" + f.RunID + "/transitions/" + action }
	// Malformed If-Match on an action not offered: the If-Match first.
	if h := errorOf(t, p.raw("POST", tr("confirm"), `[1]`, append(json, "If-Match", "bogus")...), 400); !strings.Contains(h, "If-Match") {
		t.Fatalf("malformed If-Match: %q", h)
	}
	// Not offered: 403 with a stale If-Match and a bad body both.
	for _, body := range []string{`{}`, `[1]`, `{"value": 3}`} {
		if h := errorOf(t, p.raw("POST", tr("confirm"), body, append(json, "If-Match", first)...), 403); !strings.Contains(h, "confirm") {
			t.Fatalf("not offered, body %s: %q", body, h)
		}
	}
	// Offered with a stale If-Match: a bad body is 400, a good one 409.
	errorOf(t, p.raw("POST", tr("save"), `[1]`, append(json, "If-Match", first)...), 400)
	errorOf(t, p.raw("POST", tr("save"), `{"value": 3}`, append(json, "If-Match", first)...), 400)
	errorOf(t, p.raw("POST", tr("save"), `{"value": "blue"}`, append(json, "If-Match", first)...), 409)
	frameOf(t, p.raw("POST", tr("save"), `{"value": "blue"}`, json...), 200)

	// A guard that refuses is a 403 too, before a bad body or a stale If-Match.
	e := frameOf(t, p.raw("POST", "/runs", `{"workflow_id":"expense-approval-v1"}`, json...), 201)
	submitted := frameOf(t, p.raw("POST", "/runs/"+e.RunID+"/transitions/submit", `{"amount": 99999, "description": "a car"}`, json...), 200)
	if submitted.State != "REVIEW" {
		t.Fatalf("submit: %+v", submitted)
	}
	for _, body := range []string{`[1]`, `{"amount": "x"}`} {
		h := errorOf(t, p.raw("POST", "/runs/"+e.RunID+"/transitions/approve", body, append(json, "If-Match", first)...), 403)
		if !strings.Contains(h, "escalate them to finance") {
			t.Fatalf("guard refused, body %s: %q", body, h)
		}
	}
}

// A token with only dispatch cannot change what a workflow runs: its
// version of the row behind a built-in task or tool is recorded refused
// (the reason names the row, its dispatcher and the fix), the task takes
// its failure transition with that reason; a version dispatched by a
// token holding exec runs again; and a workflow that pins a version runs
// that one whoever dispatched a newer one.
func TestOnlyExecHoldersChangeWhatWorkflowsRun(t *testing.T) {
	t.Setenv("ASMP_TOKENS", "admin="+adminSecret+";disp=dispatcher-secret-0123:read,dispatch;runner=runner-secret-01234:read,runs")
	admin, disp, runner := bearer(adminSecret), bearer("dispatcher-secret-0123"), bearer("runner-secret-01234")
	db := filepath.Join(t.TempDir(), "asmp.db")
	execFlags := []string{"--allow-exec", "--exec-allow", "factor", "--exec-allow", "expr", "--exec-dir", t.TempDir()}
	p := serve(t, append([]string{"--db", db}, execFlags...)...)
	multiply := func(p *proc) map[string]any {
		t.Helper()
		id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, runner...), 201).RunID
		frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 6, "b": 7}, runner...), 200)
		frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil, runner...), 200)
		return waitRun(t, p, id, runner, 20*time.Second)
	}
	// The server dispatched the example rows: they run.
	if f := multiply(p); f["state"] != "DONE" {
		t.Fatalf("the server's row: %v", f)
	}
	hist := jsonOf(t, p.do("GET", "/api/dispatch?key=number-facts.multiply&history=true", nil, admin...), 200)["records"].([]any)
	original := hist[0].(map[string]any)
	redefine := func(who []string, description string) string {
		body := original["body"].(map[string]any)
		body["description"] = description
		return jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "number-facts.multiply", "body": body}, who...), 201)["inv_ID"].(string)
	}
	redefine(disp, "redefined without exec")
	f := multiply(p)
	if f["state"] != "FAILED" {
		t.Fatalf("a row version dispatched without exec ran: %v", f)
	}
	id := f["run_id"].(string)
	rec := jsonOf(t, p.do("GET", "/api/dispatch?key=task:"+id+".3:1", nil, admin...), 200)
	o := rec["body"].(map[string]any)["outcome"].(map[string]any)
	reason, _ := o["reason"].(string)
	for _, want := range []string{"number-facts.multiply", `"disp"`, "exec", "row: number-facts.multiply@inv_ID"} {
		if o["class"] != "refused" || !strings.Contains(reason, want) {
			t.Fatalf("task record: %v (want %q in the reason)", o, want)
		}
	}
	// The tool of the same workflow, behind a row redefined without exec.
	body := jsonOf(t, p.do("GET", "/api/dispatch?key=number-facts.factor", nil, admin...), 200)["body"].(map[string]any)
	body["description"] = "factor, redefined"
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "number-facts.factor", "body": body}, disp...), 201)
	tid := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, admin...), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+tid+"/transitions/submit", map[string]any{"a": 6, "b": 7}, admin...), 200)
	res := jsonOf(t, p.do("POST", "/runs/"+tid+"/invoke/factor", map[string]any{"numbers": []int{6}}, admin...), 200)["result"].(map[string]any)
	if o := res["outcome"].(map[string]any); o["class"] != "refused" || !strings.Contains(o["reason"].(string), `"disp"`) {
		t.Fatalf("tool behind a row dispatched without exec: %v", res)
	}
	// A version dispatched by a token holding exec runs.
	redefine(admin, "redefined with exec")
	if f := multiply(p); f["state"] != "DONE" {
		t.Fatalf("a row version dispatched with exec: %v", f)
	}
	redefine(disp, "redefined without exec, again")
	p.kill()

	// A workflow pinning the server's version runs it, whatever is current.
	wf := filepath.Join(t.TempDir(), "pinned.yaml")
	os.WriteFile(wf, []byte(`workflow_id: number-facts-v1
initial_state: SUBMIT
states:
  SUBMIT: {hint: Two numbers.}
  EXPLORE: {hint: Multiply.}
  MULTIPLYING:
    hint: Multiplying.
    task: {row: number-facts.multiply@`+original["inv_ID"].(string)+`, on_success: done, on_failure: failed, output: product}
  DONE: {hint: Done.}
  FAILED: {hint: Failed.}
transitions:
  - {from: SUBMIT, action: submit, to: EXPLORE, expects: {a: integer, b: integer}}
  - {from: EXPLORE, action: multiply, to: MULTIPLYING}
  - {from: MULTIPLYING, action: done, to: DONE}
  - {from: MULTIPLYING, action: failed, to: FAILED}
`), 0o600)
	q := serve(t, append([]string{"--db", db, wf}, execFlags...)...)
	if f := multiply(q); f["state"] != "DONE" || f["data"].(map[string]any)["product"] != 42.0 {
		t.Fatalf("the pinned version: %v", f)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(string(must(os.ReadFile(wf))), "@inv_", "@nope_", 1)), 0o600)
	if out, err := runAsmp(t, "validate", bad); err == nil || !strings.Contains(out, "not an inv_ID") {
		t.Fatalf("a malformed pin: %v\n%s", err, out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An executed program inherits fds 0-2 only: not the listening socket,
// the database or anything else the server holds. `ls /proc/self/fd`
// lists 0, 1, 2 and the directory ls itself opened to read.
func TestExecutedProgramsInheritOnlyStdio(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd here")
	}
	db := filepath.Join(t.TempDir(), "asmp.db")
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", db, "--allow-exec", "--exec-allow", "ls", "--exec-dir", t.TempDir())
	// A descriptor the server inherited without close-on-exec (as from a
	// careless parent): the server closes it for what it executes.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd.ExtraFiles = []*os.File{r}
	p := serveCmd(t, cmd)
	// Streams and a database in use: more descriptors open in the server.
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "fds", "body": map[string]any{
		"type": "directory_row", "command": "ls",
		"args": []map[string]any{{"name": "dir", "type": "string", "required": true}}}}), 201)
	for i := range 3 {
		rc := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": fmt.Sprintf("fds-%d", i), "body": map[string]any{
			"type": "invocation", "object_key": "fds", "input": map[string]any{"dir": "/proc/self/fd"}, "execute": true}}), 201)
		o := rc["outcome"].(map[string]any)
		out := o["stdout"].(map[string]any)["text"].(string)
		if o["class"] != "succeeded" || strings.Fields(out)[0] != "0" || len(strings.Fields(out)) != 4 {
			t.Fatalf("fds of an executed program: %v\n%s", o, out)
		}
	}
}

// replay_of may name the invocation_result a client received from an
// executed invocation: it resolves to the result's attempt. A record that
// is neither is refused with a hint that says so.
func TestReplayOfAResult(t *testing.T) {
	p := serve(t, "--db", ":memory:", "--allow-exec", "--exec-allow", "ls", "--exec-dir", t.TempDir())
	row := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "list", "body": map[string]any{"type": "directory_row", "command": "ls"}}), 201)
	rc := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "list-1", "body": map[string]any{"type": "invocation", "object_key": "list", "execute": true}}), 201)
	result := jsonOf(t, p.do("GET", "/api/dispatch?receipt="+rc["inv_ID"].(string), nil), 200)
	if result["type"] != "invocation_result" {
		t.Fatalf("the receipt of an execution: %v", result)
	}
	again := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "list-2", "body": map[string]any{"type": "invocation", "object_key": "list", "replay_of": rc["inv_ID"]}}), 201)
	rec := jsonOf(t, p.do("GET", "/api/dispatch?receipt="+again["inv_ID"].(string), nil), 200)
	if rec["replay_of"] != result["result_of"] || rec["body"].(map[string]any)["replay_of"] != result["result_of"] {
		t.Fatalf("replay_of %v, want the attempt %v", rec["replay_of"], result["result_of"])
	}
	h := errorOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "list-3", "body": map[string]any{"type": "invocation", "object_key": "list", "replay_of": row["inv_ID"]}}), 400)
	if !strings.Contains(h, "record of type directory_row") || strings.Contains(h, "a invocation") {
		t.Fatalf("replay of a row: %q", h)
	}
}

// The exec directory is the user's own: by default under the user's
// cache (or runtime) directory, created 0700; a directory others may
// write to, a symbolic link, or one owned by another user is refused at
// start; working directories left by executions that died with their
// server are removed at start.
func TestExecDirIsTheUsers(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CACHE_HOME", cache)
	want := filepath.Join(cache, "asmp", "exec")
	// Left by an execution of a server that died (no such process).
	left := filepath.Join(want, "run.999999999.0123456789abcdef")
	os.MkdirAll(left, 0o700)
	os.WriteFile(filepath.Join(left, "f"), []byte("x"), 0o600)
	other := filepath.Join(want, "keep-me")
	os.Mkdir(other, 0o700)
	p := serve(t, "--db", ":memory:", "--allow-exec", "--exec-allow", "pwd")
	st, err := os.Stat(want)
	if err != nil || st.Mode().Perm() != 0o700 || !strings.Contains(p.stderr.String(), "dir="+want) {
		t.Fatalf("default exec dir %s: %v %v\n%s", want, st, err, p.stderr.String())
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("a dead server's working directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a directory that is not a working directory was removed: %v", err)
	}
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "pwd", "body": map[string]any{"type": "directory_row", "command": "pwd"}}), 201)
	rc := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "pwd-1", "body": map[string]any{"type": "invocation", "object_key": "pwd", "execute": true}}), 201)
	if out := rc["outcome"].(map[string]any)["stdout"].(map[string]any)["text"].(string); !strings.HasPrefix(out, want+"/run.") {
		t.Fatalf("an execution ran in %q, not under %s", out, want)
	}

	refused := func(dir, why string) {
		t.Helper()
		out, err := runAsmp(t, "serve", "--db", ":memory:", "--addr", "127.0.0.1:0", "--allow-exec", "--exec-allow", "pwd", "--exec-dir", dir)
		if err == nil || !strings.Contains(out, why) {
			t.Fatalf("--exec-dir %s: %v, want a refusal mentioning %q:\n%s", dir, err, why, out)
		}
	}
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o1777)
	refused(shared, "writable by group or others")
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	refused(link, "symbolic link")
	if os.Getuid() == 0 {
		theirs := filepath.Join(t.TempDir(), "theirs")
		os.Mkdir(theirs, 0o700)
		os.Chown(theirs, 65534, 65534)
		refused(theirs, "owned by uid 65534")
	} else if st, err := os.Stat("/usr"); err == nil && st.Sys().(*syscall.Stat_t).Uid == 0 && st.Mode().Perm()&0o022 == 0 {
		// Not root: a directory of root's is someone else's.
		refused("/usr", "owned by uid 0")
	}
}

// A token without read is refused frames, events, streams and metrics
// (403 naming the scope), over the real binary.
func TestReadScopeGuardsReads(t *testing.T) {
	t.Setenv("ASMP_TOKENS", "admin="+adminSecret+";runs-only=runs-only-secret-0123:runs")
	p := serve(t, "--db", ":memory:")
	runsOnly := bearer("runs-only-secret-0123")
	id := frameOf(t, p.do("POST", "/runs", nil, runsOnly...), 201).RunID
	for _, path := range []string{"/runs/" + id, "/runs/" + id + "/events", "/runs/" + id + "/cli", "/runs/" + id + "/stream", "/metrics", "/workflows", "/api/directory"} {
		if h := errorOf(t, p.do("GET", path, nil, runsOnly...), 403); !strings.Contains(h, `"read" scope`) {
			t.Fatalf("GET %s without read: %q", path, h)
		}
		if strings.HasSuffix(path, "/stream") {
			continue // served, it would not end
		}
		if r := p.do("GET", path, nil, bearer(adminSecret)...); r.status != 200 {
			t.Fatalf("GET %s with read: %d %s", path, r.status, r.body)
		}
	}
}
