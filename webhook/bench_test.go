package webhook_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/testsupport/backends"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/store"
	"github.com/asmp-dev/asmp/webhook"
	"github.com/asmp-dev/asmp/workflow"
)

// Flags of the webhook benchmarks (bench/webhooks runs them).
var (
	whRounds  = flag.Int("wh-rounds", 5, "BenchmarkTransitionsWithWebhook: rounds, each one phase without and one with a subscription")
	whPhase   = flag.Duration("wh-phase", time.Second, "BenchmarkTransitionsWithWebhook: how long each phase commits transitions")
	whWorkers = flag.Int("wh-workers", 32, "BenchmarkTransitionsWithWebhook: concurrent writers (each ticks its own runs)")
	latRate   = flag.Int("lat-rate", 1000, "BenchmarkWebhookLatency: transitions (so messages) per second")
	latFor    = flag.Duration("lat-for", 10*time.Second, "BenchmarkWebhookLatency: how long messages are made")
	latRuns   = flag.Int("lat-runs", 1000, "BenchmarkWebhookLatency: runs ticked round-robin")
	whNoSend  = flag.Bool("wh-outbox-only", false, "BenchmarkTransitionsWithWebhook: no delivery loop on the subscribed engine (what the outbox alone costs; nothing is drained)")
)

// sink is a loopback webhook receiver that answers 204 at once and keeps
// each request's arrival time and body.
type sink struct {
	srv  *httptest.Server
	n    atomic.Int64
	keep bool

	mu  sync.Mutex
	got []sunk
}

type sunk struct {
	at   time.Time
	id   string
	body []byte
}

func newSink(b *testing.B, keep bool) *sink {
	s := &sink{keep: keep}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if s.keep {
			s.mu.Lock()
			s.got = append(s.got, sunk{at, r.Header.Get("webhook-id"), body})
			s.mu.Unlock()
		}
		s.n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(s.srv.Close)
	return s
}

