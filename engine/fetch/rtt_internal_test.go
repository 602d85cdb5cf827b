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
	if got := rt.estimate(); got != 0 {
		t.Fatalf("nothing measured: estimate %s, want 0", got)
	}
	t0 := time.Unix(1000, 0)
	rt.observe(50*time.Millisecond, t0)
	rt.observe(180*time.Millisecond, t0.Add(time.Second)) // a large answer
	if got := rt.estimate(); got != 50*time.Millisecond {
		t.Fatalf("after 50 ms and 180 ms: estimate %s, want 50ms", got)
	}
	// The link gets shorter: seen at once, since the shortest counts.
	rt.observe(time.Millisecond, t0.Add(2*time.Second))
	if got := rt.estimate(); got != time.Millisecond {
		t.Fatalf("after 1 ms: estimate %s, want 1ms", got)
	}
	// The link gets longer: the 1 ms stays for the rest of its window and
	// the next, then only the new round trips count.
	rt.observe(80*time.Millisecond, t0.Add(rttWindow+time.Second))
	if got := rt.estimate(); got != time.Millisecond {
		t.Fatalf("one window on: estimate %s, want the previous window's 1ms", got)
	}
	rt.observe(90*time.Millisecond, t0.Add(2*rttWindow+2*time.Second))
	if got := rt.estimate(); got != 80*time.Millisecond {
		t.Fatalf("two windows on: estimate %s, want 80ms", got)
	}
	// A zero duration (a coarse clock) still counts as measured.
	var z roundTrips
	z.observe(0, t0)
	if got := z.estimate(); got <= 0 {
		t.Fatalf("a 0 answer time: estimate %s, want a positive one", got)
	}
}

// TestRoundTripShownOnlyWhileMeasured: what is shown (measuredAt) is the
// estimate while a measurement is at most two windows old, and nothing
// after, while the estimate itself keeps sizing the next fetch.
func TestRoundTripShownOnlyWhileMeasured(t *testing.T) {
	var rt roundTrips
	t0 := time.Unix(1000, 0)
	if got := rt.measuredAt(t0); got != 0 {
		t.Fatalf("nothing measured: shown %s, want 0", got)
	}
	rt.observe(50*time.Millisecond, t0)
	rt.observe(70*time.Millisecond, t0.Add(rttWindow))
	if got := rt.measuredAt(t0.Add(rttWindow + time.Second)); got != 50*time.Millisecond {
		t.Fatalf("a second after the last measurement: shown %s, want 50ms", got)
	}
	if got := rt.measuredAt(t0.Add(3*rttWindow - time.Millisecond)); got != 50*time.Millisecond {
		t.Fatalf("just under two windows after the last measurement: shown %s, want 50ms", got)
	}
	if got := rt.measuredAt(t0.Add(3 * rttWindow)); got != 0 {
		t.Fatalf("two windows after the last measurement: shown %s, want 0", got)
	}
	if got := rt.estimate(); got != 50*time.Millisecond {
		t.Fatalf("the estimate for fetch sizes: %s, want still 50ms", got)
	}
}
