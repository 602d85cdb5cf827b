// Package backoff computes capped, full-jitter exponential delays, and
// waits them out (Sleep). The computation is pure: callers pass the
// randomness in, so the partition state machine can replay a retry schedule
// exactly and network retries can share the same policy.
package backoff

import (
	"context"
	"math"
	"time"
)

// Policy is a capped exponential backoff: retry n waits a random fraction of
// min(Max, Initial·2^(n-1)). Full jitter (rather than "half" or "equal"
// jitter) spreads the retries of many partitions that failed together, which
// is the common case after a broker bounce.
type Policy struct {
	Initial time.Duration // ceiling of the first retry; <= 0 means no wait
	Max     time.Duration // cap of every ceiling; <= 0 means uncapped
}

// Ceiling returns min(Max, Initial·2^(attempt-1)), the longest delay of the
// given attempt. Attempts below 1 count as 1. It never overflows.
func (p Policy) Ceiling(attempt int) time.Duration {
	if p.Initial <= 0 {
		return 0
	}
	limit := p.Max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if attempt < 1 {
		attempt = 1
	}
	shift := attempt - 1
	if shift >= 63 || p.Initial > limit>>shift {
		return limit
	}
	return min(limit, p.Initial<<shift)
}

// Delay returns jitter·Ceiling(attempt). jitter is a fraction in [0, 1);
// values outside are clamped (NaN counts as 0), so a bad random source can
// shorten a wait but never exceed the cap.
func (p Policy) Delay(attempt int, jitter float64) time.Duration {
	switch {
	case !(jitter > 0): // also catches NaN
		return 0
	case jitter > 1:
		jitter = 1
	}
	return time.Duration(jitter * float64(p.Ceiling(attempt)))
}

// Backoff walks a Policy one attempt at a time. The zero value of the embedded
// Policy waits nothing; a Backoff is not safe for concurrent use (it belongs to
// the one goroutine that retries).
type Backoff struct {
	Policy
	attempt int
}

// Next advances to the next attempt and returns its delay, drawing the jitter
// from rnd (for example rand.Float64).
func (b *Backoff) Next(rnd func() float64) time.Duration {
	if b.attempt < math.MaxInt32 {
		b.attempt++
	}
	return b.Delay(b.attempt, rnd())
}

// Attempt returns how many delays Next has handed out since the last Reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Reset starts over at the first attempt, after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Sleep waits d, or less if ctx ends first; then it returns ctx's cause.
// It is how every retry loop waits out the delay it computed.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
