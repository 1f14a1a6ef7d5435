package main_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"
)

// ledgerDB is a database of one tamper test: SQLite or Postgres, the
// arguments that serve it, its signing key file, and raw SQL access to it
// (the attacker's write access).
type ledgerDB struct {
	args []string
	key  string
	db   string // the --db value
	pg   bool
}

func newLedgerDB(t *testing.T, backend string) ledgerDB {
	t.Helper()
	dir := t.TempDir()
	if backend == "postgres" {
		url := freshDatabase(t)
		key := filepath.Join(dir, "ledger.key")
		t.Setenv("ASMP_LEDGER_KEY", key)
		return ledgerDB{args: []string{"--db", url, "testdata/loop.yaml"}, key: key, db: url, pg: true}
	}
	db := filepath.Join(dir, "asmp.db")
	return ledgerDB{args: []string{"--db", db, "testdata/loop.yaml"}, key: db + ".key", db: db}
}

// exec runs statements (with $N parameters) as the attacker, with write
// access to the database (the server may be running).
func (d ledgerDB) exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	if d.pg {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, d.db)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		return
	}
	c, err := sql.Open("sqlite", d.db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// canonical returns the stored canonical bytes of record seq.
func (d ledgerDB) canonical(t *testing.T, seq int) []byte {
	t.Helper()
	var b []byte
	if d.pg {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, d.db)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, `SELECT canonical FROM ledger WHERE seq = $1`, seq).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	c, err := sql.Open("sqlite", d.db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueryRow(`SELECT canonical FROM ledger WHERE seq = $1`, seq).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// queryInt runs a query answering one integer, as the attacker would.
func (d ledgerDB) queryInt(t *testing.T, query string) int64 {
	t.Helper()
	var n int64
	if d.pg {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, d.db)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	c, err := sql.Open("sqlite", d.db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// replaceInBody replaces old by repl in record seq's body.
func (d ledgerDB) replaceInBody(t *testing.T, seq int, old, repl string) {
	t.Helper()
	if d.pg {
		d.exec(t, `UPDATE ledger SET body = replace(body::text, $1, $2)::json WHERE seq = $3`, old, repl, seq)
		return
	}
	d.exec(t, `UPDATE ledger SET body = replace(body, $1, $2) WHERE seq = $3`, old, repl, seq)
}

const tamperRow = `{"type":"directory_row","command":"echo","description":"Say it.","args":[{"name":"word","type":"string","required":true}]}`

func dispatchRow(t *testing.T, p *proc, key string) map[string]any {
	t.Helper()
	var body map[string]any
	json.Unmarshal([]byte(tamperRow), &body)
	r := p.do("POST", "/api/dispatch", map[string]any{"key": key, "body": body})
	if r.status != 201 {
		t.Fatalf("dispatch %s: %d %s", key, r.status, r.body)
	}
	var rc map[string]any
	json.Unmarshal(r.body, &rc)
	return rc
}

// stop waits until the server is ready (its ledger checked in full), then
// stops it cleanly.
func stop(t *testing.T, p *proc) {
	t.Helper()
	for i := 0; p.do("GET", "/readyz", nil).status != 200; i++ {
		if i == 500 {
			t.Fatalf("never ready:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("clean shutdown exited with %v:\n%s", err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

// asmp runs the binary with args and returns its output and exit code.
func asmp(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// buildLedger writes 8 records in two server lifetimes: 1..6 in the first,
// checked in full by the second start, 7..8 in the second, so that a fault
// in 1..6 is found by the background pass and one in 7..8 at start. The
// monitor file keeps the checkpoint of 8.
func buildLedger(t *testing.T, d ledgerDB) (monitor string) {
	t.Helper()
	p := serve(t, d.args...)
	for i := 1; i <= 6; i++ {
		dispatchRow(t, p, fmt.Sprintf("row-%d", i))
	}
	stop(t, p)
	q := serve(t, d.args...)
	for i := 7; i <= 8; i++ {
		dispatchRow(t, q, fmt.Sprintf("row-%d", i))
	}
	monitor = filepath.Join(t.TempDir(), "monitor.json")
	if out, code := asmp(t, nil, "verify", "--server", q.url, "--checkpoint", monitor); code != 0 || !strings.Contains(out, "tree size 8") {
		t.Fatalf("monitor's first check: %d %s", code, out)
	}
	stop(t, q)
	return monitor
}

// refused starts the server on a tampered database and waits for it to
// stop with exit status 1 (at start, or from the background pass after
// listening); it returns what the server said.
func refused(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("serve on a tampered ledger ended with %v, want exit status 1:\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("serve on a tampered ledger kept running:\n%s", out.String())
	}
	return out.String()
}

func TestLedgerTamperingStopsTheServer(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { tamperCases(t, backend) })
	}
}

func tamperCases(t *testing.T, backend string) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, d ledgerDB)
		want   []string // in the server's message
		seq    int64    // asmp ledger check's first_bad_seq (0: not a record's fault)
		// background: found by the full pass after listening, not at start.
		background bool
	}{{
		name:       "edit a body (background pass)",
		tamper:     func(t *testing.T, d ledgerDB) { d.replaceInBody(t, 2, "Say it.", "Say no.") },
		want:       []string{"record seq 2:", "differs from the bytes it was written with"},
		seq:        2,
		background: true,
	}, {
		name:   "edit a body (at start)",
		tamper: func(t *testing.T, d ledgerDB) { d.replaceInBody(t, 7, "Say it.", "Say no.") },
		want:   []string{"opening the OIP ledger", "record seq 7:"},
		seq:    7,
	}, {
		name: "edit a body and its hash",
		tamper: func(t *testing.T, d ledgerDB) {
			// The thorough attacker: body, canonical bytes and entry_hash
			// all agree; only the signed root can tell.
			c := []byte(strings.Replace(string(d.canonical(t, 3)), "Say it.", "Say no.", 1))
			sum := sha256.Sum256(c)
			d.replaceInBody(t, 3, "Say it.", "Say no.")
			d.exec(t, `UPDATE ledger SET canonical = $1, entry_hash = $2 WHERE seq = 3`, c, hex.EncodeToString(sum[:]))
		},
		want:       []string{"records 3..3 do not make the root signed in the checkpoint of tree size 3"},
		seq:        3,
		background: true,
	}, {
		name: "edit a body and its entry_hash only",
		tamper: func(t *testing.T, d ledgerDB) {
			d.replaceInBody(t, 8, "Say it.", "Say no.")
			d.exec(t, `UPDATE ledger SET entry_hash = $1 WHERE seq = 8`, strings.Repeat("ab", 32))
		},
		want: []string{"record seq 8:", "an edited body"},
		seq:  8,
	}, {
		name: "delete the last record",
		tamper: func(t *testing.T, d ledgerDB) {
			d.exec(t, `DELETE FROM ledger_heads WHERE seq = 8`)
			d.exec(t, `DELETE FROM ledger WHERE seq = 8`)
		},
		want: []string{"records 8..8 were removed"},
		seq:  8,
	}, {
		name: "delete the last records with their checkpoints",
		tamper: func(t *testing.T, d ledgerDB) {
			d.exec(t, `DELETE FROM ledger_heads WHERE seq >= 7`)
			d.exec(t, `DELETE FROM ledger WHERE seq >= 7`)
			d.exec(t, `DELETE FROM ledger_checkpoints WHERE tree_size >= 7`)
		},
		want: []string{"head file records a tree of 8 records, the database holds 6", "records 7..8 were removed"},
		seq:  7,
	}, {
		name: "reorder two records",
		tamper: func(t *testing.T, d ledgerDB) {
			if d.pg {
				d.exec(t, `ALTER TABLE ledger_heads DROP CONSTRAINT ledger_heads_seq_fkey`)
			}
			d.exec(t, `UPDATE ledger SET seq = 1003 WHERE seq = 3`)
			d.exec(t, `UPDATE ledger SET seq = 3 WHERE seq = 4`)
			d.exec(t, `UPDATE ledger SET seq = 4 WHERE seq = 1003`)
			d.exec(t, `UPDATE ledger_heads SET seq = 7 - seq WHERE seq IN (3, 4)`)
		},
		want:       []string{"records 3..3 do not make the root signed in the checkpoint of tree size 3", "reordered"},
		seq:        3,
		background: true,
	}, {
		name:       "delete a checkpoint row",
		tamper:     func(t *testing.T, d ledgerDB) { d.exec(t, `DELETE FROM ledger_checkpoints WHERE tree_size = 4`) },
		want:       []string{"the checkpoint of tree size 4 was removed"},
		background: true,
	}, {
		name:   "delete the newest checkpoint row",
		tamper: func(t *testing.T, d ledgerDB) { d.exec(t, `DELETE FROM ledger_checkpoints WHERE tree_size = 8`) },
		want:   []string{"the checkpoint of tree size 8 was removed"},
	}, {
		name:   "remove the key file",
		tamper: func(t *testing.T, d ledgerDB) { os.Remove(d.key) },
		want:   []string{"the signing key file", "is missing", "--ledger-rotate-key"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newLedgerDB(t, backend)
			buildLedger(t, d)
			c.tamper(t, d)
			msg := refused(t, d.args...)
			if listened := strings.Contains(msg, "listening on"); listened != c.background {
				t.Errorf("listened before stopping: %v, want %v", listened, c.background)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the server's message lacks %q:\n%s", w, msg)
				}
			}
			if c.name == "remove the key file" {
				return // asmp ledger check needs no key: it checks the stored checkpoints
			}
			out, code := asmp(t, nil, "ledger", "check", "--db", d.db, "--key", d.key, "--json")
			var rep struct {
				OK          bool   `json:"ok"`
				FirstBadSeq int64  `json:"first_bad_seq"`
				Error       string `json:"error"`
			}
			if i := strings.Index(out, "{"); i >= 0 {
				json.NewDecoder(strings.NewReader(out[i:])).Decode(&rep)
			}
			if code != 1 || rep.OK || rep.FirstBadSeq != c.seq || rep.Error == "" {
				t.Errorf("asmp ledger check: exit %d, report %+v, want first_bad_seq %d:\n%s", code, rep, c.seq, out)
			}
		})
	}
}

// A key lost for good: --ledger-rotate-key starts with a new key and a
// key-rotation record; the ledger then checks in full and restarts.
func TestLedgerKeyRotation(t *testing.T) {
	d := newLedgerDB(t, "sqlite")
	buildLedger(t, d)
	old, err := os.ReadFile(d.key)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(d.key)
	p := serve(t, append([]string{"--ledger-rotate-key"}, d.args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.stderr.String())
		}
	})
	var rec struct {
		Seq  int64 `json:"seq"`
		Type string
		Body struct {
			OldKey string `json:"old_key"`
			NewKey string `json:"new_key"`
		} `json:"body"`
	}
	json.Unmarshal(p.do("GET", "/api/dispatch?key=asmp.ledger.key", nil).body, &rec)
	if rec.Seq != 9 || rec.Type != "key_rotation" || rec.Body.OldKey == "" || rec.Body.NewKey == rec.Body.OldKey {
		t.Fatalf("key-rotation record %+v", rec)
	}
	if !strings.HasPrefix(rec.Body.OldKey, strings.SplitN(strings.TrimPrefix(string(old), "PRIVATE+KEY+"), "+", 3)[0]) {
		t.Fatalf("old key %s", rec.Body.OldKey)
	}
	dispatchRow(t, p, "row-after")
	stop(t, p)
	q := serve(t, d.args...)
	stop(t, q)
	if out, code := asmp(t, nil, "ledger", "check", "--db", d.db); code != 0 || !strings.Contains(out, "ledger checked") {
		t.Fatalf("asmp ledger check after a rotation: %d\n%s", code, out)
	}
}

// A monitor holding an old checkpoint detects a rewrite the server was
// made to accept: the last records deleted with their checkpoints and the
// head file reset (--ledger-reset-head), then a fork with new records.
func TestLedgerMonitorDetectsRewrite(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			d := newLedgerDB(t, backend)
			monitor := buildLedger(t, d)
			d.exec(t, `DELETE FROM ledger_heads WHERE seq >= 7`)
			d.exec(t, `DELETE FROM ledger WHERE seq >= 7`)
			d.exec(t, `DELETE FROM ledger_checkpoints WHERE tree_size >= 7`)
			p := serve(t, append([]string{"--ledger-reset-head"}, d.args...)...)
			kept, _ := os.ReadFile(monitor)
			for _, cmd := range [][]string{
				{"verify", "--server", p.url, "--checkpoint", monitor},
				{"ledger", "watch", "--server", p.url, "--state", monitor, "--once"},
			} {
				out, code := asmp(t, nil, cmd...)
				if code != 1 || !strings.Contains(out, "it has 6 records, the kept checkpoint 8") {
					t.Fatalf("%v on a truncated ledger: exit %d\n%s", cmd, code, out)
				}
			}
			// The fork: as many records again, and more.
			for i := 7; i <= 9; i++ {
				dispatchRow(t, p, fmt.Sprintf("fork-%d", i))
			}
			out, code := asmp(t, nil, "verify", "--server", p.url, "--checkpoint", monitor)
			if code != 1 || !strings.Contains(out, "does not extend the kept checkpoint of tree size 8") {
				t.Fatalf("verify --checkpoint on a forked ledger: exit %d\n%s", code, out)
			}
			if now, _ := os.ReadFile(monitor); string(now) != string(kept) {
				t.Fatal("a failed check replaced the kept checkpoint")
			}
		})
	}
}

