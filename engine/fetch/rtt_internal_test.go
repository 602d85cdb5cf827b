package fetch

import (
	"testing"
	"time"
)

// TestRoundTripEstimate: the estimate is the shortest answer time of the
// current and the previous window: a slow answer (a loaded broker, a large
// answer) does not raise it, and a link that got longer or shorter is
// followed within two windows.
func TestRoundTripEstimate(t *testing.T) {
	var rt roundTrips
	t0 := time.Unix(1000, 0) // the start of a window
	if got := rt.estimate(t0); got != 0 {
		t.Fatalf("nothing measured: estimate %s, want 0", got)
	}
	rt.observe(50*time.Millisecond, t0)
	rt.observe(180*time.Millisecond, t0.Add(time.Second)) // a large answer
	if got := rt.estimate(t0.Add(time.Second)); got != 50*time.Millisecond {
		t.Fatalf("after 50 ms and 180 ms: estimate %s, want 50ms", got)
	}
	// The link gets shorter: seen at once, since the shortest counts.
	rt.observe(time.Millisecond, t0.Add(2*time.Second))
	if got := rt.estimate(t0.Add(2 * time.Second)); got != time.Millisecond {
		t.Fatalf("after 1 ms: estimate %s, want 1ms", got)
	}
	// The link gets longer: the 1 ms stays for the rest of its window and
	// the next, then only the new round trips count.
	at := t0.Add(rttWindow + time.Second)
	rt.observe(80*time.Millisecond, at)
	if got := rt.estimate(at); got != time.Millisecond {
		t.Fatalf("one window on: estimate %s, want the previous window's 1ms", got)
	}
	at = t0.Add(2*rttWindow + 2*time.Second)
	rt.observe(90*time.Millisecond, at)
	if got := rt.estimate(at); got != 80*time.Millisecond {
		t.Fatalf("two windows on: estimate %s, want 80ms", got)
	}
	// A zero duration (a coarse clock) still counts as measured.
	var z roundTrips
	z.observe(0, t0)
	if got := z.estimate(t0); got <= 0 {
		t.Fatalf("a 0 answer time: estimate %s, want a positive one", got)
	}
}

// TestRoundTripEstimateAges: what was measured counts in its window and
// the next, then no more, whether or not anything was measured since: a
// partition that long-polled for an hour is not sized, nor shown, by the
// round trip of an hour ago, and a window without a measurement leaves
// the one before it out too.
func TestRoundTripEstimateAges(t *testing.T) {
	var rt roundTrips
	t0 := time.Unix(1000, 0)
	rt.observe(5*time.Millisecond, t0)
	for _, c := range []struct {
		after time.Duration
		want  time.Duration
	}{
		{rttWindow - time.Millisecond, 5 * time.Millisecond},
		{2*rttWindow - time.Millisecond, 5 * time.Millisecond}, // the next window
		{2 * rttWindow, 0},
		{time.Hour, 0},
	} {
		if got := rt.estimate(t0.Add(c.after)); got != c.want {
			t.Errorf("%s after a 5 ms measurement: estimate %s, want %s", c.after, got, c.want)
		}
	}
	// An hour on, a 50 ms measurement: the 5 ms is gone.
	later := t0.Add(time.Hour)
	rt.observe(50*time.Millisecond, later)
	if got := rt.estimate(later); got != 50*time.Millisecond {
		t.Fatalf("an hour on, after a 50 ms measurement: estimate %s, want 50ms", got)
	}
	// A window with nothing measured between two measurements: the older
	// one does not come back as the window before.
	rt.observe(70*time.Millisecond, later.Add(2*rttWindow))
	if got := rt.estimate(later.Add(2 * rttWindow)); got != 70*time.Millisecond {
		t.Fatalf("after an empty window: estimate %s, want 70ms", got)
	}
}
