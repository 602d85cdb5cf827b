package fetch

import (
	"sync"
	"time"
)

// rttWindow is how long a round trip measured to a broker counts towards
// the fetcher's estimate (see roundTrips).
const rttWindow = 10 * time.Second

// roundTrips estimates a fetcher's round trip to its broker: the shortest
// answer time of its fetches that did not long-poll, in the current window
// of time and the one before it (windows of rttWindow, so the last 10 to
// 20 s). The shortest, because a fetch also waits for the broker's other
// work and for its answer's bytes, and the estimate is of the link: a
// loaded broker on loopback is still close, a broker across a WAN is
// never closer than its round trip. Kept in two windows, so a link that
// got shorter is seen at once and one that got longer within two
// windows; once nothing was measured for a whole window (the partitions
// long-poll, or fetch elsewhere) there is no estimate until the next
// measurement, so a link that changed meanwhile is never judged by the
// old one.
//
// Runners size their fetches by it (replica's sizeFetches): a partition
// has one fetch at a time, so across a long round trip it needs larger
// ones to keep up, while on a short one large fetches only cost memory
// and copying at both ends.
type roundTrips struct {
	mu        sync.Mutex
	cur, prev time.Duration // shortest of the current window and of the one before it; 0: none measured
	window    int64         // the current window's number, its start in rttWindows since 1970
}

// windowOf numbers the window of time holding now.
func windowOf(now time.Time) int64 { return now.UnixNano() / int64(rttWindow) }

// observe records the answer time d of a fetch sent at or before now.
func (t *roundTrips) observe(d time.Duration, now time.Time) {
	if d <= 0 {
		d = time.Nanosecond // measured, however short: not "none"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch w := windowOf(now); {
	case w <= t.window: // the current window (or a clock that stepped back)
		if t.cur == 0 || d < t.cur {
			t.cur = d
		}
	case w == t.window+1:
		t.prev, t.cur, t.window = t.cur, d, w
	default: // a whole window or more without a measurement
		t.prev, t.cur, t.window = 0, d, w
	}
}

// estimate is the shortest round trip measured in now's window and the one
// before it, 0 when there was none.
func (t *roundTrips) estimate(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch windowOf(now) {
	case t.window:
		if t.prev == 0 || (t.cur != 0 && t.cur < t.prev) {
			return t.cur
		}
		return t.prev
	case t.window + 1:
		return t.cur
	}
	return 0
}
