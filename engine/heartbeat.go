package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/store"
)

// DefaultHeartbeatInterval is how often an instance writes its heartbeat
// unless configured otherwise.
const DefaultHeartbeatInterval = 3 * time.Second

// HeartbeatMisses is how many heartbeat intervals a reader waits before it
// calls an instance lost. One late write (a destination hiccup, a GC pause)
// must not make a live owner look lost.
const HeartbeatMisses = 3

// finalHeartbeatTimeout bounds the "stopped" heartbeat a closing instance
// writes: a destination that does not answer must not hold up the exit.
const finalHeartbeatTimeout = 3 * time.Second

// heartbeats is the coordinator's heartbeat bookkeeping, owned by its loop.
// At most one heartbeat is in flight: a destination slower than the
// interval gets the newest state when it answers, not a queue of old ones.
type heartbeats struct {
	due      bool    // write one as soon as the gate and the previous write allow
	inflight bool    // a write is on its way; done receives its outcome
	sent     []int32 // the shards of the last heartbeat handed over
	failing  bool    // the last write failed, and that was reported
	probe    destProbe
	done     chan error
}

// heartbeat writes the instance's heartbeat when one is due: every
// interval, and at once when the owned shards changed (a reader deciding
// whether a command will run should not wait for the next tick). Like
// every state write it passes the owner gate, without waiting for it: the
// loop must not block, and a heartbeat held back is written when the gate
// opens. An instance the group may have replaced writes none, so readers
// see it age towards lost.
func (c *coordinator) heartbeat(ctx context.Context) {
	shards := c.ownedShards()
	c.shards.Store(int32(len(shards)))
	if !slices.Equal(shards, c.hb.sent) {
		c.hb.due = true
	}
	if !c.e.gate.Allowed() {
		c.probeDestination(ctx) // no heartbeat tells whether the destination answers
		return
	}
	if !c.hb.due || c.hb.inflight {
		return
	}
	b, err := store.EncodeInstance(c.heartbeatRecord(shards, false))
	if err != nil {
		c.e.emit(LevelError, "", store.Topic, -1, fmt.Sprintf("heartbeat: %v", err))
		c.hb.due = false
		return
	}
	c.hb.due, c.hb.inflight, c.hb.sent = false, true, shards
	// Two intervals: a heartbeat older than that is not worth landing,
	// and the next one carries the newer state.
	wctx, cancel := context.WithTimeout(ctx, 2*c.e.cfg.HeartbeatInterval)
	c.w.PutAsync(wctx, store.InstanceKey(c.e.cfg.Instance), b, func(err error) {
		// The write is a look at the destination too, also for an
		// instance that runs no mirror.
		switch {
		case err == nil:
			c.e.dstReach.ok(c.e.now())
		case wctx.Err() == nil || errors.Is(wctx.Err(), context.DeadlineExceeded):
			c.e.dstReach.failed(c.e.now(), err)
		}
		cancel()
		c.hb.done <- err // cap 1, one write in flight: never blocks
	})
}

// heartbeatDone takes the outcome of a heartbeat write and reports when
// writing starts or stops failing.
func (c *coordinator) heartbeatDone(err error) {
	c.hb.inflight = false
	switch {
	case err != nil && !c.hb.failing:
		c.hb.failing = true
		c.e.emit(LevelWarn, "", store.Topic, -1, fmt.Sprintf(
			"heartbeat not written: %v; readers call this instance lost once its last heartbeat is %s old", err, HeartbeatMisses*c.e.cfg.HeartbeatInterval))
	case err == nil && c.hb.failing:
		c.hb.failing = false
		c.e.emit(LevelInfo, "", store.Topic, -1, "heartbeat written again")
	}
}

func (c *coordinator) ownedShards() []int32 {
	out := make([]int32, 0, len(c.owned))
	for s, ok := range c.owned {
		if ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// heartbeatRecord describes this instance. Reachability is what its
// clients last saw (metadata and fetches on the source, metadata and
// heartbeats on the destination): "unknown" until it asked.
func (c *coordinator) heartbeatRecord(shards []int32, stopped bool) store.InstanceHeartbeat {
	cfg := c.e.cfg
	h := store.InstanceHeartbeat{
		Instance: cfg.Instance, Host: cfg.Host, Version: cfg.Version,
		StartedAt: c.e.base.UTC(), At: c.e.now().UTC(), IntervalMs: cfg.HeartbeatInterval.Milliseconds(),
		Stopped: stopped, Shards: shards,
	}
	if stopped {
		return h
	}
	ms := c.e.mirrorList()
	dst := c.e.dstReach.report()
	for _, m := range ms {
		h.Mirrors = append(h.Mirrors, store.InstanceMirror{
			Name: m.cfg.Name, Topics: len(m.topicList()), Partitions: len(m.runners()),
			Source: m.srcReach.report(), Destination: dst,
			ConfigAt: configAt(m.settings().def), ThrottleRate: m.bucket.Rate(),
		})
	}
	slices.SortFunc(h.Mirrors, func(a, b store.InstanceMirror) int { return strings.Compare(a.Name, b.Name) })
	return h
}

// writeStopped writes the heartbeat of a cleanly closed instance, once its
// runners have stopped: readers tell it from a lost one, and a command
// recorded now waits for another instance. Skipped when the gate is shut:
// the group may already have given the shards to another instance, and
// the heartbeat's age tells readers as much.
func (c *coordinator) writeStopped() {
	if !c.e.gate.Allowed() {
		return
	}
	b, err := store.EncodeInstance(c.heartbeatRecord(nil, true))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalHeartbeatTimeout)
	defer cancel()
	if err := c.w.Put(ctx, store.InstanceKey(c.e.cfg.Instance), b); err != nil {
		c.e.log.Warn("final heartbeat not written", logging.Error, err)
	}
}
