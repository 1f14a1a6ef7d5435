package server

import (
	"testing"
	"time"
)

// takeN spends n tokens of key at now and reports how many were granted.
func takeN(l *limiter, key string, now time.Time, n int) int {
	got := 0
	for range n {
		if ok, _ := l.take(key, now); ok {
			got++
		}
	}
	return got
}

// The token bucket on a fake clock: a burst, then one token per 1/rate,
// never more than the burst after idling, and each client on its own.
func TestLimiterRefill(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLimiter(2, 3) // 2 per second, burst 3
	if got := takeN(l, "a", t0, 5); got != 3 {
		t.Fatalf("burst: %d of 5 granted, want 3", got)
	}
	ok, wait := l.take("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("empty bucket: ok %v, wait %v; want a refusal and 500ms (one token at 2 per second)", ok, wait)
	}
	if ok, wait := l.take("a", t0.Add(400*time.Millisecond)); ok || (wait-100*time.Millisecond).Abs() > time.Microsecond {
		t.Fatalf("400ms on: ok %v, wait %v; want a refusal and 100ms", ok, wait)
	}
	if got := takeN(l, "a", t0.Add(500*time.Millisecond), 2); got != 1 {
		t.Fatalf("500ms on: %d granted, want the one token that came back", got)
	}
	if got := takeN(l, "b", t0, 4); got != 3 {
		t.Fatalf("another client: %d of 4 granted, want its own burst of 3", got)
	}
	// Idling refills up to the burst, not beyond.
	if got := takeN(l, "a", t0.Add(30*time.Second), 10); got != 3 {
		t.Fatalf("after 30 s: %d of 10 granted, want the burst of 3", got)
	}
	// RateBurst 0 means twice the rate, rounded up.
	if got := takeN(newLimiter(1.25, 0), "c", t0, 10); got != 3 {
		t.Fatalf("default burst at 1.25 per second: %d granted, want 3", got)
	}
}

// Buckets idle for over a minute are dropped, so that a stream of new
// clients does not grow the map for ever; the active one is kept.
func TestLimiterForgetsIdleClients(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLimiter(1, 1)
	l.take("a", t0)
	l.take("b", t0)
	l.take("c", t0.Add(50*time.Second))
	l.take("d", t0.Add(70*time.Second)) // a and b idle for 70 s, c for 20 s
	if len(l.b) != 2 || l.b["c"] == nil || l.b["d"] == nil {
		t.Fatalf("buckets after the sweep: %v, want c and d", l.b)
	}
}