// kill -9 in the middle of concurrent dispatches: the next start is clean,
// every acknowledged receipt answers, and the ledger checks in full.
func TestLedgerKill9MidDispatch(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			d := newLedgerDB(t, backend)
			p := serve(t, d.args...)
			var acked sync.Map
			var n atomic.Int64
			var wg sync.WaitGroup
			enough := make(chan struct{})
			var once sync.Once
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						var body map[string]any
						json.Unmarshal([]byte(tamperRow), &body)
						r, err := p.try("POST", "/api/dispatch", map[string]any{"key": fmt.Sprintf("k-%d-%d", w, i%3), "body": body})
						if err != nil {
							return // the server died
						}
						if r.status == 201 {
							var rc struct {
								InvID string `json:"inv_ID"`
							}
							json.Unmarshal(r.body, &rc)
							acked.Store(rc.InvID, true)
							if n.Add(1) == 60 {
								once.Do(func() { close(enough) })
							}
						}
					}
				}()
			}
			<-enough
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
			wg.Wait()
			q := serve(t, d.args...)
			acked.Range(func(k, _ any) bool {
				if r := q.do("GET", "/api/dispatch?receipt="+k.(string), nil); r.status != 200 {
					t.Errorf("receipt %s after kill -9: %d %s", k, r.status, r.body)
				}
				return true
			})
			stop(t, q)
			if out, code := asmp(t, nil, "ledger", "check", "--db", d.db, "--key", d.key); code != 0 {
				t.Fatalf("asmp ledger check after kill -9: %d\n%s", code, out)
			}
		})
	}
}

