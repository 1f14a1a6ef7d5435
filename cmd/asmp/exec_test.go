package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Secrets of the black-box execution tests: they must reach neither the
// commands' environment, nor the ledger, nor the logs.
const (
	adminSecret  = "s3cret-admin-c4n4ry"
	readerSecret = "s3cret-reader-c4n4ry"
	canary       = "env-c4n4ry-5e11"
)

func jsonOf(t *testing.T, r response, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return m
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

// waitRun polls a run until it leaves processing.
func waitRun(t *testing.T, p *proc, id string, h []string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		f := jsonOf(t, p.do("GET", "/runs/"+id, nil, h...), 200)
		if f["status"] != "processing" {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still processing:\n%s", id, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRowToolsOverRealBinary runs number-facts-v1 on the real binary with
// --allow-exec: the row-bound tool as callers with and without the exec
// scope, the row-bound task, the receipts afterwards and replay links;
// the commands see none of the server's environment, and no secret lands
// in the ledger or the logs.
func TestRowToolsOverRealBinary(t *testing.T) {
	t.Setenv("ASMP_TOKENS", "admin="+adminSecret+";reader="+readerSecret+":read,runs")
	t.Setenv("ASMP_CANARY", canary)
	db := filepath.Join(t.TempDir(), "asmp.db")
	p := serve(t, "--db", db, "--allow-exec", "--exec-allow", "factor", "--exec-allow", "expr", "--exec-allow", "/usr/bin/env", "--exec-dir", t.TempDir())
	admin, reader := bearer(adminSecret), bearer(readerSecret)

	// The example rows were dispatched at start-up.
	dir := jsonOf(t, p.do("GET", "/api/directory", nil, admin...), 200)
	if rows := dir["rows"].([]any); len(rows) != 2 {
		t.Fatalf("directory: %v", dir)
	}

	id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}, admin...), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 123, "b": 1000}, admin...), 200)
	res := jsonOf(t, p.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{1001}}, admin...), 200)["result"].(map[string]any)
	if res["outcome"].(map[string]any)["class"] != "succeeded" || res["stdout"] != "1001: 7 11 13\n" || res["exit_code"] != 0.0 {
		t.Fatalf("tool: %v", res)
	}
	toolInv := res["inv_ID"].(string)
	// A caller without exec of its own: the workflow's row carries the
	// authority (SPEC section 9), so the tool runs.
	res = jsonOf(t, p.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{12}}, reader...), 200)["result"].(map[string]any)
	if o := res["outcome"].(map[string]any); o["class"] != "succeeded" || res["stdout"] != "12: 2 2 3\n" {
		t.Fatalf("tool for a caller without exec: %v", res)
	}

	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil, admin...), 200)
	done := waitRun(t, p, id, admin, 20*time.Second)
	if done["state"] != "DONE" {
		t.Fatalf("after the task: %v\n%s", done, p.stderr.String())
	}
	// The DONE hint names the real product and ledger key, no placeholder.
	if h := done["hint"].(string); !strings.Contains(h, "a * b = 123000 ") || !strings.Contains(h, "asmp history task:"+id+".3:1 shows it") || strings.Contains(h, "RUN_ID") || strings.Contains(h, "{data.") {
		t.Fatalf("DONE hint: %q", h)
	}
	// The task's key: task:RUN.VERSION:ATTEMPT, entered MULTIPLYING at 3.
	hist := jsonOf(t, p.do("GET", "/api/dispatch?key=task:"+id+".3:1&history=true", nil, admin...), 200)["records"].([]any)
	if len(hist) != 2 {
		t.Fatalf("task history: %v", hist)
	}
	attempt := hist[0].(map[string]any)
	result := hist[1].(map[string]any)["body"].(map[string]any)["outcome"].(map[string]any)
	if result["class"] != "succeeded" || result["output"] != 123000.0 || attempt["source"] != "task" {
		t.Fatalf("task: %v / %v", attempt, result)
	}

	// The receipts read back after the fact; a replay links both ways.
	rec := jsonOf(t, p.do("GET", "/api/dispatch?receipt="+toolInv, nil, reader...), 200)
	if rec["type"] != "invocation_result" || rec["result_of"] == nil {
		t.Fatalf("tool receipt: %v", rec)
	}
	rc := jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "again-1", "body": map[string]any{
		"type": "invocation", "object_key": "number-facts.multiply", "input": map[string]any{"a": 123, "b": 1000},
		"execute": true, "replay_of": attempt["inv_ID"]}}, admin...), 201)
	if rc["outcome"].(map[string]any)["output"] != 123000.0 {
		t.Fatalf("replay: %v", rc)
	}
	again := jsonOf(t, p.do("GET", "/api/dispatch?key=again-1&history=true", nil, admin...), 200)["records"].([]any)[0].(map[string]any)
	orig := jsonOf(t, p.do("GET", "/api/dispatch?receipt="+attempt["inv_ID"].(string), nil, admin...), 200)
	if again["replay_of"] != attempt["inv_ID"] || len(orig["replayed_by"].([]any)) != 1 || orig["replayed_by"].([]any)[0] != again["inv_ID"] {
		t.Fatalf("replay links: %v / %v", again, orig)
	}
	if again["source"] != "admin" {
		t.Fatalf("source %v", again["source"])
	}

	// A clean environment: env sees PATH, LANG and HOME only.
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "env", "body": map[string]any{"type": "directory_row", "command": "/usr/bin/env"}}, admin...), 201)
	rc = jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "env-1", "body": map[string]any{"type": "invocation", "object_key": "env", "execute": true}}, admin...), 201)
	out := rc["outcome"].(map[string]any)["stdout"].(map[string]any)["text"].(string)
	if strings.Contains(out, canary) || strings.Contains(out, "s3cret") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "LANG=C.UTF-8\n") {
		t.Fatalf("environment of a command:\n%s", out)
	}

	// No secret in any ledger record or in the log.
	size := int(jsonOf(t, p.do("GET", "/api/ledger/checkpoint", nil, append(admin, "Accept", "application/json")...), 200)["tree_size"].(float64))
	var all bytes.Buffer
	for _, key := range []string{"number-facts.factor", "number-facts.multiply", "task:" + id + ".3:1", "again-1", "env", "env-1"} {
		all.Write(p.do("GET", "/api/dispatch?key="+key+"&history=true", nil, admin...).body)
	}
	if size < 10 || bytes.Contains(all.Bytes(), []byte("s3cret")) || strings.Contains(p.stderr.String(), "s3cret") || strings.Contains(p.stderr.String(), canary) {
		t.Fatalf("a secret leaked (tree size %d)", size)
	}
}

