package webhook_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asmp-dev/asmp/webhook"
)

func TestScheduleDelays(t *testing.T) {
	var s webhook.Schedule // the defaults: 5 s … 1 h, ×2, 25 % jitter
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 320 * time.Second, 640 * time.Second, 1280 * time.Second, 2560 * time.Second, time.Hour, time.Hour}
	for i, w := range want {
		if got := s.Delay(i+1, 0); got != w {
			t.Errorf("retry %d with no jitter: %s, want %s", i+1, got, w)
		}
	}
	// The most jitter takes a quarter off, never below the first delay.
	for n, w := range map[int]time.Duration{1: 5 * time.Second, 2: 7500 * time.Millisecond, 3: 15 * time.Second, 11: 45 * time.Minute, 1000: 45 * time.Minute} {
		if got := s.Delay(n, 1); got != w {
			t.Errorf("retry %d with the most jitter: %s, want %s", n, got, w)
		}
	}
	// Jitter spreads the delays: every one within its bounds.
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := s.Delay(20, rng.Float64())
		if d < 45*time.Minute || d > time.Hour {
			t.Fatalf("retry 20: %s, outside [45m, 1h]", d)
		}
		seen[d] = true
	}
	if len(seen) < 900 {
		t.Errorf("1000 jittered delays took only %d values", len(seen))
	}
	// Configured.
	c := webhook.Schedule{FirstDelay: time.Second, MaxDelay: 10 * time.Second, Factor: 3, Jitter: -1}
	for i, w := range []time.Duration{time.Second, 3 * time.Second, 9 * time.Second, 10 * time.Second} {
		if got := c.Delay(i+1, 0.9); got != w {
			t.Errorf("configured retry %d: %s, want %s", i+1, got, w)
		}
	}
}

// With a receiver that never answers 2xx, the message is tried until the
// next attempt would fall more than 24 h after the first, then failed.
func TestScheduleGivesUpAfter24Hours(t *testing.T) {
	var s webhook.Schedule
	first := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	zero := func() float64 { return 0 }
	at, attempts := first, 1
	var times []time.Time
	for {
		next, ok := s.Next(attempts, first, at, 0, zero)
		if !ok {
			break
		}
		if !next.After(at) {
			t.Fatalf("attempt %d at %v is not after %v", attempts+1, next, at)
		}
		at, attempts = next, attempts+1
		times = append(times, at)
	}
	// 10 doubling delays (5 s … 2560 s: 5115 s in all), then hourly ones
	// while they fit in 24 h: 22 more.
	if attempts != 33 {
		t.Errorf("%d attempts, want 33", attempts)
	}
	last := times[len(times)-1]
	if want := first.Add(5115*time.Second + 22*time.Hour); !last.Equal(want) {
		t.Errorf("last attempt at %v, want %v", last, want)
	}
	if last.Sub(first) > 24*time.Hour || last.Add(time.Hour).Sub(first) <= 24*time.Hour {
		t.Errorf("gave up at %v after the first attempt, with an hour's delay left %v", last.Sub(first), 24*time.Hour-last.Sub(first))
	}

	// A shorter give-up, configured.
	short := webhook.Schedule{GiveUp: time.Minute}
	if _, ok := short.Next(3, first, first.Add(35*time.Second), 0, zero); !ok {
		t.Error("gave up before a minute passed") // 35 s + 20 s = 55 s
	}
	if _, ok := short.Next(4, first, first.Add(35*time.Second), 0, zero); ok {
		t.Error("did not give up: 35 s + 40 s is past a minute")
	}
}

func TestScheduleHonoursRetryAfter(t *testing.T) {
	var s webhook.Schedule
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	zero := func() float64 { return 0 }
	if next, _ := s.Next(1, t0, t0, 2*time.Minute, zero); !next.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("Retry-After 2m: next at %v", next)
	}
	if next, _ := s.Next(1, t0, t0, 1*time.Second, zero); !next.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("a Retry-After shorter than the backoff: next at %v", next)
	}
	if next, _ := s.Next(1, t0, t0, 48*time.Hour, zero); !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("Retry-After beyond the largest delay: next at %v", next)
	}
	// The random source is used once per call; nil means math/rand.
	calls := 0
	s.Next(1, t0, t0, 0, func() float64 { calls++; return 0.5 })
	if calls != 1 {
		t.Errorf("rnd called %d times", calls)
	}
	if next, ok := s.Next(5, t0, t0, 0, nil); !ok || next.Before(t0.Add(60*time.Second)) || next.After(t0.Add(80*time.Second)) {
		t.Errorf("nil rnd: %v %v", next, ok)
	}
}
