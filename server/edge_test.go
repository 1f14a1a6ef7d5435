package server_test

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/examples"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/server"
	"github.com/asmp-dev/asmp/store/memstore"
)

// One secret per scope: each token holds exactly that scope.
var scopeSecrets = map[string]string{
	auth.ScopeRead:     "only-read-secret-0123456789",
	auth.ScopeRuns:     "only-runs-secret-0123456789",
	auth.ScopeDispatch: "only-dispatch-secret-0123456789",
	auth.ScopeExec:     "only-exec-secret-0123456789",
	auth.ScopeAdmin:    "only-admin-secret-0123456789",
}

// edgeEnv is a server with tokens, the OIP ledger on the same edge, and a
// request log.
func edgeEnv(t *testing.T) (*env, *lockedBuf) {
	t.Helper()
	specs := []string{"admin=" + adminSecret}
	for scope, secret := range scopeSecrets {
		specs = append(specs, "only-"+scope+"="+secret+":"+scope)
	}
	tokens, err := auth.NewTokens(specs, "")
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	ledger, err := oip.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	e := start(t, setup{
		newStor: func(*testing.T) storeT { return st },
		opts: &server.Options{Authenticate: tokens.Authenticate, API: ledger.API(),
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	})
	return e, logs
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

// scopeCase is one route of the edge and a request it serves.
type scopeCase struct {
	pattern      string // as the edge registers it
	method, path string // RUN is a fresh run's id, INV a ledger receipt, SCHED a fresh schedule's id
	body         any
	scope        string // the scope the route needs
	header       []string
	stream       bool // the answer is a stream: only its status is read
}

var echoRow = map[string]any{"key": "echo-v1", "body": map[string]any{"type": "directory_row", "command": "echo"}}

// scopeCases lists every route of a server with the OIP ledger.
func scopeCases() []scopeCase {
	const wf = "expense-approval-v1"
	asmp := []scopeCase{
		{pattern: "GET /{$}", method: "GET", path: "/", scope: auth.ScopeRead},
		{pattern: "GET /workflows", method: "GET", path: "/workflows", scope: auth.ScopeRead},
		{pattern: "GET /workflows/{wf}/versions/{version}", method: "GET", path: "/workflows/" + wf + "/versions/" + examples.ExpenseApproval().Version(), scope: auth.ScopeRead},
		{pattern: "POST /workflows/{wf}/migrate", method: "POST", path: "/workflows/" + wf + "/migrate", scope: auth.ScopeAdmin,
			body: map[string]any{"from": examples.ExpenseApproval().Version(), "to": examples.ExpenseApproval().Version(), "dry_run": true}},
		{pattern: "POST /runs", method: "POST", path: "/runs", scope: auth.ScopeRuns, body: map[string]any{"workflow_id": wf}},
		{pattern: "POST /{$}", method: "POST", path: "/", scope: auth.ScopeRuns, body: map[string]any{"workflow_id": wf}},
		{pattern: "GET /runs", method: "GET", path: "/runs", scope: auth.ScopeRead},
		{pattern: "GET /visualize.svg", method: "GET", path: "/visualize.svg?run_id=RUN", scope: auth.ScopeRead},
		{pattern: "GET /runs/{run_id}", method: "GET", path: "/runs/RUN", scope: auth.ScopeRead},
		{pattern: "GET /runs/{run_id}/cli", method: "GET", path: "/runs/RUN/cli", scope: auth.ScopeRead},
		{pattern: "GET /runs/{run_id}/cli.json", method: "GET", path: "/runs/RUN/cli.json", scope: auth.ScopeRead},
		{pattern: "POST /runs/{run_id}/transitions/{action}", method: "POST", path: "/runs/RUN/transitions/submit", scope: auth.ScopeRuns,
			body: map[string]any{"amount": 15, "description": "Taxi"}},
		{pattern: "POST /runs/{run_id}/invoke/{tool}", method: "POST", path: "/runs/RUN/invoke/policy_check", scope: auth.ScopeRuns,
			body: map[string]any{"amount": 15}},
		{pattern: "GET /runs/{run_id}/resources/{path...}", method: "GET", path: "/runs/RUN/resources/policy", scope: auth.ScopeRead},
		{pattern: "GET /runs/{run_id}/events", method: "GET", path: "/runs/RUN/events", scope: auth.ScopeRead},
		{pattern: "GET /runs/{run_id}/stream", method: "GET", path: "/runs/RUN/stream", scope: auth.ScopeRead, stream: true},
		{pattern: "GET /stream", method: "GET", path: "/stream", scope: auth.ScopeRead, stream: true, header: []string{"X-Run-Id", "RUN"}},
		{pattern: "GET /skills/{path...}", method: "GET", path: "/skills/expense/SKILL.md", scope: auth.ScopeRead},
		{pattern: "GET /openapi.json", method: "GET", path: "/openapi.json", scope: auth.ScopeRead},
		{pattern: "GET /visualize", method: "GET", path: "/visualize?run_id=RUN", scope: auth.ScopeRead},
		{pattern: "GET /whoami", method: "GET", path: "/whoami", scope: auth.ScopeRead},
	}
	cases := slices.Clone(asmp)
	for _, c := range asmp {
		m, p, _ := strings.Cut(c.pattern, " ")
		c.pattern = m + " /w/{workflow_id}" + p
		c.path = "/w/" + wf + c.path
		cases = append(cases, c)
	}
	return append(cases,
		scopeCase{pattern: "GET /w/{workflow_id}", method: "GET", path: "/w/" + wf, scope: auth.ScopeRead},
		scopeCase{pattern: "POST /w/{workflow_id}", method: "POST", path: "/w/" + wf, scope: auth.ScopeRuns, body: map[string]any{"workflow_id": wf}},
		scopeCase{pattern: "GET /healthz", method: "GET", path: "/healthz"},
		scopeCase{pattern: "GET /console/", method: "GET", path: "/console/"},
		scopeCase{pattern: "GET /console", method: "GET", path: "/console"}, // redirected to /console/
		scopeCase{pattern: "GET /api/ledger/records", method: "GET", path: "/api/ledger/records", scope: auth.ScopeRead},
		scopeCase{pattern: "GET /readyz", method: "GET", path: "/readyz"},
		scopeCase{pattern: "GET /metrics", method: "GET", path: "/metrics", scope: auth.ScopeRead},
		scopeCase{pattern: "POST /api/dispatch", method: "POST", path: "/api/dispatch", scope: auth.ScopeDispatch, body: echoRow},
		scopeCase{pattern: "GET /api/dispatch", method: "GET", path: "/api/dispatch?receipt=INV", scope: auth.ScopeRead},
		scopeCase{pattern: "GET /api/directory", method: "GET", path: "/api/directory", scope: auth.ScopeRead},
		scopeCase{pattern: "POST /api/commands/{key}", method: "POST", path: "/api/commands/echo-v1", scope: auth.ScopeRead, body: map[string]any{"input": map[string]any{}}},
		scopeCase{pattern: "GET /api/ledger/checkpoint", method: "GET", path: "/api/ledger/checkpoint", scope: auth.ScopeRead},
		scopeCase{pattern: "GET /api/ledger/key", method: "GET", path: "/api/ledger/key", scope: auth.ScopeRead},
		scopeCase{pattern: "GET /api/ledger/proof", method: "GET", path: "/api/ledger/proof?inv_ID=INV", scope: auth.ScopeRead},
		scopeCase{pattern: "GET /api/ledger/consistency", method: "GET", path: "/api/ledger/consistency?from=1", scope: auth.ScopeRead},
		scopeCase{pattern: "POST /schedules", method: "POST", path: "/schedules", scope: auth.ScopeAdmin, body: map[string]any{"workflow_id": wf, "cron": "0 9 * * *"}},
		scopeCase{pattern: "GET /schedules", method: "GET", path: "/schedules", scope: auth.ScopeAdmin},
		scopeCase{pattern: "GET /schedules/{schedule_id}", method: "GET", path: "/schedules/SCHED", scope: auth.ScopeAdmin},
		scopeCase{pattern: "DELETE /schedules/{schedule_id}", method: "DELETE", path: "/schedules/SCHED", scope: auth.ScopeAdmin},
		scopeCase{pattern: "POST /webhooks", method: "POST", path: "/webhooks", scope: auth.ScopeAdmin, body: map[string]any{"url": "https://93.184.215.14/hook", "events": []string{"run.created"}}},
		scopeCase{pattern: "GET /webhooks", method: "GET", path: "/webhooks", scope: auth.ScopeAdmin},
		scopeCase{pattern: "GET /webhooks/{id}", method: "GET", path: "/webhooks/WH", scope: auth.ScopeAdmin},
		scopeCase{pattern: "DELETE /webhooks/{id}", method: "DELETE", path: "/webhooks/WH", scope: auth.ScopeAdmin},
		scopeCase{pattern: "POST /webhooks/{id}/rotate", method: "POST", path: "/webhooks/WH/rotate", scope: auth.ScopeAdmin},
		scopeCase{pattern: "GET /webhooks/{id}/deliveries", method: "GET", path: "/webhooks/WH/deliveries", scope: auth.ScopeAdmin},
		scopeCase{pattern: "GET /webhooks/{id}/deliveries/{delivery_id}", method: "GET", path: "/webhooks/WH/deliveries/DLV", scope: auth.ScopeAdmin},
		scopeCase{pattern: "POST /webhooks/{id}/deliveries/{delivery_id}/redeliver", method: "POST", path: "/webhooks/WH/deliveries/DLV/redeliver", scope: auth.ScopeAdmin},
	)
}

// answer sends c's request to path; of a stream that is served, it reads
// the status only.
func (e *env) answer(c scopeCase, path string, header []string) resp {
	e.t.Helper()
	if !c.stream {
		return e.do(c.method, path, c.body, header...)
	}
	sc := e.openStream(path, header...)
	defer sc.cancel()
	r := resp{status: sc.status, header: sc.header}
	if sc.status != 200 {
		if _, ok := <-sc.lines; ok { // an error answer is one JSON line
			r.body = []byte(<-sc.raw)
		}
	}
	return r
}

// TestEveryRouteChecksItsScope holds every route of the edge (the ASMP
// API at the root and under /w/{workflow_id}, metrics, health checks and
// the OIP ledger) to its scope: a token without it gets 403 with a hint
// naming it; a token with only that scope is served.
func TestEveryRouteChecksItsScope(t *testing.T) {
	e, _ := edgeEnv(t)
	cases := scopeCases()

	// The table is the edge: every route registered is in it, with its scope.
	registered := server.EdgeScopes(e.srv)
	listed := map[string]string{}
	for _, c := range cases {
		listed[c.pattern] = c.scope
	}
	for _, p := range slices.Sorted(maps.Keys(registered)) {
		if s, ok := listed[p]; !ok {
			t.Errorf("route %s (scope %q) is not in the table", p, registered[p])
		} else if s != registered[p] {
			t.Errorf("route %s needs scope %q, the table says %q", p, registered[p], s)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if _, ok := registered[p]; !ok {
			t.Errorf("the table lists %s, which the edge does not serve", p)
		}
	}

	rec := e.do("POST", "/api/dispatch", echoRow, bearer(adminSecret)...)
	if rec.status != 201 {
		t.Fatalf("dispatch: %d %s", rec.status, rec.body)
	}
	inv, _ := rec.json(t)["inv_ID"].(string)
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			run := e.do("POST", "/runs", map[string]any{"workflow_id": "expense-approval-v1"}, bearer(adminSecret)...)
			id, _ := run.json(t)["run_id"].(string)
			var sched string
			if strings.Contains(c.path, "SCHED") {
				sr := e.do("POST", "/schedules", map[string]any{"workflow_id": "expense-approval-v1", "cron": "@daily"}, bearer(adminSecret)...)
				sched, _ = sr.json(t)["schedule_id"].(string)
			}
			var wh, dlv string
			if strings.Contains(c.path, "/WH") {
				wr := e.do("POST", "/webhooks", map[string]any{"url": "https://93.184.215.14/hook", "events": []string{"run.created"}}, bearer(adminSecret)...)
				wh, _ = wr.json(t)["id"].(string)
				e.do("POST", "/runs", map[string]any{"workflow_id": "expense-approval-v1"}, bearer(adminSecret)...)
				dr := e.do("GET", "/webhooks/"+wh+"/deliveries", nil, bearer(adminSecret)...)
				if ds, _ := dr.json(t)["deliveries"].([]any); len(ds) > 0 {
					dlv, _ = ds[0].(map[string]any)["id"].(string)
				}
			}
			path := strings.NewReplacer("RUN", id, "INV", inv, "SCHED", sched, "WH", wh, "DLV", dlv).Replace(c.path)
			header := slices.Clone(c.header)
			for i := range header {
				header[i] = strings.ReplaceAll(header[i], "RUN", id)
			}
			for scope, secret := range scopeSecrets {
				if scope == c.scope {
					continue
				}
				r := e.answer(c, path, append(bearer(secret), header...))
				if c.scope == "" {
					if r.status != 200 {
						t.Errorf("with only %q: %d %s", scope, r.status, r.body)
					}
					continue
				}
				if r.status != 403 {
					t.Errorf("with only %q: %d, want 403: %.200s", scope, r.status, r.body)
					continue
				}
				m := r.json(t)
				if !strings.Contains(r.hint(t), `"`+c.scope+`" scope`) || m["scope"] != c.scope || m["error"] != "forbidden" {
					t.Errorf("with only %q: the 403 does not name the %q scope: %s", scope, c.scope, r.body)
				}
				if strings.HasPrefix(c.path, "/api/") != (m["status"] == "error") {
					t.Errorf("with only %q: status %v in the 403 body (OIP routes only carry \"error\"): %s", scope, m["status"], r.body)
				}
			}
			if c.scope == "" {
				return
			}
			r := e.answer(c, path, append(bearer(scopeSecrets[c.scope]), header...))
			status, body := r.status, string(r.body)
			if status < 200 || status > 299 {
				t.Errorf("with only %q: %d, want it served: %.300s", c.scope, status, body)
			}
		})
	}
}

