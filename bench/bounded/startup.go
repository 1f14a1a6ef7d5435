package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/oip"
	"github.com/asmp-dev/asmp/store/sqlite"
)

// The start-up part (issue 15, "start-up with 1,000,000 ledger records
// < 1 s"): a SQLite database holding -records ledger records, written by
// the oip package over the SQLite store exactly as a server writes them
// (group commits, one signed checkpoint per transaction, the head file
// beside the key), then asmp serve started on it -starts times.
//
//	startup  records N                                  the ledger's size
//	startup  listen_us|ready_us|rss|hwm START VALUE      one start: exec to /healthz 200, exec to /readyz 200, VmRSS once ready, VmHWM
//	startup  check_us VALUE                             asmp ledger check --db FILE (the full pass, offline)

// startupDB returns the database of n ledger records under -tmp, building
// it when it is missing (or was left half-built).
func startupDB(n int) (string, error) {
	db := filepath.Join(*tmp, fmt.Sprintf("asmp-ledger-%d.db", n))
	done := db + ".built"
	if _, err := os.Stat(done); err == nil {
		say("startup: reusing %s", db)
		return db, nil
	}
	removeDB(db)
	os.Remove(db + ".key.head")
	t0 := time.Now()
	if err := buildLedger(db, n); err != nil {
		return "", err
	}
	say("startup: %d ledger records written in %.1f s (%d MB)", n, time.Since(t0).Seconds(), dbSize(db)>>20)
	return db, os.WriteFile(done, []byte(strconv.Itoa(n)+"\n"), 0o644)
}

// benchExecutor stands in for running echo: the outcome it returns has the
// shape and the size of the one the server's executor records.
type benchExecutor struct{}

func (benchExecutor) Execute(_ context.Context, x oip.Execution) oip.Outcome {
	out := "hello from " + x.Key + "\n"
	sum := sha256.Sum256([]byte(out))
	code := 0
	return oip.Outcome{Class: oip.OutcomeSucceeded, ExitCode: &code, DurationMS: 2,
		Stdout: &oip.Stream{Text: out, Size: int64(len(out)), SHA256: hex.EncodeToString(sum[:])},
		Stderr: &oip.Stream{Text: "", Size: 0, SHA256: hex.EncodeToString(sha256.New().Sum(nil))}}
}

// rowKeys is how many directory rows the start-up ledger holds; each gets
// versions, the rest of the records are invocations of them (half of them
// executed: an attempt and its result).
const rowKeys = 1000

func benchRow(i, version int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type": "directory_row", "command": "echo",
		"description": fmt.Sprintf("Tool %d, version %d: prints a greeting for the word it is given, and optionally the count of words. Used by the start-up benchmark as a row of realistic size, with a few arguments and flags.", i, version),
		"args": []any{
			map[string]any{"name": "word", "type": "string", "required": true, "description": "the word to greet"},
			map[string]any{"name": "more", "type": "string", "description": "more words"},
		},
		"flags": []any{
			map[string]any{"name": "n", "type": "boolean", "short_alias": "-n", "description": "no trailing newline"},
			map[string]any{"name": "count", "type": "integer", "description": "how many times"},
		},
	})
	return b
}

