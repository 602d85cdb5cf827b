// Package throttle is the token bucket behind mirror.replication.throttled.rate:
// one bucket per mirror, shared by its partitions' appenders.
package throttle

import (
	"sync"
	"time"
)

// Bucket admits bytes at Rate per second with bursts of up to one second's
// worth. It never blocks: Reserve says how long the caller must wait.
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	tokens float64
	last   time.Time
	now    func() time.Time
}

// New returns a bucket of rate bytes per second, full; now is its clock.
func New(rate int64, now func() time.Time) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: float64(rate), tokens: float64(rate), last: now(), now: now}
}

// Reserve takes n bytes from the bucket and returns how long to wait before
// sending them: zero while the bucket has them, otherwise the time the rate
// needs to pay the debt. Reservations queue: each one waits for all before.
func (b *Bucket) Reserve(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate <= 0 {
		return 0 // unthrottled
	}
	now := b.now()
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.rate, b.tokens+dt*b.rate)
		b.last = now
	}
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// SetRate changes the rate, 0 unthrottled, without a restart: a debt
// already reserved is paid at the new rate, and an unthrottled bucket
// starts full.
func (b *Bucket) SetRate(rate int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate <= 0 {
		b.tokens, b.last = float64(rate), b.now()
	}
	b.rate = float64(rate)
	b.tokens = min(b.tokens, b.rate)
}

// Rate is the rate in effect, bytes per second; 0 unthrottled.
func (b *Bucket) Rate() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.rate)
}
