// Command faultcheck kills asmp servers with SIGKILL under load and checks,
// after every restart, that nothing acknowledged was lost: every
// transition answered 2xx is in its run (version and event log), every
// dispatch answered 201 is in the ledger with a valid entry hash and an
// inclusion proof against the new signed checkpoint, the signing key is
// the same, and the new checkpoint is consistent with the one before.
//
// scripts/faults runs it for SQLite (20 kills) and Postgres (two replicas,
// each killed once) and writes docs/RELIABILITY.md.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asmp-dev/asmp/oip"
)

var (
	binary   = flag.String("binary", "./asmp", "the asmp binary")
	db       = flag.String("db", "", "SQLite path or postgres:// URL")
	wf       = flag.String("workflow", "cmd/asmp/testdata/loop.yaml", "a workflow file with LOOP --tick{n:integer}--> LOOP")
	kills    = flag.Int("kills", 20, "kill -9 rounds (SQLite); with -replicas 2, each replica is killed this many times in turn")
	replicas = flag.Int("replicas", 1, "servers on the database (2 needs Postgres)")
	workers  = flag.Int("workers", 16, "concurrent writers")
	keyFile  = flag.String("key", "", "ledger key file (ASMP_LEDGER_KEY) for Postgres replicas")
)

type server struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

func start() (*server, error) {
	cmd := exec.Command(*binary, "serve", "--addr", "127.0.0.1:0", "--db", *db, "--log-level", "error", *wf)
	cmd.Env = os.Environ()
	if *keyFile != "" {
		cmd.Env = append(cmd.Env, "ASMP_LEDGER_KEY="+*keyFile)
	}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	select {
	case s.url = <-found:
		return s, nil
	case <-s.exited:
		return nil, errors.New("server exited before listening")
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, errors.New("server did not start")
	}
}

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

var hc = &http.Client{Timeout: 10 * time.Second}

func call(base, method, path string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/api/ledger/checkpoint") {
		req.Header.Set("Accept", "text/plain")
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, err
}

// acked is what the servers acknowledged before dying.
type acked struct {
	mu       sync.Mutex
	versions map[string]int64 // run -> highest version answered 200
	receipts []string         // inv_IDs answered 201
	proven   int              // receipts[:proven] had their proofs checked
}

func (a *acked) version(run string, v int64) {
	a.mu.Lock()
	if v > a.versions[run] {
		a.versions[run] = v
	}
	a.mu.Unlock()
}

func (a *acked) receipt(id string) {
	a.mu.Lock()
	a.receipts = append(a.receipts, id)
	a.mu.Unlock()
}

// load drives transitions and dispatches against the servers until stop.
func load(servers []*server, runs []string, a *acked, stop <-chan struct{}, wg *sync.WaitGroup) {
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				s := servers[(w+n)%len(servers)]
				if w%4 == 0 {
					key := fmt.Sprintf("fault-row-%d", rand.IntN(50))
					body := map[string]any{"key": key, "body": map[string]any{"type": "directory_row", "command": "echo", "description": fmt.Sprintf("version %d of worker %d", n, w)}}
					code, _, b, err := call(s.url, "POST", "/api/dispatch", body)
					if err == nil && code == 201 {
						var r struct {
							InvID string `json:"inv_ID"`
						}
						json.Unmarshal(b, &r)
						a.receipt(r.InvID)
					}
					continue
				}
				run := runs[rand.IntN(len(runs))]
				code, h, _, err := call(s.url, "POST", "/runs/"+run+"/transitions/tick", map[string]any{"n": n})
				if err == nil && code == 200 {
					var v int64
					fmt.Sscanf(strings.Trim(h.Get("ETag"), `"`), "%d", &v)
					a.version(run, v)
				}
			}
		}(w)
	}
}

type checkpoint struct {
	Note string `json:"note"`
	Size int64  `json:"tree_size"`
	Key  string `json:"public_key"`
}

func getCheckpoint(base string) (checkpoint, error) {
	req, _ := http.NewRequest("GET", base+"/api/ledger/checkpoint", nil)
	req.Header.Set("Accept", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return checkpoint{}, err
	}
	defer res.Body.Close()
	var c checkpoint
	err = json.NewDecoder(res.Body).Decode(&c)
	return c, err
}

