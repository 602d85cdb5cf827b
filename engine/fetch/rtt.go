package fetch

import (
	"sync"
	"time"
)

// rttWindow is how long a round trip measured to a broker counts towards
// the fetcher's estimate (see roundTrips).
const rttWindow = 10 * time.Second

// roundTrips estimates a fetcher's round trip to its broker: the shortest
// answer time of its fetches that did not long-poll, over the last one to
// two windows. The shortest, because a fetch also waits for the broker's
// other work and for its answer's bytes, and the estimate is of the link:
// a loaded broker on loopback is still close, a broker across a WAN is
// never closer than its round trip. Kept in two windows, so a link that
// got shorter is seen within two windows, and one that got longer too.
//
// Runners size their fetches by it (replica's sizeFetches): a partition
// has one fetch at a time, so across a long round trip it needs larger
// ones to keep up, while on a short one large fetches only cost memory
// and copying at both ends.
type roundTrips struct {
	mu        sync.Mutex
	cur, prev time.Duration // shortest of the current and the previous window; 0: none measured
	since     time.Time     // start of the current window
	last      time.Time     // the last measurement
}

// observe records the answer time d of a fetch sent at or before now.
func (t *roundTrips) observe(d time.Duration, now time.Time) {
	if d <= 0 {
		d = time.Nanosecond // measured, however short: not "none"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = now
	if now.Sub(t.since) >= rttWindow {
		t.prev, t.cur, t.since = t.cur, d, now
		return
	}
	if t.cur == 0 || d < t.cur {
		t.cur = d
	}
}

// estimate is the shortest round trip of the current and the previous
// window, 0 when none was measured.
func (t *roundTrips) estimate() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.prev == 0:
		return t.cur
	case t.cur == 0:
		return t.prev
	}
	return min(t.cur, t.prev)
}

// measuredAt is the estimate as of now for showing it: 0 when nothing was
// measured within the last two windows (the fetcher's partitions are idle,
// long-polling, or gone), where estimate keeps the last value for the
// next fetch's size.
func (t *roundTrips) measuredAt(now time.Time) time.Duration {
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	if last.IsZero() || now.Sub(last) >= 2*rttWindow {
		return 0
	}
	return t.estimate()
}
