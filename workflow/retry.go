package workflow

import (
	"math/rand/v2"
	"time"
)

// MaxDelay bounds every delay a workflow declares: a timer's after, a
// retry's backoff and max_backoff (36500d, 100 years). A longer one would
// fall due past what a time can be stored as (2262) and is refused when
// the workflow is loaded; a retry's growing wait never passes it.
const MaxDelay = 36500 * 24 * time.Hour

// MaxRetryAttempts bounds a retry policy's max_attempts.
const MaxRetryAttempts = 10000

// RetryPolicy says how a state's task is retried when an attempt fails:
// up to MaxAttempts attempts in all, the n-th retry waiting
// Backoff·2^(n-1), at most MaxBackoff, and with Jitter a random part of
// that. The task's on_failure fires only after the last attempt fails.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included (>= 1; 1 means
	// no retry).
	MaxAttempts int
	// Backoff is the wait before the first retry (> 0).
	Backoff time.Duration
	// MaxBackoff caps the wait (>= Backoff); 0 means 100 × Backoff, as
	// Temporal's default maximum interval, at most MaxDelay.
	MaxBackoff time.Duration
	// Jitter, when set, makes each wait a uniformly random duration in
	// [0, the computed wait): "full jitter", as AWS Step Functions'
	// JitterStrategy FULL, which spreads the retries of many runs that
	// failed together.
	Jitter bool

	backoffText, maxBackoffText string  // the file's spellings, parsed by validation
	maxAttemptsFrac             float64 // the file's max_attempts when it is not a whole number
}

// maxBackoff is the cap in effect.
func (p RetryPolicy) maxBackoff() time.Duration {
	if p.MaxBackoff > 0 {
		return min(p.MaxBackoff, MaxDelay)
	}
	if p.Backoff > MaxDelay/100 {
		return MaxDelay
	}
	return 100 * p.Backoff
}

// Delay returns how long to wait after attempt (1 = the first) failed
// before the next one: Backoff·2^(attempt-1), at most MaxBackoff; with
// Jitter, that times rnd() (a number in [0, 1); nil means math/rand/v2's
// Float64). An attempt below 1 counts as 1.
func (p RetryPolicy) Delay(attempt int, rnd func() float64) time.Duration {
	if p.Backoff <= 0 {
		return 0
	}
	limit := p.maxBackoff()
	d := p.Backoff
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	d = min(d, limit)
	if !p.Jitter {
		return d
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	f := rnd()
	if f < 0 || f >= 1 || f != f {
		f = 0
	}
	return time.Duration(f * float64(d))
}

// Next says what follows a failed attempt (1 = the first): whether another
// attempt is allowed, and the wait before it. A nil policy allows none.
func (p *RetryPolicy) Next(attempt int, rnd func() float64) (time.Duration, bool) {
	if p == nil || attempt >= p.MaxAttempts {
		return 0, false
	}
	return p.Delay(attempt, rnd), true
}