// loopFlow is one state that ticks forever.
func loopFlow(b *testing.B) *workflow.Definition {
	wb := workflow.New("loop-v1", "LOOP")
	wb.State("LOOP")
	wb.Transition("LOOP", "tick", "LOOP")
	d, err := wb.Build()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchEngine is an engine on st on the real clock whose sender admits
// loopback, with its delivery loop running (stopped when b ends), and
// runs runs of loopFlow.
func benchEngine(b *testing.B, st store.Store, runs int) (*engine.Engine, []string) {
	eng, ids, _ := benchEngineLoop(b, st, runs)
	return eng, ids
}

// benchEngineLoop is benchEngine that also returns the delivery loop.
func benchEngineLoop(b *testing.B, st store.Store, runs int) (*engine.Engine, []string, *engine.DeliveryLoop) {
	allow, err := webhook.ParseAllowList("127.0.0.1/32")
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(st, []*workflow.Definition{loopFlow(b)}, &engine.Options{Webhooks: webhook.NewSender(&webhook.Options{Policy: webhook.Policy{Allow: allow}})})
	if err != nil {
		b.Fatal(err)
	}
	loop := eng.StartDeliveries(&engine.DeliveryOptions{Owner: "bench"})
	b.Cleanup(loop.Stop)
	ids := make([]string, runs)
	for i := range ids {
		r, err := eng.StartRun(context.Background(), "", nil, engine.StartOptions{Actor: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	return eng, ids, loop
}

func subscribe(b *testing.B, eng *engine.Engine, url string) {
	if _, err := eng.CreateWebhook(context.Background(), protocol.WebhookRequest{URL: url, Events: []string{protocol.WebhookRunStateChanged}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTransitionsWithWebhook measures what a subscription costs the
// transitions (docs/PERFORMANCE.md, "Webhooks"; the target: at least 0.9
// of the throughput without one). On each backend it opens two stores,
// each with an engine, -wh-workers*2 runs and the delivery loop running;
// one engine has a subscription that wants every transition, to a
// loopback receiver answering 204. Then, for -wh-rounds rounds (which
// engine goes first alternating), each engine commits ticks with
// -wh-workers concurrent writers for -wh-phase; after the subscribed
// engine's phase the benchmark waits until its outbox is empty (so
// deliveries left over never run during the other's phase). It reports
// both throughputs, ratio (with over none, the commit phases only: the
// deliveries run beside them), ratio-sustained (the drain time counted
// in the subscribed engine's time: what it sustains when every message is
// also sent) and the largest backlog left at the end of a phase.
//
//	go test -run '^$' -bench TransitionsWithWebhook/sqlite -benchtime 1x ./webhook/
func BenchmarkTransitionsWithWebhook(b *testing.B) {
	for _, be := range backends.All() {
		b.Run(be.Name, func(b *testing.B) {
			rc := newSink(b, false)
			workers := *whWorkers
			none, noneRuns := benchEngine(b, be.New(b).Open(b), 2*workers)
			withStore := be.New(b).Open(b)
			with, withRuns, withLoop := benchEngineLoop(b, withStore, 2*workers)
			subscribe(b, with, rc.srv.URL+"/hook")
			if *whNoSend {
				withLoop.Stop() // Stop twice (here and at cleanup) is fine
			}
			ctx := context.Background()
			for range b.N {
				var count [2]int64
				var spent, drain [2]time.Duration
				var backlog int64
				engines := [2]*engine.Engine{none, with}
				runs := [2][]string{noneRuns, withRuns}
				for round := range *whRounds {
					for k := range 2 {
						k := (k + round) % 2
						n, d := tickFor(b, engines[k], runs[k], workers, *whPhase)
						count[k] += n
						spent[k] += d
						if k == 1 && !*whNoSend {
							start := time.Now()
							left, err := withStore.PendingDeliveries(ctx)
							if err != nil {
								b.Fatal(err)
							}
							backlog = max(backlog, left)
							for left > 0 {
								if time.Since(start) > 2*time.Minute {
									b.Fatalf("%d deliveries still pending two minutes after a phase", left)
								}
								time.Sleep(5 * time.Millisecond)
								if left, err = withStore.PendingDeliveries(ctx); err != nil {
									b.Fatal(err)
								}
							}
							drain[k] += time.Since(start)
						}
					}
				}
				if got := rc.n.Load(); got < count[1] && !*whNoSend {
					b.Fatalf("receiver got %d messages, want %d", got, count[1])
				}
				tps := func(k int, d time.Duration) float64 { return float64(count[k]) / d.Seconds() }
				b.ReportMetric(tps(0, spent[0]), "tps-none")
				b.ReportMetric(tps(1, spent[1]), "tps-with")
				b.ReportMetric(tps(1, spent[1])/tps(0, spent[0]), "ratio")
				b.ReportMetric(tps(1, spent[1]+drain[1])/tps(0, spent[0]), "ratio-sustained")
				b.ReportMetric(float64(backlog), "max-backlog")
				b.ReportMetric(float64(count[1]), "messages")
			}
		})
	}
}

// tickFor ticks runs with workers concurrent writers (worker w the runs
// w, w+workers, …, in turn) for d, and returns how many transitions
// committed and the time taken.
func tickFor(b *testing.B, eng *engine.Engine, runs []string, workers int, d time.Duration) (int64, time.Duration) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(end); i += workers {
				if _, err := eng.Transition(context.Background(), runs[i%len(runs)], "tick", nil, engine.TransitionOptions{Actor: "bench"}); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return n.Load(), took
}

// BenchmarkWebhookLatency measures how soon a message reaches its
// receiver (docs/PERFORMANCE.md, "Webhooks"; the target: p99 under
// 200 ms). On each backend, an engine with its delivery loop (default
// DeliveryOptions, real clock) and one subscription to a loopback
// receiver answering 204 commits -lat-rate transitions a second (paced,
// round-robin over -lat-runs runs) for -lat-for; once every message has
// arrived it reports, for each, its arrival at the receiver minus the
// event's timestamp in its body: mean, p99 and max in milliseconds, and
// the rate the transitions achieved.
//
//	go test -run '^$' -bench WebhookLatency/sqlite -benchtime 1x ./webhook/
func BenchmarkWebhookLatency(b *testing.B) {
	for _, be := range backends.All() {
		b.Run(be.Name, func(b *testing.B) {
			for range b.N {
				rc := newSink(b, true)
				eng, runs := benchEngine(b, be.New(b).Open(b), *latRuns)
				subscribe(b, eng, rc.srv.URL+"/hook")
				total := int(float64(*latRate) * latFor.Seconds())
				made, took := paced(b, eng, runs, *latRate, total)
				deadline := time.Now().Add(time.Minute)
				for rc.n.Load() < int64(made) {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d messages arrived a minute after the last transition", rc.n.Load(), made)
					}
					time.Sleep(10 * time.Millisecond)
				}
				rc.mu.Lock()
				got := slices.Clone(rc.got)
				rc.mu.Unlock()
				seen := map[string]bool{}
				lat := make([]time.Duration, 0, len(got))
				for _, g := range got {
					if seen[g.id] {
						continue // a duplicate: the first arrival counts
					}
					seen[g.id] = true
					var m protocol.WebhookMessage
					if err := json.Unmarshal(g.body, &m); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, g.at.Sub(m.Timestamp))
				}
				if len(lat) != made {
					b.Fatalf("%d distinct messages arrived, want %d", len(lat), made)
				}
				mean, p99, worst := latStats(lat)
				b.ReportMetric(mean, "mean-ms")
				b.ReportMetric(p99, "p99-ms")
				b.ReportMetric(worst, "max-ms")
				b.ReportMetric(float64(made), "messages")
				b.ReportMetric(float64(made)/took.Seconds(), "msgs/s")
				b.ReportMetric(float64(len(got)-len(lat)), "duplicates")
			}
		})
	}
}

// paced commits total ticks at rate a second, the i-th not before start
// plus i/rate, with enough writers to keep up; it returns how many
// committed and how long that took.
func paced(b *testing.B, eng *engine.Engine, runs []string, rate, total int) (int, time.Duration) {
	const writers = 64
	next := make(chan int, 1024)
	var wg sync.WaitGroup
	var n atomic.Int64
	errs := make(chan error, 1)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := eng.Transition(context.Background(), runs[i%len(runs)], "tick", nil, engine.TransitionOptions{Actor: "bench"}); err != nil {
					select {
					case errs <- fmt.Errorf("tick %d: %w", i, err):
					default:
					}
					continue
				}
				n.Add(1)
			}
		}()
	}
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d)
		}
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return int(n.Load()), took
}

// latStats returns the mean, 99th percentile and largest of ds, in
// milliseconds.
func latStats(ds []time.Duration) (mean, p99, worst float64) {
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	i := int(math.Ceil(0.99*float64(len(s)))) - 1
	return ms(sum / time.Duration(len(s))), ms(s[i]), ms(s[len(s)-1])
}