// The newest record and its checkpoint deleted while the server runs: the
// next dispatch would take that seq again and sign a second root for its
// tree size. It is refused with a 503 and a hint, nothing is written, and
// the server stops with exit status 1.
func TestLedgerTruncatedWhileServing(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			d := newLedgerDB(t, backend)
			p := serve(t, d.args...)
			for i := 1; i <= 3; i++ {
				dispatchRow(t, p, fmt.Sprintf("row-%d", i))
			}
			d.exec(t, `DELETE FROM ledger_heads WHERE seq = 3`)
			d.exec(t, `DELETE FROM ledger WHERE seq = 3`)
			d.exec(t, `DELETE FROM ledger_checkpoints WHERE tree_size = 3`)
			var body map[string]any
			json.Unmarshal([]byte(tamperRow), &body)
			r := p.do("POST", "/api/dispatch", map[string]any{"key": "row-4", "body": body})
			var e struct {
				Status string `json:"status"`
				Hint   string `json:"hint"`
			}
			json.Unmarshal(r.body, &e)
			if r.status != 503 || e.Status != "error" || !strings.Contains(e.Hint, "nothing was appended") {
				t.Fatalf("dispatch after the truncation: %d %s", r.status, r.body)
			}
			select {
			case err := <-p.exited:
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 1 {
					t.Fatalf("the server ended with %v, want exit status 1:\n%s", err, p.stderr.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the server kept running:\n%s", p.stderr.String())
			}
			if msg := p.stderr.String(); !strings.Contains(msg, "were removed while it ran") {
				t.Errorf("the server's message does not say what happened:\n%s", msg)
			}
			if n := d.queryInt(t, `SELECT COUNT(*) FROM ledger`); n != 2 {
				t.Errorf("the ledger holds %d records, want 2: seq 3 was issued again", n)
			}
			if n := d.queryInt(t, `SELECT COUNT(*) FROM ledger_checkpoints WHERE tree_size >= 3`); n != 0 {
				t.Errorf("%d checkpoints of tree size 3 or more were signed after the truncation", n)
			}
			var head struct {
				TreeSize int64 `json:"tree_size"`
			}
			if b, err := os.ReadFile(d.key + ".head"); err != nil || json.Unmarshal(b, &head) != nil || head.TreeSize != 3 {
				t.Errorf("head file %s: %v, tree size %d, want 3", d.key+".head", err, head.TreeSize)
			}
		})
	}
}

