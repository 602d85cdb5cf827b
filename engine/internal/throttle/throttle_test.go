package throttle

import (
	"testing"
	"time"
)

func TestBucketPacesBytesPerWindow(t *testing.T) {
	clock := time.Unix(0, 0)
	b := New(1000, func() time.Time { return clock })
	if d := b.Reserve(600); d != 0 {
		t.Fatalf("full bucket: wait %s", d)
	}
	if d := b.Reserve(900); d != 500*time.Millisecond {
		t.Fatalf("500 bytes over: wait %s, want 500ms", d)
	}
	// A sender that waits as told moves exactly rate bytes per second over
	// any long window.
	sent := 1500
	for range 100 {
		d := b.Reserve(250)
		clock = clock.Add(d)
		sent += 250
	}
	elapsed := clock.Sub(time.Unix(0, 0)).Seconds()
	if rate := float64(sent-1000) / elapsed; rate < 999 || rate > 1001 {
		t.Fatalf("%d bytes in %.2fs: %.1f B/s beyond the burst, want 1000", sent, elapsed, rate)
	}
	// Idle time refills, but never beyond one second's worth.
	clock = clock.Add(time.Hour)
	if d := b.Reserve(1000); d != 0 {
		t.Fatalf("after idling: wait %s", d)
	}
	if d := b.Reserve(100); d != 100*time.Millisecond {
		t.Fatalf("burst capped at the rate: wait %s, want 100ms", d)
	}
}
