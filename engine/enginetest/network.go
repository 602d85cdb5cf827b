package enginetest

import (
	"net"
	"sync"
)

// Network stands between a kfake cluster's listeners and its clients, so a
// test can drop connections the way a network partition, a crashed broker
// or a restarted load balancer does. Pass Listen to the cluster with
// kfake.ListenFn (NewCluster(t, id, kfake.ListenFn(n.Listen))); listeners
// of brokers added later go through it too.
type Network struct {
	mu    sync.Mutex
	conns map[*netConn]struct{}
	down  map[string]bool // listener addresses refusing connections; "" is every one
	cuts  int             // connections closed by Cut or while down
}

// NewNetwork returns a network with every listener up.
func NewNetwork() *Network {
	return &Network{conns: make(map[*netConn]struct{}), down: make(map[string]bool)}
}

// Listen opens a TCP listener whose connections the network can drop.
func (n *Network) Listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &netListener{Listener: l, n: n}, nil
}

// Cut closes every open connection to the listener at addr ("" for all
// listeners) and returns how many it closed. Clients may reconnect at once.
func (n *Network) Cut(addr string) int {
	n.mu.Lock()
	var victims []*netConn
	for c := range n.conns {
		if addr == "" || c.local == addr {
			victims = append(victims, c)
			delete(n.conns, c)
		}
	}
	n.cuts += len(victims)
	n.mu.Unlock()
	for _, c := range victims {
		_ = c.Conn.Close()
	}
	return len(victims)
}

// Down cuts the connections to the listener at addr ("" for all) and closes
// every new one as soon as it is accepted, until Up: the brokers behind it
// are unreachable.
func (n *Network) Down(addr string) int {
	n.mu.Lock()
	n.down[addr] = true
	n.mu.Unlock()
	return n.Cut(addr)
}

// Up lets connections through again.
func (n *Network) Up() {
	n.mu.Lock()
	clear(n.down)
	n.mu.Unlock()
}

// Cuts is how many connections the network has closed so far.
func (n *Network) Cuts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cuts
}

type netListener struct {
	net.Listener
	n *Network
}

func (l *netListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := l.Addr().String()
		l.n.mu.Lock()
		if l.n.down[""] || l.n.down[addr] {
			l.n.cuts++
			l.n.mu.Unlock()
			_ = c.Close()
			continue
		}
		nc := &netConn{Conn: c, n: l.n, local: addr}
		l.n.conns[nc] = struct{}{}
		l.n.mu.Unlock()
		return nc, nil
	}
}

type netConn struct {
	net.Conn
	n     *Network
	local string // the listener's address
}

func (c *netConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}