// A row rewritten consistently in the database (body, canonical bytes
// and entry_hash agree; no key needed) among the records the background
// pass checks after start: executing it as soon as the server listens is
// refused with 503, nothing runs and nothing is appended, and the server
// stops.
func TestLedgerRewrittenRowNotExecutedAtStart(t *testing.T) {
	d := newLedgerDB(t, "sqlite")
	buildLedger(t, d)
	marker := filepath.Join(t.TempDir(), "ran")
	c := []byte(strings.Replace(string(d.canonical(t, 3)), `"command":"echo"`, `"command":"touch"`, 1))
	sum := sha256.Sum256(c)
	d.exec(t, `UPDATE ledger SET body = replace(body, '"command":"echo"', '"command":"touch"'), canonical = $1, entry_hash = $2 WHERE seq = 3`, c, hex.EncodeToString(sum[:]))

	p := serve(t, append([]string{"--allow-exec", "--exec-allow", "echo", "--exec-allow", "touch", "--exec-dir", t.TempDir()}, d.args...)...)
	r, err := p.try("POST", "/api/dispatch", map[string]any{"key": "run-1", "body": map[string]any{
		"type": "invocation", "object_key": "row-3", "input": map[string]any{"word": marker}, "execute": true}})
	if err == nil && (r.status != 503 || !strings.Contains(string(r.body), "integrity check")) {
		t.Fatalf("executing the rewritten row: %d %s", r.status, r.body)
	}
	select {
	case err := <-p.exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("the server ended with %v, want exit status 1:\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server kept running on a rewritten ledger:\n%s", p.stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the rewritten row ran")
	}
	if n := d.queryInt(t, `SELECT COUNT(*) FROM ledger`); n != 8 {
		t.Fatalf("the ledger holds %d records after the refusal, want the 8 written before", n)
	}
	if !strings.Contains(p.stderr.String(), "record seq 3") && !strings.Contains(p.stderr.String(), "records 3..3") {
		t.Fatalf("the server's log names no bad record:\n%s", p.stderr.String())
	}
}

// asmp ledger watch and verify --checkpoint say so when the state file
// held no checkpoint (trust on first use, nothing checked), and ledger
// watch --json writes one JSON object per check.
func TestLedgerWatchFirstUseAndJSON(t *testing.T) {
	p := serve(t, "--db", ":memory:")
	state := filepath.Join(t.TempDir(), "ledger.checkpoint")
	out, code := asmp(t, nil, "ledger", "watch", "--server", p.url, "--state", state, "--once", "--json")
	var line struct {
		Extends    *bool `json:"extends"`
		FirstUse   bool  `json:"first_use"`
		Checkpoint *struct {
			TreeSize int64 `json:"tree_size"`
		} `json:"checkpoint"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &line); code != 0 || err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 ||
		line.Extends == nil || !*line.Extends || !line.FirstUse || line.Checkpoint == nil || line.Checkpoint.TreeSize < 1 {
		t.Fatalf("first watch --json: exit %d, %v\n%s", code, err, out)
	}
	out, code = asmp(t, nil, "ledger", "watch", "--server", p.url, "--state", state, "--once", "--json")
	if err := json.Unmarshal([]byte(out), &line); code != 0 || err != nil || line.FirstUse || !*line.Extends {
		t.Fatalf("second watch --json: exit %d, %v\n%s", code, err, out)
	}
	fresh := filepath.Join(t.TempDir(), "new.checkpoint")
	if out, code := asmp(t, nil, "verify", "--server", p.url, "--checkpoint", fresh); code != 0 || !strings.Contains(out, "no checkpoint was kept in "+fresh+": kept the current one (trust on first use)") {
		t.Fatalf("verify --checkpoint of a new file: exit %d\n%s", code, out)
	}
	if out, code := asmp(t, nil, "verify", "--server", p.url, "--checkpoint", fresh, "--json"); code != 0 || !strings.Contains(out, `"verified": true`) || !strings.Contains(out, `"extends": true`) || strings.Contains(out, "first_use") {
		t.Fatalf("verify --checkpoint --json of a kept checkpoint: exit %d\n%s", code, out)
	}
	if out, code := asmp(t, nil, "ledger", "watch", "--server", p.url, "--state", fresh, "--once"); code != 0 || !strings.Contains(out, "ledger extends the kept checkpoint") {
		t.Fatalf("watch of a kept checkpoint: exit %d\n%s", code, out)
	}
}
