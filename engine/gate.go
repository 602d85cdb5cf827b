package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/store"
)

// ownerGate lets an instance write (append, fence, persist) only while it
// can be sure its group still counts it as the owner of its shards.
//
// The group coordinator removes a member a session timeout after the last
// heartbeat it received, and that heartbeat was sent no earlier than the
// last request of the member the coordinator answered. So from the send time
// of the last answered membership request (Heartbeat, JoinGroup, SyncGroup),
// the instance has a session timeout before anyone else may own its shards;
// it writes only during the first half (bound) of it, which leaves the rest
// for a write let through just before the gate closed to land.
//
// A gap longer than the session between two answered requests means the
// member may have been removed meanwhile (the process was frozen, or the
// coordinator unreachable): the answer that ends the gap may well be the
// coordinator saying the member is gone. The instance then stays suspended
// until the group hands it shards again, whatever the later answers.
//
// The hot path reads one atomic (openUntil) and the monotonic clock; the
// rest changes about once a second, under mu.
type ownerGate struct {
	start   time.Time // the origin of the gate's monotonic nanoseconds
	session time.Duration
	bound   time.Duration

	// openUntil is when writes must stop, in nanoseconds since start:
	// math.MaxInt64 for an engine that is no instance (StartMirror), 0 while
	// suspended.
	openUntil atomic.Int64

	mu        sync.Mutex
	lastSent  int64 // send time of the last answered membership request
	suspended bool
	wake      chan struct{} // closed and replaced when the gate opens
}

// newGate returns a gate that is always open.
func newGate() *ownerGate {
	g := &ownerGate{start: time.Now(), wake: make(chan struct{})}
	g.openUntil.Store(math.MaxInt64)
	return g
}

func (g *ownerGate) since() int64 { return int64(time.Since(g.start)) }

// arm makes the gate follow the group membership of an instance whose
// session timeout is session. Until the first answer, the instance owns
// nothing, and may write as if it had just been answered.
func (g *ownerGate) arm(session time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.session, g.bound = session, session/2
	g.lastSent = g.since()
	g.openUntil.Store(g.lastSent + int64(g.bound))
}

// allowed reports whether the instance may write now. A nil gate (the
// source cluster's) is always open.
func (g *ownerGate) Allowed() bool {
	return g == nil || g.since() < g.openUntil.Load()
}

// errNotOwner drops one of the instance's own writes while the gate is
// closed.
var errNotOwner = errors.New("not written: this instance may no longer own its shards (its group session is in doubt)")

// leased is Lease for one write of the engine's metadata, group or write
// guard sync: it fails with errNotOwner at once while the gate is closed.
func (g *ownerGate) leased(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if !g.Allowed() {
		return ctx, func() {}, errNotOwner
	}
	lctx, cancel := g.Lease(ctx)
	return lctx, cancel, nil
}

// Lease returns a context that ends when the instance's present right to
// write does: a write handed to a client with it is dropped if it is not
// on the wire by then (kgo fails a record whose context ended before its
// batch is written, and sends no retry of a request after it), so nothing
// an instance the group may have replaced queued lands late. It ends at
// once while the gate is closed, and never for an engine that is no
// instance. A lease is taken per write: the gate opens further with each
// answered heartbeat.
func (g *ownerGate) Lease(ctx context.Context) (context.Context, context.CancelFunc) {
	if g == nil {
		return context.WithCancel(ctx)
	}
	until := g.openUntil.Load()
	if until == math.MaxInt64 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, g.start.Add(time.Duration(until)))
}

