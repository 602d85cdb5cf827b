// Package replica is one partition's driver: its runner, which aligns the
// destination partition with the source, mirrors the fetched batches at
// identical offsets, keeps the mirrored transactions and checkpoints the
// last mirrored offset (runner.go, lifecycle.go, inbox.go, park.go,
// align.go, verify.go, produce.go, appendretry.go, txnpath.go,
// checkpoint.go), and the sinks that pack the batches of every partition a
// destination broker leads into shared Produce requests, on
// order-preserving connections of their own (sink.go, conns.go), with
// what an append's outcome calls for (outcome.go). It never imports
// package engine: a runner is built with a Deps (deps.go), the mirror's
// settings, clock, gate, source, destination and events, and the sinks
// get what they need of the destination as a func (NewConns).
package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/engine/wire"
)

// Conns holds order-preserving connections to the destination brokers,
// sinkConns per broker (slots), each used by one sink (sink.go), which
// writes the requests of its partitions in order.
type Conns struct {
	brokers func(ctx context.Context) (map[int32]string, error)
	opts    wire.Options

	mu    sync.Mutex
	conns map[connSlot]*wire.Conn
	addrs map[int32]string
}

// connSlot is one connection to a broker.
type connSlot struct {
	broker int32
	slot   int
}

// NewConns returns the connections dialed with opts to the brokers as
// brokers names them (the destination's addresses by broker id, asked
// of the cluster when a broker's is not known).
func NewConns(brokers func(ctx context.Context) (map[int32]string, error), opts wire.Options) *Conns {
	return &Conns{brokers: brokers, opts: opts, conns: make(map[connSlot]*wire.Conn), addrs: make(map[int32]string)}
}

// get returns the connection of slot to its broker, dialing it if needed.
func (p *Conns) get(ctx context.Context, slot connSlot) (*wire.Conn, error) {
	broker := slot.broker
	p.mu.Lock()
	if c, ok := p.conns[slot]; ok {
		p.mu.Unlock()
		return c, nil
	}
	addr, ok := p.addrs[broker]
	p.mu.Unlock()
	if !ok {
		addrs, err := p.brokers(ctx)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		for id, a := range addrs {
			p.addrs[id] = a
		}
		addr, ok = p.addrs[broker]
		p.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("destination broker %d is not in the cluster metadata", broker)
		}
	}
	c, err := wire.Dial(ctx, addr, p.opts)
	if err != nil {
		p.mu.Lock()
		delete(p.addrs, broker) // the broker may have moved: look it up again next time
		p.mu.Unlock()
		return nil, fmt.Errorf("connect to destination broker %d: %w", broker, err)
	}
	p.mu.Lock()
	old, raced := p.conns[slot]
	if !raced {
		p.conns[slot] = c
	}
	p.mu.Unlock()
	if raced { // another appender dialed meanwhile
		c.Close()
		return old, nil
	}
	return c, nil
}

// failed forgets a connection that returned a connection error, so the next
// get dials again.
func (p *Conns) failed(slot connSlot, c *wire.Conn, err error) {
	if !errors.Is(err, wire.ErrConnClosed) {
		return
	}
	p.mu.Lock()
	if p.conns[slot] == c {
		delete(p.conns, slot)
	}
	p.mu.Unlock()
	c.Close()
}

// Close closes the connections; the sinks have ended (Sinks.Close).
func (p *Conns) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[connSlot]*wire.Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
