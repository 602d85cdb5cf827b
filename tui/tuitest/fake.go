package tuitest

import (
	"context"
	"slices"
	"sync"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// Controller is a fake engine for console tests. It holds a mutable
// snapshot and simulates what commands do to partition states:
//
//	pause:   → PAUSING, and PAUSED from the poll after the next one
//	stop:    → STOPPING, then STOPPED
//	resume:  → LOG_ALIGNMENT, then MIRRORING
//	recover: FAILED → LOG_ALIGNMENT, then MIRRORING
//
// "Then" means: the first Snapshot after the command shows the transitional
// state; the one after that shows where it settles. It is safe for
// concurrent use: the console calls it from command goroutines.
type Controller struct {
	mu       sync.Mutex
	snap     engine.Snapshot
	pending  map[partKey]partition.State // settles on the next-but-one poll
	shown    map[partKey]bool            // pending states already returned once
	commands []engine.Command
	err      error
	events   chan engine.Event
	polls    int
}

type partKey struct {
	mirror, topic string
	partition     int32
}

// NewController returns a fake engine publishing snap.
func NewController(snap engine.Snapshot) *Controller {
	return &Controller{
		snap:    clone(snap),
		pending: map[partKey]partition.State{},
		shown:   map[partKey]bool{},
		events:  make(chan engine.Event, 64),
	}
}

// Snapshot returns a copy of the current state, then lets transitional
// states that were already shown once settle.
func (c *Controller) Snapshot() engine.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.polls++
	for k, final := range c.pending {
		if !c.shown[k] {
			c.shown[k] = true
			continue
		}
		c.set(k, final)
		delete(c.pending, k)
		delete(c.shown, k)
	}
	return clone(c.snap)
}

// Events returns the event channel.
func (c *Controller) Events() <-chan engine.Event { return c.events }

// Control records cmd and starts the simulated transitions. It returns the
// error set with SetError, without changing anything, when one is set.
func (c *Controller) Control(ctx context.Context, cmd engine.Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commands = append(c.commands, cloneCommand(cmd))
	if c.err != nil {
		return c.err
	}
	for i := range c.snap.Mirrors {
		m := &c.snap.Mirrors[i]
		if m.Name != cmd.Mirror {
			continue
		}
		for j := range m.Partitions {
			p := &m.Partitions[j]
			if len(cmd.Topics) > 0 && !slices.Contains(cmd.Topics, p.Topic) {
				continue
			}
			c.apply(cmd.Kind, p)
		}
	}
	return nil
}

func (c *Controller) apply(kind engine.CommandKind, p *engine.PartitionSnapshot) {
	k := partKey{p.Mirror, p.Topic, p.Partition}
	transit := func(now, final partition.State) {
		p.State = now
		c.pending[k] = final
		delete(c.shown, k)
	}
	switch kind {
	case engine.CmdPause:
		if p.State != partition.Paused && p.State != partition.Stopped && p.State != partition.Stopping {
			transit(partition.Pausing, partition.Paused)
		}
	case engine.CmdStop:
		if p.State != partition.Stopped {
			transit(partition.Stopping, partition.Stopped)
		}
	case engine.CmdResume:
		if p.State == partition.Paused || p.State == partition.Pausing {
			transit(partition.LogAlignment, partition.Mirroring)
		}
	case engine.CmdRecover:
		if p.State == partition.Failed {
			p.Error, p.Attempt = "", 0
			transit(partition.LogAlignment, partition.Mirroring)
		}
	}
}

func (c *Controller) set(k partKey, st partition.State) {
	for i := range c.snap.Mirrors {
		m := &c.snap.Mirrors[i]
		for j := range m.Partitions {
			p := &m.Partitions[j]
			if p.Mirror == k.mirror && p.Topic == k.topic && p.Partition == k.partition {
				p.State = st
			}
		}
	}
}

// Commands returns the commands received so far.
func (c *Controller) Commands() []engine.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]engine.Command, len(c.commands))
	for i, cmd := range c.commands {
		out[i] = cloneCommand(cmd)
	}
	return out
}

// Polls returns how many times Snapshot was called.
func (c *Controller) Polls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.polls
}

// SetError makes every following Control fail with err (nil restores).
func (c *Controller) SetError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Emit delivers an event to the console, as the engine would.
func (c *Controller) Emit(ev engine.Event) { c.events <- ev }

// Close closes the event channel, as an engine shutting down would.
func (c *Controller) Close() { close(c.events) }

func cloneCommand(cmd engine.Command) engine.Command {
	cmd.Topics = slices.Clone(cmd.Topics)
	return cmd
}

func clone(s engine.Snapshot) engine.Snapshot {
	out := s
	out.Destination.Bootstrap = slices.Clone(s.Destination.Bootstrap)
	out.Mirrors = make([]engine.MirrorSnapshot, len(s.Mirrors))
	for i, m := range s.Mirrors {
		m.Source.Bootstrap = slices.Clone(m.Source.Bootstrap)
		ps := make([]engine.PartitionSnapshot, len(m.Partitions))
		for j, p := range m.Partitions {
			p.Lineage = slices.Clone(p.Lineage)
			ps[j] = p
		}
		m.Partitions = ps
		out.Mirrors[i] = m
	}
	return out
}