// wait returns once the instance may write, or with ctx's error: a runner
// blocked here ends cleanly when its shard is revoked.
func (g *ownerGate) Wait(ctx context.Context) error {
	for !g.Allowed() {
		g.mu.Lock()
		wake := g.wake
		g.mu.Unlock()
		if g.Allowed() { // opened before wake was read
			return nil
		}
		// The clock alone never opens the gate: an answer or a new
		// assignment does, and both close wake.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
	return nil
}

// state reports whether the gate is open and whether it is suspended.
func (g *ownerGate) state() (open, suspended bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Allowed(), g.suspended
}

// answered records the answer to a membership request sent at sent; it
// reports the gap since the previous one when that gap suspends the gate.
func (g *ownerGate) answered(sent int64) (suspendedBy time.Duration, suspended bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sent <= g.lastSent {
		return 0, false // an older request answered late proves nothing new
	}
	gap := time.Duration(sent - g.lastSent)
	g.lastSent = sent
	if g.suspended {
		return 0, false
	}
	if gap > g.session {
		g.suspended = true
		g.openUntil.Store(0)
		return gap, true
	}
	g.open(sent + int64(g.bound))
	return 0, false
}

// resume ends a suspension once the group assigned shards again; it
// reports whether the gate was suspended.
func (g *ownerGate) resume() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.suspended {
		return false
	}
	g.suspended = false
	g.open(g.lastSent + int64(g.bound))
	return true
}

// open moves openUntil to until and wakes the waiters if that opens the
// gate. g.mu is held.
func (g *ownerGate) open(until int64) {
	was := g.Allowed()
	g.openUntil.Store(max(g.openUntil.Load(), until))
	if !was && g.Allowed() {
		close(g.wake)
		g.wake = make(chan struct{})
	}
}

// membershipKeys are the requests whose answers prove that the group
// coordinator heard from the member: the classic protocol's Heartbeat,
// JoinGroup and SyncGroup (a join can take longer than a heartbeat
// interval), and KIP-848's ConsumerGroupHeartbeat.
var membershipKeys = map[int16]bool{
	int16(kmsg.Heartbeat): true, int16(kmsg.JoinGroup): true,
	int16(kmsg.SyncGroup): true, int16(kmsg.ConsumerGroupHeartbeat): true,
}

// gateHook feeds a gate the answers the group member's client reads.
type gateHook struct {
	g         *ownerGate
	suspended func(gap time.Duration)
}

var _ kgo.HookBrokerE2E = gateHook{}

// OnBrokerE2E runs on the client's connection goroutine as each answer is
// read, before the client acts on it: a suspension is in place before an
// OnPartitionsAssigned that follows the same answers.
func (h gateHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if !membershipKeys[key] || e2e.Err() != nil {
		return
	}
	sent := h.g.since() - int64(e2e.DurationE2E())
	if gap, ok := h.g.answered(sent); ok {
		h.suspended(gap)
	}
}

// suspended is the gate's report that the group may have replaced this
// instance; it runs on the group member's connection goroutine.
func (c *coordinator) suspended(gap time.Duration) {
	c.e.emit(LevelWarn, "", store.Topic, -1, fmt.Sprintf(
		"suspended: the instances' group answered nothing for %s, longer than its session timeout %s, so it may have given this instance's shards to another; no appends or %s writes until it assigns shards here again",
		gap.Round(time.Millisecond), sessionTimeout, store.Topic))
	select {
	case c.rejoin <- struct{}{}:
	default:
	}
}

// reportGate tells when appends and state writes wait for an answer of the
// group (the suspension reports itself).
func (c *coordinator) reportGate() {
	open, suspended := c.e.gate.state()
	switch {
	case !open && !suspended && !c.gateShut && len(c.owned) > 0:
		c.gateShut = true
		c.e.emit(LevelWarn, "", store.Topic, -1, fmt.Sprintf(
			"the instances' group has not answered for over %s: appends and %s writes wait for its next answer", c.e.gate.bound, store.Topic))
	case c.gateShut && (open || suspended):
		c.gateShut = false
		if open {
			c.e.emit(LevelInfo, "", store.Topic, -1, "the instances' group answers again: appends and "+store.Topic+" writes resume")
		}
	}
}