// A 405 answers in one shape on every route: the Allow header names the
// methods served (HEAD beside GET), the body the error and a hint naming
// them; an OIP route adds its status "error".
func TestMethodNotAllowedIsOneShape(t *testing.T) {
	e, _ := edgeEnv(t)
	for _, c := range []struct {
		path, allow string
		oip         bool
	}{
		{"/runs", "GET, HEAD, POST", false},
		{"/w/expense-approval-v1/runs", "GET, HEAD, POST", false},
		{"/runs/r1", "GET, HEAD", false},
		{"/metrics", "GET, HEAD", false},
		{"/api/dispatch", "GET, HEAD, POST", true},
		{"/api/commands/echo-v1", "POST", true},
		{"/api/ledger/key", "GET, HEAD", true},
	} {
		r := e.do("DELETE", c.path, nil, bearer(adminSecret)...)
		if r.status != 405 || r.header.Get("Allow") != c.allow {
			t.Errorf("DELETE %s: %d, Allow %q; want 405, Allow %q", c.path, r.status, r.header.Get("Allow"), c.allow)
			continue
		}
		if r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("DELETE %s: headers %v", c.path, r.header)
		}
		m := r.json(t)
		keys := []string{"error", "hint"}
		if c.oip {
			keys = append(keys, "status")
		}
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, keys) || m["error"] != "method_not_allowed" {
			t.Errorf("DELETE %s: body %s, want the members %v", c.path, r.body, keys)
		}
		if c.oip && m["status"] != "error" {
			t.Errorf("DELETE %s: status %v", c.path, m["status"])
		}
		if want := "DELETE is not allowed on " + c.path + "; use " + c.allow + "."; r.hint(t) != want {
			t.Errorf("DELETE %s: hint %q, want %q", c.path, r.hint(t), want)
		}
	}
}