// TestRowToolsWithoutExec: a server without --allow-exec records the tool
// and the task as refused, and the task's failure action fires.
func TestRowToolsWithoutExec(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	id := frameOf(t, p.do("POST", "/runs", map[string]any{"workflow_id": "number-facts-v1"}), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"a": 2, "b": 3}), 200)
	res := jsonOf(t, p.do("POST", "/runs/"+id+"/invoke/factor", map[string]any{"numbers": []int{6}}), 200)["result"].(map[string]any)
	if o := res["outcome"].(map[string]any); o["class"] != "refused" || !strings.Contains(o["reason"].(string), "--allow-exec") {
		t.Fatalf("tool: %v", res)
	}
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/multiply", nil), 200)
	if f := waitRun(t, p, id, nil, 20*time.Second); f["state"] != "FAILED" {
		t.Fatalf("after the task: %v", f)
	}
	rec := jsonOf(t, p.do("GET", "/api/dispatch?key=task:"+id+".3:1", nil), 200)
	if o := rec["body"].(map[string]any)["outcome"].(map[string]any); o["class"] != "refused" || !strings.Contains(o["reason"].(string), "--allow-exec") {
		t.Fatalf("task record: %v", rec)
	}
}

const slowWorkflow = `workflow_id: slow-row-v1
initial_state: START
states:
  START: {hint: Give a number of seconds.}
  WORK:
    hint: Sleeping through a directory row.
    task: {row: slow.sleep, on_success: done, on_failure: failed}
  DONE: {hint: Slept.}
  FAILED: {hint: Did not sleep.}
transitions:
  - {from: START, action: go, to: WORK, expects: {s: number}}
  - {from: WORK, action: done, to: DONE}
  - {from: WORK, action: failed, to: FAILED}
`

// sleeping reports whether a `sleep ARG` process runs.
func sleeping(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == "sleep\x00"+arg+"\x00" {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie is dead
			}
			return true
		}
	}
	return false
}

