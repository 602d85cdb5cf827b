package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOwnerGate: the gate is open while the last answered membership
// request was sent less than half a session ago, closes by itself after
// that, reopens on the next answer (waking a waiter), and is suspended by a
// gap longer than the session until resumed, whatever answers follow.
func TestOwnerGate(t *testing.T) {
	g := newGate()
	if !g.Allowed() {
		t.Fatal("an engine that joined nothing is gated")
	}
	g.arm(10 * time.Second)
	if !g.Allowed() {
		t.Fatal("closed at arming")
	}
	now := g.since()
	g.lastSent = now - int64(6*time.Second) // as if armed 6s ago
	g.openUntil.Store(g.lastSent + int64(g.bound))
	g.answered(now - int64(5500*time.Millisecond)) // sent 5.5s ago, over half the session
	if g.Allowed() {
		t.Fatal("open although the last answered request was sent over half a session ago")
	}
	woke := make(chan error, 1)
	go func() { woke <- g.Wait(context.Background()) }()
	g.answered(g.since())
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an answer did not wake the waiter")
	}

	if gap, ok := g.answered(g.lastSent + int64(11*time.Second)); !ok || gap != 11*time.Second {
		t.Fatalf("a gap of 11s over a 10s session: suspended %v (gap %s)", ok, gap)
	}
	if g.Allowed() {
		t.Fatal("open while suspended")
	}
	if _, ok := g.answered(g.lastSent + int64(time.Second)); ok || g.Allowed() {
		t.Fatal("the answer after the gap reopened the gate")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait while suspended with ctx done: %v", err)
	}
	if !g.resume() {
		t.Fatal("resume did not report the suspension")
	}
	if open, suspended := g.state(); suspended || !open {
		t.Fatalf("after resume: open %v, suspended %v", open, suspended)
	}
	if g.resume() {
		t.Fatal("resumed twice")
	}
}

// TestGateLeaseEndsWithTheRightToWrite: a write's lease ends where the
// gate closes by itself (half a session after the last answered
// membership request was sent), ends at once while the gate is closed
// (leased refuses the write with errNotOwner), and never ends for an
// engine that is no instance. A record handed to a client with it is
// dropped if it is not on the wire by then.
func TestGateLeaseEndsWithTheRightToWrite(t *testing.T) {
	g := newGate()
	ctx, cancel := g.Lease(context.Background())
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a lease of an engine that joined nothing ends")
	}
	cancel()
	g.arm(10 * time.Second)
	ctx, cancel = g.Lease(context.Background())
	dl, ok := ctx.Deadline()
	cancel()
	want := g.start.Add(time.Duration(g.lastSent) + g.bound)
	if !ok || !dl.Equal(want) {
		t.Fatalf("lease ends at %v (%v), want %v, half a session after the last answer was sent", dl, ok, want)
	}
	g.mu.Lock()
	g.lastSent = g.since() - int64(6*time.Second)
	g.openUntil.Store(g.lastSent + int64(g.bound))
	g.mu.Unlock()
	ctx, cancel = g.Lease(context.Background())
	defer cancel()
	if ctx.Err() == nil {
		t.Fatal("a lease taken with the gate closed has not ended")
	}
	if _, _, err := g.leased(context.Background()); !errors.Is(err, errNotOwner) {
		t.Fatalf("a sync write with the gate closed: %v, want %v", err, errNotOwner)
	}
}
