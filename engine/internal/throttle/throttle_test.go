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

func TestSetRateLive(t *testing.T) {
	clock := time.Unix(0, 0)
	b := New(0, func() time.Time { return clock })
	if d := b.Reserve(1 << 30); d != 0 || b.Rate() != 0 {
		t.Fatalf("unthrottled: wait %s rate %d", d, b.Rate())
	}
	b.SetRate(1000)
	if d := b.Reserve(1000); d != 0 {
		t.Fatalf("newly throttled bucket not full: wait %s", d)
	}
	if d := b.Reserve(500); d != 500*time.Millisecond {
		t.Fatalf("at 1000 B/s: wait %s", d)
	}
	b.SetRate(2000) // the debt of 500 bytes is paid at the new rate
	if d := b.Reserve(0); d != 250*time.Millisecond {
		t.Fatalf("at 2000 B/s: wait %s", d)
	}
	b.SetRate(0)
	if d := b.Reserve(1 << 20); d != 0 || b.Rate() != 0 {
		t.Fatalf("unthrottled again: wait %s", d)
	}
}
