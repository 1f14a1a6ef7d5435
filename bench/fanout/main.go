// Command fanout measures stream fan-out: it opens N concurrent
// subscribers (GET /runs/{id}/stream) on one run of an asmp server, fires
// transitions on that run from a separate connection, and reports how long
// each transition took to reach the subscribers, plus the server's resident
// memory per subscriber.
//
//	fanout -url http://127.0.0.1:8000 -pid PID -subs 10000 -transitions 50 -interval 100ms
//
// The server must serve a workflow whose default run has a self-loop
// action (bench/loop-v1.yaml: LOOP --tick--> LOOP).
//
// Latency of one delivery = the time the stream line with the transition's
// event id arrived at the subscriber's socket minus the time just before the
// transition's POST was written. Arrival is the kernel's receive timestamp
// of the socket data (SO_TIMESTAMPNS), so the figure does not include this
// client's own time to get round to reading 10,000 sockets; the user-space
// read time is reported too. Subscribers are served by one epoll loop.
//
// Printed (one line, parsed by bench/run):
//
//	RESULT subs=N transitions=T connect_s=F rss_before_kb=N rss_after_kb=N bytes_per_sub=F
//	  all_p50_ms all_p99_ms all_max_ms last_p50_ms last_p99_ms lastconn_p50_ms lastconn_p99_ms
//	  user_all_p99_ms user_last_p99_ms missed=N busy_poll=0|1
//
// "all" is over every (subscriber, transition) delivery; "last" is, per
// transition, the delivery to the last subscriber to get it (the time until
// every subscriber had it); "lastconn" is the subscriber that connected last.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asmp-dev/asmp/bench/internal/proc"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8000", "server base URL")
	pid := flag.Int("pid", 0, "server process id (for VmRSS; 0: not measured)")
	subs := flag.Int("subs", 10_000, "concurrent subscribers")
	n := flag.Int("transitions", 50, "transitions fired")
	interval := flag.Duration("interval", 100*time.Millisecond, "pause between transitions")
	action := flag.String("action", "tick", "the self-loop action to fire")
	dialers := flag.Int("dialers", 64, "concurrent connection attempts")
	settle := flag.Duration("settle", 2*time.Second, "wait after connecting before reading VmRSS")
	busy := flag.Bool("busy-poll", false, "poll the sockets without sleeping (epoll_wait timeout 0), so that the server's writes do not pay to wake this process on the other core")
	flag.Parse()
	if *busy {
		pollTimeout = 0
	}
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	if err := run(*base, *pid, *subs, *n, *interval, *action, *dialers, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// sub is one subscriber's connection and what it received.
type sub struct {
	fd     int
	tail   []byte  // the last bytes of the previous read, to find ids across reads
	kernel []int64 // per event id: kernel receive time (unix ns), 0 = not yet
	user   []int64 // per event id: user-space read time (unix ns)
	closed atomic.Bool
}

func run(base string, pid, nsubs, ntrans int, interval time.Duration, action string, dialers int, settle time.Duration) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	addr, err := net.ResolveTCPAddr("tcp", u.Host)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	runID, err := startRun(client, base)
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	var before int64
	if pid > 0 {
		if before, err = proc.VmRSS(pid); err != nil {
			return err
		}
	}

	// Event ids: 1 is the run's creation (the first line); transitions are 2..ntrans+1.
	maxID := ntrans + 1
	subs := make([]*sub, nsubs)
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(epfd)
	byFD := sync.Map{} // fd -> *sub
	req := []byte("GET /runs/" + runID + "/stream HTTP/1.1\r\nHost: " + u.Host + "\r\nAccept: application/x-ndjson\r\n\r\n")

	// The epoll loop: reads every readable subscriber, records arrivals.
	var ready atomic.Int64 // subscribers that received their first line
	stop := make(chan struct{})
	loopDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		loopDone <- readLoop(epfd, &byFD, maxID, &ready, stop)
	}()

	t0 := time.Now()
	var next atomic.Int64
	var dialErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= nsubs {
					return
				}
				s, err := dial(addr, req, maxID)
				if err == nil {
					subs[i] = s
					byFD.Store(s.fd, s)
					err = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, s.fd, &syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(s.fd)})
				}
				if err != nil {
					once.Do(func() { dialErr = fmt.Errorf("subscriber %d: %w", i, err) })
					next.Store(int64(nsubs))
					return
				}
			}
		}()
	}
	wg.Wait()
	if dialErr != nil {
		close(stop)
		return dialErr
	}
	deadline := time.Now().Add(60 * time.Second)
	for ready.Load() < int64(nsubs) {
		if time.Now().After(deadline) {
			close(stop)
			return fmt.Errorf("only %d of %d subscribers got their first line within 60s", ready.Load(), nsubs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	connect := time.Since(t0)
	time.Sleep(settle)
	var after int64
	if pid > 0 {
		if after, err = proc.VmRSS(pid); err != nil {
			return err
		}
	}

	// The writer: one transition at a time, interval apart.
	sent := make([]int64, maxID+1)
	for k := 0; k < ntrans; k++ {
		start := time.Now()
		v, err := fire(client, base, runID, action)
		if err != nil {
			close(stop)
			return err
		}
		if v < 2 || v > int64(maxID) {
			close(stop)
			return fmt.Errorf("transition %d answered version %d; is another client ticking this run?", k, v)
		}
		sent[v] = start.UnixNano()
		time.Sleep(interval)
	}
	// Wait for the last deliveries (up to 10 s).
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !allDelivered(subs, &byFD, maxID) {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	if err := <-loopDone; err != nil {
		return err
	}
	for _, s := range subs {
		syscall.Close(s.fd)
	}

	var all, userAll, last, userLast, lastConn []float64
	missed := 0
	lc := subs[len(subs)-1]
	for id := 2; id <= maxID; id++ {
		if sent[id] == 0 {
			continue
		}
		worst, uworst := 0.0, 0.0
		for _, s := range subs {
			if s.kernel[id] == 0 {
				missed++
				continue
			}
			ms := float64(s.kernel[id]-sent[id]) / 1e6
			ums := float64(s.user[id]-sent[id]) / 1e6
			all = append(all, ms)
			userAll = append(userAll, ums)
			worst = max(worst, ms)
			uworst = max(uworst, ums)
		}
		last = append(last, worst)
		userLast = append(userLast, uworst)
		if lc.kernel[id] != 0 {
			lastConn = append(lastConn, float64(lc.kernel[id]-sent[id])/1e6)
		}
	}
	perSub := 0.0
	if pid > 0 {
		perSub = float64(after-before) * 1024 / float64(nsubs)
	}
	fmt.Printf("RESULT subs=%d transitions=%d connect_s=%.2f rss_before_kb=%d rss_after_kb=%d bytes_per_sub=%.0f "+
		"all_p50_ms=%.2f all_p99_ms=%.2f all_max_ms=%.2f last_p50_ms=%.2f last_p99_ms=%.2f lastconn_p50_ms=%.2f lastconn_p99_ms=%.2f "+
		"user_all_p99_ms=%.2f user_last_p99_ms=%.2f missed=%d busy_poll=%d\n",
		nsubs, ntrans, connect.Seconds(), before, after, perSub,
		pct(all, 50), pct(all, 99), pct(all, 100), pct(last, 50), pct(last, 99), pct(lastConn, 50), pct(lastConn, 99),
		pct(userAll, 99), pct(userLast, 99), missed, map[bool]int{false: 0, true: 1}[pollTimeout == 0])
	return nil
}

func allDelivered(subs []*sub, byFD *sync.Map, maxID int) bool {
	// Reads of s.kernel race with the loop only in the benign sense that a
	// late value is seen on the next poll; the loop owns the writes.
	done := true
	byFD.Range(func(_, v any) bool {
		s := v.(*sub)
		if !s.closed.Load() && atomic.LoadInt64(&s.kernel[maxID]) == 0 {
			done = false
			return false
		}
		return true
	})
	return done
}

// pct returns the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func startRun(c *http.Client, base string) (string, error) {
	resp, err := c.Post(base+"/runs", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var f struct {
		RunID string `json:"run_id"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /runs: %s: %s", resp.Status, b)
	}
	return f.RunID, json.Unmarshal(b, &f)
}

// fire POSTs the action and returns the run's new version (its ETag).
func fire(c *http.Client, base, runID, action string) (int64, error) {
	resp, err := c.Post(base+"/runs/"+runID+"/transitions/"+action, "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST %s: %s: %s", action, resp.Status, b)
	}
	etag, err := strconv.Unquote(resp.Header.Get("ETag"))
	if err != nil {
		return 0, fmt.Errorf("ETag %q: %w", resp.Header.Get("ETag"), err)
	}
	return strconv.ParseInt(etag, 10, 64)
}

// dial opens one subscriber: a blocking connect and request, then the
// socket is made non-blocking with kernel receive timestamps on.
func dial(addr *net.TCPAddr, req []byte, maxID int) (*sub, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	for off := 0; off < len(req); {
		n, err := syscall.Write(fd, req[off:])
		if err != nil {
			syscall.Close(fd)
			return nil, err
		}
		off += n
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &sub{fd: fd, kernel: make([]int64, maxID+1), user: make([]int64, maxID+1)}, nil
}

var idPrefix = []byte(`{"id":`)

// pollTimeout is epoll_wait's timeout in ms: 0 with -busy-poll.
var pollTimeout = 50

func readLoop(epfd int, byFD *sync.Map, maxID int, ready *atomic.Int64, stop <-chan struct{}) error {
	events := make([]syscall.EpollEvent, 1024)
	buf := make([]byte, 64<<10)
	oob := make([]byte, 128)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n, err := syscall.EpollWait(epfd, events, pollTimeout)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return err
		}
		for i := 0; i < n; i++ {
			v, ok := byFD.Load(int(events[i].Fd))
			if !ok {
				continue
			}
			s := v.(*sub)
			for !s.closed.Load() {
				nr, oobn, _, _, err := syscall.Recvmsg(s.fd, buf, oob, syscall.MSG_DONTWAIT)
				if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
					break
				}
				if err != nil || nr == 0 {
					s.closed.Store(true)
					syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, s.fd, nil)
					break
				}
				now := time.Now().UnixNano()
				kt := kernelTime(oob[:oobn])
				if kt == 0 {
					kt = now
				}
				s.scan(buf[:nr], kt, now, maxID, ready)
			}
		}
	}
}

// scan finds every `{"id":N` in the data (lines may be split across
// reads) and records the first arrival of each id.
func (s *sub) scan(data []byte, kt, ut int64, maxID int, ready *atomic.Int64) {
	b := append(s.tail, data...)
	for {
		i := bytes.Index(b, idPrefix)
		if i < 0 {
			break
		}
		j := i + len(idPrefix)
		k := j
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		if k == len(b) { // the number may continue in the next read
			b = b[i:]
			s.tail = append(s.tail[:0], b...)
			return
		}
		id, _ := strconv.Atoi(string(b[j:k]))
		if id >= 1 && id <= maxID && s.kernel[id] == 0 {
			s.user[id] = ut
			atomic.StoreInt64(&s.kernel[id], kt)
			if id == 1 {
				ready.Add(1)
			}
		}
		b = b[k:]
	}
	keep := min(len(b), len(idPrefix)-1)
	s.tail = append(s.tail[:0], b[len(b)-keep:]...)
}

// kernelTime returns the SCM_TIMESTAMPNS time in oob (unix ns), or 0.
func kernelTime(oob []byte) int64 {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return sec*1e9 + nsec
		}
	}
	return 0
}