// verify checks every acknowledged write against base: every run's version
// and event log, every receipt's presence (through the keys' histories),
// and inclusion proofs of the receipts acknowledged since the last round
// plus a sample of older ones. It returns the new checkpoint and how many
// proofs it verified.
func verify(base string, a *acked, prev checkpoint) (checkpoint, int, error) {
	cp, err := verifyRuns(base, a, prev)
	if err != nil {
		return prev, 0, err
	}
	present := map[string]oip.Record{}
	for k := 0; k < 50; k++ {
		code, _, b, err := call(base, "GET", fmt.Sprintf("/api/dispatch?key=fault-row-%d&history=true", k), nil)
		if code == 404 {
			continue
		}
		if err != nil || code != 200 {
			return prev, 0, fmt.Errorf("history of fault-row-%d: %d %v", k, code, err)
		}
		var h struct {
			Records []oip.Record `json:"records"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			return prev, 0, err
		}
		for _, r := range h.Records {
			present[r.InvID] = r
		}
	}
	var toProve []string
	for i, id := range a.receipts {
		if _, ok := present[id]; !ok {
			return prev, 0, fmt.Errorf("acknowledged receipt %s is not in the ledger", id)
		}
		if i >= a.proven || rand.IntN(len(a.receipts)) < 100 {
			toProve = append(toProve, id)
		}
	}
	a.proven = len(a.receipts)
	for _, id := range toProve {
		rec := present[id]
		_, _, pb, _ := call(base, "GET", fmt.Sprintf("/api/ledger/proof?inv_ID=%s&tree_size=%d", url.QueryEscape(id), cp.Size), nil)
		var p oip.Proof
		if err := json.Unmarshal(pb, &p); err != nil {
			return prev, 0, err
		}
		if err := oip.VerifyReceipt(rec, p, []byte(cp.Note), cp.Key); err != nil {
			return prev, 0, fmt.Errorf("receipt %s does not verify: %w", id, err)
		}
	}
	return cp, len(toProve), nil
}

// verifyRuns checks the runs and the checkpoint's key and consistency.
func verifyRuns(base string, a *acked, prev checkpoint) (checkpoint, error) {
	for run, want := range a.versions {
		code, h, _, err := call(base, "GET", "/runs/"+run, nil)
		if err != nil || code != 200 {
			return prev, fmt.Errorf("run %s: %d %v", run, code, err)
		}
		var got int64
		fmt.Sscanf(strings.Trim(h.Get("ETag"), `"`), "%d", &got)
		if got < want {
			return prev, fmt.Errorf("run %s is at version %d but %d was acknowledged", run, got, want)
		}
		var evs struct {
			Events []struct {
				ID int64 `json:"id"`
			} `json:"events"`
		}
		for cursor := ""; ; { // the whole log, page by page
			_, _, b, _ := call(base, "GET", "/runs/"+run+"/events?limit=1000&cursor="+url.QueryEscape(cursor), nil)
			var page struct {
				Events []struct {
					ID int64 `json:"id"`
				} `json:"events"`
				NextCursor *string `json:"next_cursor"`
			}
			json.Unmarshal(b, &page)
			evs.Events = append(evs.Events, page.Events...)
			if page.NextCursor == nil || *page.NextCursor == cursor {
				break
			}
			cursor = *page.NextCursor
		}
		if int64(len(evs.Events)) != got || (got > 0 && evs.Events[got-1].ID != got) {
			return prev, fmt.Errorf("run %s: %d events for version %d", run, len(evs.Events), got)
		}
	}
	cp, err := getCheckpoint(base)
	if err != nil {
		return prev, fmt.Errorf("checkpoint: %w", err)
	}
	if prev.Key != "" && cp.Key != prev.Key {
		return prev, fmt.Errorf("the ledger's signing key changed across the restart")
	}
	if prev.Size > 0 {
		_, _, b, _ := call(base, "GET", fmt.Sprintf("/api/ledger/consistency?from=%d&to=%d", prev.Size, cp.Size), nil)
		var p oip.ConsistencyProof
		if err := json.Unmarshal(b, &p); err != nil {
			return prev, fmt.Errorf("consistency proof: %w", err)
		}
		if err := oip.VerifyCheckpointConsistency(p, []byte(prev.Note), []byte(cp.Note), cp.Key); err != nil {
			return prev, fmt.Errorf("checkpoint %d is not consistent with %d: %w", cp.Size, prev.Size, err)
		}
	}
	return cp, nil
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
}

func run() error {
	servers := make([]*server, *replicas)
	for i := range servers {
		s, err := start()
		if err != nil {
			return err
		}
		servers[i] = s
	}
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	var runs []string
	for i := 0; i < 32; i++ {
		code, _, b, err := call(servers[i%len(servers)].url, "POST", "/runs", nil)
		if err != nil || code != 201 {
			return fmt.Errorf("creating runs: %d %v %s", code, err, b)
		}
		var f struct {
			RunID string `json:"run_id"`
		}
		json.Unmarshal(b, &f)
		runs = append(runs, f.RunID)
	}
	a := &acked{versions: map[string]int64{}}
	var prev checkpoint
	rounds := *kills
	if *replicas > 1 {
		rounds = *kills * *replicas
	}
	fmt.Printf("| round | killed | transitions acked (total) | dispatches acked (total) | verified |\n|---|---|---|---|---|\n")
	for round := 1; round <= rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		load(servers, runs, a, stop, &wg)
		time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
		victim := (round - 1) % len(servers)
		servers[victim].kill() // SIGKILL mid-load
		close(stop)
		wg.Wait()
		s, err := start()
		if err != nil {
			return fmt.Errorf("round %d: restart: %w", round, err)
		}
		servers[victim] = s
		var total int64
		for _, v := range a.versions {
			total += v - 1
		}
		cp, checked, err := verify(s.url, a, prev)
		who := "the server"
		if len(servers) > 1 {
			who = fmt.Sprintf("replica %d", victim+1)
		}
		if err != nil {
			fmt.Printf("| %d | %s | %d | %d | **FAILED: %v** |\n", round, who, total, len(a.receipts), err)
			return fmt.Errorf("round %d: %w", round, err)
		}
		prev = cp
		fmt.Printf("| %d | %s | %d | %d | all present; %d proofs verify; checkpoint %d consistent |\n", round, who, total, len(a.receipts), checked, cp.Size)
	}
	return nil
}