// buildLedger writes n ledger records to a new database at db through the
// oip package, from 128 concurrent dispatchers (so the store's group
// commits sign one checkpoint per transaction, as under load).
func buildLedger(db string, n int) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		return err
	}
	svc, err := oip.New(st, &oip.Options{KeyPath: st.Path() + ".key", Executor: benchExecutor{}})
	if err != nil {
		st.Close()
		return err
	}
	ctx = auth.WithPrincipal(ctx, auth.Principal{Name: "bench", Scopes: auth.AllScopes})
	var written atomic.Int64
	var firstErr atomic.Value
	one := func(i int) error {
		switch {
		case i < rowKeys:
			_, err := svc.Dispatch(ctx, fmt.Sprintf("tool-%d", i), benchRow(i, 1))
			return err
		case i%50 == 0: // a new version of a row
			_, err := svc.Dispatch(ctx, fmt.Sprintf("tool-%d", i%rowKeys), benchRow(i%rowKeys, i/rowKeys+1))
			return err
		}
		exec := i%2 == 0
		body, _ := json.Marshal(map[string]any{"type": "invocation", "object_key": fmt.Sprintf("tool-%d", (i*7)%rowKeys),
			"input": map[string]any{"word": fmt.Sprintf("w%d", i), "count": i % 10}, "execute": exec})
		if _, err := svc.Dispatch(ctx, fmt.Sprintf("job-%d", i/8), body); err != nil {
			return err
		}
		if exec {
			written.Add(1) // the attempt and its result
		}
		return nil
	}
	// from..: dispatches i = from, from+1, ... from 128 goroutines until
	// until() or a failure.
	dispatch := func(from int, until func(i int) bool) {
		work := make(chan int)
		var wg sync.WaitGroup
		for range 128 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					if err := one(i); err != nil {
						firstErr.CompareAndSwap(nil, err)
						continue
					}
					if w := written.Add(1); w%100_000 == 0 {
						say("startup: %d records", w)
					}
				}
			}()
		}
		for i := from; !until(i) && firstErr.Load() == nil; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	// The rows first, so that every invocation finds its row.
	dispatch(0, func(i int) bool { return i >= min(rowKeys, n) })
	dispatch(rowKeys, func(int) bool { return written.Load() >= int64(n) })
	errClose := st.Close()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return errClose
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitOK asks url every millisecond until it answers 200, for at most
// limit; it returns the time since t0 then.
func waitOK(url string, t0 time.Time, limit time.Duration, exited <-chan struct{}) (time.Duration, error) {
	c := &http.Client{Timeout: limit}
	for time.Since(t0) < limit {
		select {
		case <-exited:
			return 0, errors.New("the server exited")
		default:
		}
		res, err := c.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return time.Since(t0), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("%s did not answer 200 within %v", url, limit)
}

// startup measures asmp serve's start on a ledger of -records records
// -starts times, then asmp ledger check on it.
func startup() error {
	db, err := startupDB(*records)
	if err != nil {
		return err
	}
	for i := 1; i <= *starts; i++ {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		argv := []string{"serve", "--addr", addr, "--db", db, "--rate-limit", "0", "--log-level", "warn"}
		name := *asmpBin
		if *serverCPU != "" {
			argv = append([]string{"-c", *serverCPU, name}, argv...)
			name = "taskset"
		}
		cmd := exec.Command(name, argv...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		}
		listen, err := waitOK("http://"+addr+"/healthz", t0, 120*time.Second, exited)
		if err != nil {
			stop()
			return fmt.Errorf("start %d: %w: %s", i, err, out.Bytes())
		}
		ready, err := waitOK("http://"+addr+"/readyz", t0, 600*time.Second, exited)
		if err != nil {
			stop()
			return fmt.Errorf("start %d: %w: %s", i, err, out.Bytes())
		}
		rss, _ := procField(cmd.Process.Pid, "status", "VmRSS")
		hwm, _ := procField(cmd.Process.Pid, "status", "VmHWM")
		stop()
		fmt.Printf("startup\tlisten_us\t%d\t%d\n", i, listen.Microseconds())
		fmt.Printf("startup\tready_us\t%d\t%d\n", i, ready.Microseconds())
		fmt.Printf("startup\trss\t%d\t%d\n", i, rss*1024)
		fmt.Printf("startup\thwm\t%d\t%d\n", i, hwm*1024)
		say("startup %d: /healthz after %v, /readyz after %v, RSS %d MB (peak %d MB)", i, listen.Round(time.Millisecond), ready.Round(time.Millisecond), rss>>10, hwm>>10)
	}
	st, err := sqlite.Open(context.Background(), db, nil)
	if err != nil {
		return err
	}
	n, err := st.LedgerSize(context.Background())
	st.Close()
	if err != nil {
		return err
	}
	fmt.Printf("startup\trecords\t%d\n", n)
	t0 := time.Now()
	out, err := exec.Command(*asmpBin, "ledger", "check", "--db", db).CombinedOutput()
	if err != nil {
		return fmt.Errorf("asmp ledger check: %w: %s", err, out)
	}
	el := time.Since(t0)
	fmt.Printf("startup\tcheck_us\t%d\n", el.Microseconds())
	say("startup: asmp ledger check of %d records took %v", n, el.Round(time.Millisecond))
	return nil
}