// TestRowTaskReplayAfterKill9: a row-bound task whose server is killed
// mid-run loses its command with it, runs again after a restart, and the
// new attempt's invocation names the interrupted one in replay_of.
func TestRowTaskReplayAfterKill9(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	tmp := t.TempDir()
	wf := filepath.Join(tmp, "slow.yaml")
	if err := os.WriteFile(wf, []byte(slowWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(tmp, "asmp.db")
	args := []string{"--db", db, "--task-lease", "1s", "--allow-exec", "--exec-allow", "sleep", wf}
	p := serve(t, args...)
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "slow.sleep", "body": map[string]any{
		"type": "directory_row", "command": "sleep", "timeout": 20,
		"args": []any{map[string]any{"name": "s", "type": "number", "required": true}}}}), 201)
	const secs = "2.731"
	id := frameOf(t, p.do("POST", "/runs", nil), 201).RunID
	frameOf(t, p.do("POST", "/runs/"+id+"/transitions/go", map[string]any{"s": 2.731}), 200)
	deadline := time.Now().Add(10 * time.Second)
	for !sleeping(secs) {
		if time.Now().After(deadline) {
			t.Fatalf("the task's command never started:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	// The command dies with the server.
	deadline = time.Now().Add(3 * time.Second)
	for sleeping(secs) {
		if time.Now().After(deadline) {
			t.Fatal("the task's command outlived the killed server")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// After a restart the task runs again (once the lease has passed).
	q := serve(t, args...)
	if f := waitRun(t, q, id, nil, 30*time.Second); f["state"] != "DONE" {
		t.Fatalf("after the restart: %v\n%s", f, q.stderr.String())
	}
	h1 := jsonOf(t, q.do("GET", "/api/dispatch?key=task:"+id+".2:1&history=true", nil), 200)["records"].([]any)
	h2 := jsonOf(t, q.do("GET", "/api/dispatch?key=task:"+id+".2:2&history=true", nil), 200)["records"].([]any)
	// The interrupted attempt left its attempt record and no result.
	if len(h1) != 1 || h1[0].(map[string]any)["type"] != "invocation" {
		t.Fatalf("attempt 1: %v", h1)
	}
	a1, a2 := h1[0].(map[string]any), h2[0].(map[string]any)
	if len(h2) != 2 || a2["replay_of"] != a1["inv_ID"] {
		t.Fatalf("attempt 2: %v (attempt 1 %v)", h2, a1["inv_ID"])
	}
	if o := h2[1].(map[string]any)["body"].(map[string]any)["outcome"].(map[string]any); o["class"] != "succeeded" {
		t.Fatalf("attempt 2 result: %v", o)
	}
	by := jsonOf(t, q.do("GET", "/api/dispatch?receipt="+a1["inv_ID"].(string), nil), 200)["replayed_by"].([]any)
	if len(by) != 1 || by[0] != a2["inv_ID"] {
		t.Fatalf("replayed_by: %v", by)
	}
}

// What an execution started dies with the server, even kill -9: the
// kernel kills the command itself, and its group's guard the rest of the
// group (the server's grandchildren), which would live on otherwise.
func TestGrandchildrenDieWithTheServer(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	p := serve(t, "--db", ":memory:", "--allow-exec", "--exec-allow", "sh", "--exec-dir", t.TempDir())
	jsonOf(t, p.do("POST", "/api/dispatch", map[string]any{"key": "spawn", "body": map[string]any{
		"type": "directory_row", "command": "sh", "timeout": 60,
		"flags": []any{map[string]any{"name": "script", "short_alias": "-c", "type": "string", "required": true}}}}), 201)
	const first, second = "41.371", "43.117" // both children of sh: grandchildren of the server
	go p.try("POST", "/api/dispatch", map[string]any{"key": "spawn.run", "body": map[string]any{
		"type": "invocation", "object_key": "spawn", "execute": true, "input": map[string]any{"script": "sleep " + first + " & sleep " + second + "; wait"}}})
	deadline := time.Now().Add(10 * time.Second)
	for !sleeping(first) || !sleeping(second) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never started:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	deadline = time.Now().Add(5 * time.Second)
	for sleeping(first) || sleeping(second) {
		if time.Now().After(deadline) {
			t.Fatalf("processes the command started outlived the killed server (%v, %v)", sleeping(first), sleeping(second))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
