package engine

import (
	"testing"
	"time"
)

// TestLatencyBuckets: every duration lands in the first bucket whose
// upper bound holds it, so a quantile never understates.
func TestLatencyBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, latencyMin, latencyMin + 1, 73 * time.Microsecond,
		time.Millisecond, 15 * time.Millisecond, 999 * time.Millisecond, 3 * time.Second, time.Hour} {
		i := latencyBucket(d)
		if d > latencyBound(i) && i != latencyBuckets-1 {
			t.Errorf("%v in bucket %d, bound %v: below the duration", d, i, latencyBound(i))
		}
		if i > 0 && d <= latencyBound(i-1) {
			t.Errorf("%v in bucket %d, but bucket %d (bound %v) holds it", d, i, i-1, latencyBound(i-1))
		}
	}
	if r := float64(latencyBound(1)) / float64(latencyBound(0)); r < 1.18 || r > 1.2 {
		t.Errorf("bounds grow by %.3f per bucket, want 2^(1/4)", r)
	}
}

// TestLatencyQuantiles: quantiles of a known distribution, and of a window
// taken with Since.
func TestLatencyQuantiles(t *testing.T) {
	var h latencyHist
	if q := h.snapshot().Quantile(0.99); q != 0 {
		t.Fatalf("empty histogram p99 %v, want 0", q)
	}
	for range 98 {
		h.observe(time.Millisecond)
	}
	h.observe(40 * time.Millisecond)
	h.observe(40 * time.Millisecond)
	before := h.snapshot()
	within := func(got, want time.Duration) bool { return got >= want && float64(got) <= 1.19*float64(want) }
	if p50 := before.Quantile(0.5); !within(p50, time.Millisecond) {
		t.Errorf("p50 %v, want 1ms within a bucket", p50)
	}
	if p99 := before.Quantile(0.99); !within(p99, 40*time.Millisecond) {
		t.Errorf("p99 %v, want 40ms within a bucket", p99)
	}
	for range 10 {
		h.observe(5 * time.Millisecond)
	}
	w := h.snapshot().Since(before)
	if w.Total() != 10 || !within(w.Quantile(1), 5*time.Millisecond) || !within(w.Quantile(0.01), 5*time.Millisecond) {
		t.Errorf("window: %d durations, p1 %v, max %v; want 10 of 5ms", w.Total(), w.Quantile(0.01), w.Quantile(1))
	}
}
