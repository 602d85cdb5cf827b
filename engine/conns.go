package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/wire"
)

// connPool holds one order-preserving connection per destination broker.
// All appenders of partitions led by a broker share it; each partition
// issues its own requests in order from its one goroutine, and the
// connection writes them in that order, so up to five batches of one
// partition can be in flight without reordering.
type connPool struct {
	c    *cluster
	opts wire.Options
	now  func() time.Time

	mu    sync.Mutex
	conns map[int32]*wire.Conn
	addrs map[int32]string
}

func newConnPool(c *cluster, opts wire.Options, now func() time.Time) *connPool {
	return &connPool{c: c, opts: opts, now: now, conns: make(map[int32]*wire.Conn), addrs: make(map[int32]string)}
}

// get returns the connection to broker, dialing it if needed.
func (p *connPool) get(ctx context.Context, broker int32) (*wire.Conn, error) {
	p.mu.Lock()
	if c, ok := p.conns[broker]; ok {
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
	old, raced := p.conns[broker]
	if !raced {
		p.conns[broker] = c
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
func (p *connPool) failed(broker int32, c *wire.Conn, err error) {
	if !errors.Is(err, wire.ErrConnClosed) {
		return
	}
	p.mu.Lock()
	if p.conns[broker] == c {
		delete(p.conns, broker)
	}
	p.mu.Unlock()
	c.Close()
}

func (p *connPool) close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[int32]*wire.Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
