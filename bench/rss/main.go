// Command rss creates runs on an asmp server over HTTP and measures how
// much the server process's resident memory grew per stored run, from
// VmRSS in /proc/PID/status before and after.
//
//	rss -url http://127.0.0.1:8000 -pid PID -runs 100000 [-walk start,save] [-c 64]
//
// prints one line that bench/run parses:
//
//	RESULT runs=N rss_before_kb=N rss_after_kb=N bytes_per_run=F seconds=F rps=F
//
// With -ids it only creates -runs runs (walking -walk) and prints their ids,
// comma-separated, for the transition load scripts. -walk names actions
// fired on every run after it is created (a transition expecting value gets
// {"value":"x"}).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asmp-dev/asmp/bench/internal/proc"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8000", "server base URL")
	pid := flag.Int("pid", 0, "server process id (for VmRSS); 0 with -ids")
	runs := flag.Int("runs", 100_000, "runs to create")
	conc := flag.Int("c", 64, "concurrent connections")
	walk := flag.String("walk", "", "comma-separated actions fired on each run after creating it")
	ids := flag.Bool("ids", false, "print the created run ids (comma-separated) instead of measuring")
	settle := flag.Duration("settle", 3*time.Second, "wait before reading VmRSS after the load")
	files := flag.String("files", "", "comma-separated files whose total size is reported per run too (e.g. the SQLite database and its WAL)")
	flag.Parse()
	if err := run(*url, *pid, *runs, *conc, *walk, *ids, *settle, *files); err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
}

func run(base string, pid, n, conc int, walk string, printIDs bool, settle time.Duration, files string) error {
	var actions []string
	if walk != "" {
		actions = strings.Split(walk, ",")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}, Timeout: 60 * time.Second}
	var before int64
	var sizeBefore int64
	if !printIDs {
		var err error
		if before, err = proc.VmRSS(pid); err != nil {
			return err
		}
		sizeBefore = filesSize(files)
	}
	out := make([]string, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id, err := create(client, base, actions)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
				out[i] = id
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	if printIDs {
		fmt.Println(strings.Join(out, ","))
		return nil
	}
	client.CloseIdleConnections()
	time.Sleep(settle)
	after, err := proc.VmRSS(pid)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT runs=%d rss_before_kb=%d rss_after_kb=%d bytes_per_run=%.1f seconds=%.2f rps=%.1f",
		n, before, after, float64(after-before)*1024/float64(n), elapsed.Seconds(), float64(n)/elapsed.Seconds())
	if files != "" {
		sizeAfter := filesSize(files)
		fmt.Printf(" disk_bytes_per_run=%.1f", float64(sizeAfter-sizeBefore)/float64(n))
	}
	fmt.Println()
	return nil
}

func create(c *http.Client, base string, actions []string) (string, error) {
	var f struct {
		RunID      string `json:"run_id"`
		NextStates []struct {
			Action  string            `json:"action"`
			Href    string            `json:"href"`
			Expects map[string]string `json:"expects"`
		} `json:"next_states"`
	}
	if err := post(c, base+"/runs", []byte("{}"), http.StatusCreated, &f); err != nil {
		return "", err
	}
	id := f.RunID
	for _, a := range actions {
		body := []byte("{}")
		for _, ns := range f.NextStates {
			if ns.Action == a && len(ns.Expects) > 0 {
				m := map[string]any{}
				for k, t := range ns.Expects {
					m[k] = sample(t)
				}
				body, _ = json.Marshal(m)
			}
		}
		f.NextStates = nil
		if err := post(c, base+"/runs/"+id+"/transitions/"+a, body, http.StatusOK, &f); err != nil {
			return "", err
		}
	}
	return id, nil
}

func sample(typ string) any {
	switch typ {
	case "integer", "number":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return "x"
}

func post(c *http.Client, url string, body []byte, want int, v any) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

func filesSize(list string) int64 {
	var total int64
	for _, f := range strings.Split(list, ",") {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil {
			total += st.Size()
		}
	}
	return total
}
