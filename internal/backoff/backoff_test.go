package backoff

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: 300 * time.Second}
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{-3, 100 * time.Millisecond},
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{12, 204800 * time.Millisecond},
		{13, 300 * time.Second}, // 409.6s capped
		{20, 300 * time.Second},
		{64, 300 * time.Second},
		{math.MaxInt, 300 * time.Second},
	}
	for _, tt := range tests {
		if got := p.Ceiling(tt.attempt); got != tt.want {
			t.Errorf("Ceiling(%d) = %v, want %v", tt.attempt, got, tt.want)
		}
	}
}

func TestCeilingEdgePolicies(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		attempt int
		want    time.Duration
	}{
		{"zero initial", Policy{Max: time.Second}, 5, 0},
		{"uncapped", Policy{Initial: time.Second}, 11, 1024 * time.Second},
		{"uncapped no overflow", Policy{Initial: time.Second}, 62, math.MaxInt64},
		{"max below initial", Policy{Initial: time.Second, Max: 10 * time.Millisecond}, 1, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := tt.p.Ceiling(tt.attempt); got != tt.want {
			t.Errorf("%s: Ceiling(%d) = %v, want %v", tt.name, tt.attempt, got, tt.want)
		}
	}
}

func TestDelayJitter(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: 300 * time.Second}
	tests := []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 0},
		{1, 0.5, 50 * time.Millisecond},
		{1, 0.999, 99900 * time.Microsecond},
		{3, 0.25, 100 * time.Millisecond},
		{20, 0.5, 150 * time.Second},
		{2, -1, 0},
		{2, math.NaN(), 0},
		{2, 7, 200 * time.Millisecond}, // clamped to the ceiling
	}
	for _, tt := range tests {
		if got := p.Delay(tt.attempt, tt.jitter); got != tt.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tt.attempt, tt.jitter, got, tt.want)
		}
	}
}

func TestBackoffNextAndReset(t *testing.T) {
	b := Backoff{Policy: Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}
	one := func() float64 { return 1 }
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := b.Next(one); got != w*time.Millisecond {
			t.Fatalf("Next #%d = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if b.Attempt() != len(want) {
		t.Fatalf("Attempt = %d, want %d", b.Attempt(), len(want))
	}
	b.Reset()
	if b.Attempt() != 0 {
		t.Fatalf("Attempt after Reset = %d", b.Attempt())
	}
	if got := b.Next(func() float64 { return 0.5 }); got != 5*time.Millisecond {
		t.Fatalf("Next after Reset = %v, want 5ms", got)
	}
}

// TestSleep: a delay that passes returns nil; an ended context returns its
// cause at once, however long the delay.
func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	cause := errors.New("engine closed")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
		t.Fatalf("Sleep with an ended context = %v, want its cause", err)
	}
}
