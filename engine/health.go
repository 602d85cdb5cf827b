package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// Membership is an instance's standing in the instances' group on
// __mirror_state, for a readiness check.
type Membership struct {
	Joined bool // Join was called: the engine is one of the instances
	// Writable: the group answered recently enough that the instance may
	// append and write state (its owner gate is open).
	Writable bool
	// Suspended: the group may have handed this instance's shards to
	// another; it writes nothing until the group assigns it shards again.
	Suspended bool
	Shards    int // shards of __mirror_state assigned, replayed and owned here
}

func (e *Engine) membership() Membership {
	c := e.coord
	if c == nil {
		return Membership{}
	}
	open, suspended := e.gate.state()
	return Membership{Joined: true, Writable: open, Suspended: suspended, Shards: int(c.shards.Load())}
}

// causeCounts counts events by failure cause. They are rare (a partition
// failing, a realignment), so a map under a lock does.
type causeCounts struct {
	mu sync.Mutex
	n  map[partition.Cause]int64
}

func (c *causeCounts) add(cause partition.Cause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[partition.Cause]int64)
	}
	c.n[cause]++
}

// snapshot is a copy of the counts, nil when there are none.
func (c *causeCounts) snapshot() map[partition.Cause]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Health is what a readiness check looks at, without the cost of a whole
// Snapshot (which copies every partition).
type Health struct {
	Observer  bool // an observer's: it joins no group and owns nothing
	Member    Membership
	DestReach Reachability
}

// Health returns the instance's standing in its group and whether the
// destination answers.
func (e *Engine) Health() Health {
	return Health{Member: e.membership(), DestReach: e.dstReach.state()}
}

// destProbe looks at the destination while the owner gate holds the
// heartbeats back: they are what tells an instance without mirrors
// whether the destination answers, and the gate closes precisely when
// the destination may be gone.
type destProbe struct {
	last    time.Time   // when the last probe started; owned by the coordinator's loop
	running atomic.Bool // a probe is on its way
}

// probeDestination starts a look at the destination (a metadata request)
// unless one runs or started less than a heartbeat interval ago; its
// answer goes to the destination's reachability as a heartbeat's would.
func (c *coordinator) probeDestination(ctx context.Context) {
	p := &c.hb.probe
	now := c.e.now()
	if now.Sub(p.last) < c.e.cfg.HeartbeatInterval || !p.running.CompareAndSwap(false, true) {
		return
	}
	p.last = now
	c.e.wg.Go(func() {
		defer p.running.Store(false)
		pctx, cancel := context.WithTimeout(ctx, 2*c.e.cfg.HeartbeatInterval)
		defer cancel()
		_, err := c.e.dst.metadata(pctx, []string{})
		switch {
		case err == nil:
			c.e.dstReach.ok(c.e.now())
		case ctx.Err() == nil:
			c.e.dstReach.failed(c.e.now(), err)
		}
	})
}
