package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/wire"
)

// connPool holds order-preserving connections to the destination brokers,
// sinkConns per broker (slots), each used by one sink (sink.go), which
// writes the requests of its partitions in order.
type connPool struct {
	c    *cluster
	opts wire.Options
	now  func() time.Time

	mu    sync.Mutex
	conns map[connSlot]*wire.Conn
	addrs map[int32]string
}

// connSlot is one connection to a broker.
type connSlot struct {
	broker int32
	slot   int
}

func newConnPool(c *cluster, opts wire.Options, now func() time.Time) *connPool {
	return &connPool{c: c, opts: opts, now: now, conns: make(map[connSlot]*wire.Conn), addrs: make(map[int32]string)}
}

// get returns the connection of slot to its broker, dialing it if needed.
func (p *connPool) get(ctx context.Context, slot connSlot) (*wire.Conn, error) {
	broker := slot.broker
	p.mu.Lock()
	if c, ok := p.conns[slot]; ok {
		p.mu.Unlock()
		return c, nil
	}
	addr, ok := p.addrs[broker]
	p.mu.Unlock()
	if !ok {
		m, err := p.c.metadata(ctx, []string{})
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		for id, a := range m.addrs {
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
func (p *connPool) failed(slot connSlot, c *wire.Conn, err error) {
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

func (p *connPool) close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[connSlot]*wire.Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
