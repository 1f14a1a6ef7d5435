package webhook

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of a Schedule.
const (
	DefaultFirstDelay = 5 * time.Second
	DefaultMaxDelay   = time.Hour
	DefaultGiveUp     = 24 * time.Hour
	DefaultFactor     = 2.0
	DefaultJitter     = 0.25
)

// Schedule is when a failed message is tried again: exponential backoff
// with jitter. The n-th retry waits FirstDelay·Factor^(n-1), capped at
// MaxDelay, less up to Jitter of that at random (but never less than
// FirstDelay); a delay the receiver asked for with Retry-After is honoured
// up to MaxDelay. Once the next attempt would fall more than GiveUp after
// the first one, the message is failed instead. Zero fields take the
// defaults (5 s, 1 h, 24 h, 2, 0.25); a negative Jitter means none.
//
// With the defaults the delays are about 5 s, 10 s, 20 s, … 42 min, then
// 1 h, and a message that never gets through is tried about 30 times.
type Schedule struct {
	FirstDelay time.Duration
	MaxDelay   time.Duration
	GiveUp     time.Duration
	Factor     float64
	Jitter     float64
}

func (s Schedule) withDefaults() Schedule {
	if s.FirstDelay <= 0 {
		s.FirstDelay = DefaultFirstDelay
	}
	if s.MaxDelay <= 0 {
		s.MaxDelay = DefaultMaxDelay
	}
	if s.MaxDelay < s.FirstDelay {
		s.MaxDelay = s.FirstDelay
	}
	if s.GiveUp <= 0 {
		s.GiveUp = DefaultGiveUp
	}
	if s.Factor < 1 {
		s.Factor = DefaultFactor
	}
	switch {
	case s.Jitter == 0:
		s.Jitter = DefaultJitter
	case s.Jitter < 0:
		s.Jitter = 0
	case s.Jitter > 1:
		s.Jitter = 1
	}
	return s
}

// Delay returns how long to wait before retry n (n ≥ 1: the first retry
// follows the first attempt). r is a random number in [0, 1): 0 waits the
// full exponential delay, values near 1 up to Jitter less.
func (s Schedule) Delay(n int, r float64) time.Duration {
	s = s.withDefaults()
	n = max(n, 1)
	full := float64(s.MaxDelay)
	if e := float64(s.FirstDelay) * math.Pow(s.Factor, float64(n-1)); e < full {
		full = e
	}
	r = min(max(r, 0), 1)
	d := time.Duration(full * (1 - s.Jitter*r))
	return min(max(d, s.FirstDelay), s.MaxDelay)
}

// Next returns when to make the next attempt of a message after its
// attempts-th failed one: first is when its first attempt was made, last
// when the failed one was, retryAfter the delay the receiver asked for (0:
// none). ok is false when the message should be given up: the next attempt
// would fall more than GiveUp after first. rnd is the random source (nil:
// math/rand/v2), called once.
func (s Schedule) Next(attempts int, first, last time.Time, retryAfter time.Duration, rnd func() float64) (next time.Time, ok bool) {
	s = s.withDefaults()
	if rnd == nil {
		rnd = rand.Float64
	}
	d := s.Delay(attempts, rnd())
	if retryAfter > d {
		d = min(retryAfter, s.MaxDelay)
	}
	next = last.Add(d)
	if next.Sub(first) > s.GiveUp {
		return time.Time{}, false
	}
	return next, true
}