// Every request, refused or served, ASMP or OIP, is one line of the same
// access log with its status, route and principal.
func TestErrorsInTheAccessLog(t *testing.T) {
	e, logs := edgeEnv(t)
	reqs := []struct {
		method, path, secret string
		status               int
		route                string
	}{
		{"GET", "/workflows", scopeSecrets[auth.ScopeRead], 200, "GET /workflows"},
		{"POST", "/runs", scopeSecrets[auth.ScopeRead], 403, "POST /runs"},
		{"GET", "/api/directory", scopeSecrets[auth.ScopeDispatch], 403, "GET /api/directory"},
		{"DELETE", "/api/dispatch", adminSecret, 405, "/api/dispatch"},
		{"DELETE", "/workflows", adminSecret, 405, "/workflows"},
		{"GET", "/api/nope", adminSecret, 404, "/api/"},
		{"GET", "/nope", adminSecret, 404, "/"},
		{"GET", "/api/directory", "wrong-secret-0123456789", 401, "unmatched"},
	}
	for i, q := range reqs {
		id := "edge-log-" + string(rune('a'+i))
		if r := e.do(q.method, q.path, nil, append(bearer(q.secret), "X-Request-Id", id)...); r.status != q.status {
			t.Fatalf("%s %s: %d, want %d: %s", q.method, q.path, r.status, q.status, r.body)
		}
	}
	lines := map[string][]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, l)
		}
		if m["msg"] == "request" {
			id, _ := m["request_id"].(string)
			lines[id] = append(lines[id], m)
		}
	}
	for i, q := range reqs {
		id := "edge-log-" + string(rune('a'+i))
		ls := lines[id]
		if len(ls) != 1 {
			t.Errorf("%s %s: %d request lines, want 1", q.method, q.path, len(ls))
			continue
		}
		m := ls[0]
		if m["status"] != float64(q.status) || m["route"] != q.route || m["method"] != q.method || m["path"] != q.path {
			t.Errorf("%s %s: logged %v, want status %d, route %q", q.method, q.path, m, q.status, q.route)
		}
	}
}
