package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// Latency histograms. A mirrored batch spends its time in three places: at
// the source (until a fetch answer brings it), in the engine (from that
// answer until its Produce is sent: the handling itself, plus any wait for
// a full pipeline or the throttle) and at the destination (the Produce
// round trip). The engine measures the last two for every appended batch,
// per mirror, so an operator can tell a slow mirror from a slow cluster.

// latencyMin is the upper bound of the first bucket; bounds grow by
// 2^(1/latencySteps) from there, so a quantile is off by at most 19 %.
const (
	latencyMin     = 50 * time.Microsecond
	latencySteps   = 4  // buckets per doubling
	latencyBuckets = 96 // up to latencyMin·2^24 ≈ 14 minutes; the last one takes anything longer
)

// latencyHist counts durations; observe is safe from any goroutine and
// never allocates.
type latencyHist struct {
	counts [latencyBuckets]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

func (h *latencyHist) observe(d time.Duration) {
	h.counts[latencyBucket(d)].Add(1)
	h.sum.Add(int64(max(d, 0)))
}

// latencyBucket is the first bucket whose upper bound is at least d.
func latencyBucket(d time.Duration) int {
	if d <= latencyMin {
		return 0
	}
	i := int(math.Ceil(latencySteps * math.Log2(float64(d)/float64(latencyMin))))
	return min(i, latencyBuckets-1)
}

// latencyBound is the upper bound of bucket i.
func latencyBound(i int) time.Duration {
	return time.Duration(float64(latencyMin) * math.Exp2(float64(i)/latencySteps))
}

func (h *latencyHist) snapshot() LatencyHistogram {
	out := LatencyHistogram{Counts: make([]uint64, latencyBuckets), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	return out
}

// LatencyHistogram counts durations in buckets whose upper bounds grow by a
// quarter of a doubling from 50µs; Bound gives them.
type LatencyHistogram struct {
	Counts []uint64
	Sum    time.Duration // of every duration counted
}

// Bound is the upper bound of bucket i (the last bucket also counts
// anything longer).
func (LatencyHistogram) Bound(i int) time.Duration { return latencyBound(i) }

// Total is the number of durations counted.
func (h LatencyHistogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Quantile is the upper bound of the bucket holding the q-quantile (0 < q
// ≤ 1), 0 when nothing was counted: never less than the true quantile.
func (h LatencyHistogram) Quantile(q float64) time.Duration {
	total := h.Total()
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= max(rank, 1) {
			return latencyBound(i)
		}
	}
	return latencyBound(len(h.Counts) - 1)
}

// Since returns what was counted after prev, an earlier histogram of the
// same kind: the durations of a time window.
func (h LatencyHistogram) Since(prev LatencyHistogram) LatencyHistogram {
	out := LatencyHistogram{Counts: make([]uint64, len(h.Counts)), Sum: h.Sum - prev.Sum}
	for i, c := range h.Counts {
		if i < len(prev.Counts) && prev.Counts[i] <= c {
			c -= prev.Counts[i]
		}
		out.Counts[i] = c
	}
	return out
}

// MirrorLatency is how long the mirror's appended batches took, counted
// since the mirror started on this instance.
type MirrorLatency struct {
	// Engine: from the fetch answer that brought a batch until its
	// Produce was sent to the destination.
	Engine LatencyHistogram
	// DestinationProduce: the destination's Produce round trip.
	DestinationProduce LatencyHistogram
}
