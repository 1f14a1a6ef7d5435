package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshDatabase returns a postgres:// URL of a new, empty database, or
// skips (locally) / fails (in CI) without ASMP_TEST_POSTGRES.
func freshDatabase(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: tests on Postgres need a server (scripts/test runs them)")
	}
	base := os.Getenv("ASMP_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ASMP_TEST_POSTGRES is not set: run scripts/test (it starts PostgreSQL with scripts/postgres-up)")
		}
		t.Skip("ASMP_TEST_POSTGRES is not set; run: eval \"$(scripts/postgres-up | tail -n1)\"")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("asmp_replicas_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// Two replicas on one Postgres: runs created on one are driven on the
// other, interleaved writes lose nothing, streams cross replicas, and a
// task survives the death of the replica running it.
func TestReplicasOnPostgres(t *testing.T) {
	db := freshDatabase(t)
	key := filepath.Join(t.TempDir(), "ledger.key")
	os.Setenv("ASMP_LEDGER_KEY", key)
	defer os.Unsetenv("ASMP_LEDGER_KEY")
	args := []string{"--db", db, "--task-lease", "2s", "testdata/loop.yaml", "../../examples/config-wizard.yaml"}
	a := serve(t, args...)
	b := serve(t, args...)

	t.Run("created on A, driven on B", func(t *testing.T) {
		id := frameOf(t, a.do("POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"}), 201).RunID
		frameOf(t, b.do("POST", "/runs/"+id+"/transitions/start", nil), 200)
		frameOf(t, a.do("POST", "/runs/"+id+"/transitions/save", map[string]any{"value": "v"}), 200)
		if f := frameOf(t, b.do("GET", "/runs/"+id, nil), 200); f.State != "CONFIRM" || f.Data["value"] != "v" {
			t.Fatalf("B sees %+v", f)
		}
	})

	t.Run("interleaved writes lose no update", func(t *testing.T) {
		const runs, ticks = 1000, 4
		ids := make([]string, runs)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		errs := make(chan error, runs)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				p := a
				if i%2 == 1 {
					p = b
				}
				r, err := p.try("POST", "/runs", nil)
				if err != nil || r.status != 201 {
					errs <- fmt.Errorf("create: %v %d %s", err, r.status, r.body)
					return
				}
				var f struct {
					RunID string `json:"run_id"`
				}
				json.Unmarshal(r.body, &f)
				ids[i] = f.RunID
				// Ticks alternate between replicas, two at a time.
				var inner sync.WaitGroup
				for k := 0; k < ticks; k++ {
					inner.Add(1)
					go func(k int) {
						defer inner.Done()
						q := a
						if k%2 == 1 {
							q = b
						}
						r, err := q.try("POST", "/runs/"+f.RunID+"/transitions/tick", map[string]any{"n": k})
						if err != nil || r.status != 200 {
							errs <- fmt.Errorf("tick: %v %d %s", err, r.status, r.body)
						}
					}(k)
				}
				inner.Wait()
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i, id := range ids {
			r := b.do("GET", "/runs/"+id, nil)
			if v := etagVersion(r.header.Get("ETag")); v != 1+ticks {
				t.Fatalf("run %d is at version %d, want %d: an update was lost", i, v, 1+ticks)
			}
		}
	})

	t.Run("a stream on B sees A's transitions", func(t *testing.T) {
		id := frameOf(t, a.do("POST", "/runs", map[string]any{"workflow_id": "config-wizard-v1"}), 201).RunID
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/runs/"+id+"/stream", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		lines := make(chan map[string]any, 16)
		go func() {
			s := bufio.NewScanner(res.Body)
			for s.Scan() {
				var m map[string]any
				json.Unmarshal(s.Bytes(), &m)
				if m["heartbeat"] == nil {
					lines <- m
				}
			}
			close(lines)
		}()
		<-lines // current frame
		for i, step := range []struct{ action, state string }{{"start", "CONFIGURE"}, {"save", "CONFIRM"}, {"confirm", "DONE"}} {
			var body any
			if step.action == "save" {
				body = map[string]any{"value": "x"}
			}
			t0 := time.Now()
			frameOf(t, a.do("POST", "/runs/"+id+"/transitions/"+step.action, body), 200)
			select {
			case m := <-lines:
				if m["state"] != step.state || m["id"] != float64(i+2) {
					t.Fatalf("B streamed %v after %s on A", m, step.action)
				}
				t.Logf("%s on A reached B's stream in %v", step.action, time.Since(t0))
			case <-time.After(5 * time.Second):
				t.Fatalf("B's stream never saw %s made on A", step.action)
			}
		}
	})

	t.Run("a task survives its replica's death", func(t *testing.T) {
		c := serve(t, "--db", db, "--task-lease", "2s")
		id := frameOf(t, c.do("POST", "/runs", map[string]any{"workflow_id": "expense-approval-v1"}), 201).RunID
		frameOf(t, c.do("POST", "/runs/"+id+"/transitions/submit", map[string]any{"amount": 5, "description": "Coffee"}), 200)
		frameOf(t, c.do("POST", "/runs/"+id+"/transitions/approve", nil), 200)
		waitProgress(t, c, id) // c's worker runs the task
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
		// d serves the expense workflow too, and picks up the task after the lease.
		d := serve(t, "--db", db, "--task-lease", "2s")
		deadline := time.Now().Add(40 * time.Second)
		for time.Now().Before(deadline) {
			if f := frameOf(t, d.do("GET", "/runs/"+id, nil), 200); f.State == "PAID" {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("the task of the killed replica never completed")
	})
}
