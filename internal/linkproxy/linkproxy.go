// Package linkproxy models the network between a mirror and its clusters
// on loopback: TCP proxies in front of a cluster's brokers that add what a
// real disaster-recovery link adds, deterministically.
//
//   - In front of a source in another region: a fixed round trip (each
//     direction delayed by half of it, the byte stream and its order kept)
//     and optionally a bandwidth cap shared by every connection of the link.
//   - In front of a replicating destination: the answer to a Produce comes
//     only after a fixed delay (the followers' acknowledgements under
//     acks=all), and each connection has one request at a time in the
//     broker, as a Kafka broker handles them: the next request of a
//     connection is passed on only once the answer to the previous one has
//     left the broker.
//
// Clients bootstrap from Addrs and stay behind the proxies: the broker
// addresses in Metadata, FindCoordinator, DescribeCluster, ShareFetch and
// ShareAcknowledge answers are rewritten to proxy addresses, and a broker
// the cluster names for the first time gets a proxy of its own. Not
// rewritten: the KIP-951 leader endpoints in Fetch and Produce answers
// (in-memory test clusters do not send them), and anything under TLS.
package linkproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options are what a link adds. The zero value adds nothing.
type Options struct {
	// RTT is the round trip added to every exchange: each direction is
	// delayed by RTT/2.
	RTT time.Duration
	// Bandwidth, if positive, caps each direction of the link at this
	// many bytes per second, shared by all its connections: bytes leave in
	// the order they arrived, each after the ones before it have been
	// sent at this rate.
	Bandwidth int64
	// ProduceLatency, if positive, delays the answer to every Produce
	// that expects one by this much, and makes each connection hand its
	// requests to the broker one at a time.
	ProduceLatency time.Duration
}

func (o Options) validate() error {
	switch {
	case o.RTT < 0:
		return fmt.Errorf("linkproxy: negative RTT %s", o.RTT)
	case o.Bandwidth < 0:
		return fmt.Errorf("linkproxy: negative bandwidth %d", o.Bandwidth)
	case o.ProduceLatency < 0:
		return fmt.Errorf("linkproxy: negative produce latency %s", o.ProduceLatency)
	}
	return nil
}

// Link is a set of proxies, one per broker of a cluster.
type Link struct {
	opts     Options
	toBroker *pacer // the client → broker direction's bandwidth
	toClient *pacer // the broker → client direction's
	pipes    pipes  // idle pipes of the delayed lines (forward)

	mu      sync.Mutex
	proxies map[string]*proxy // by upstream broker address
	order   []*proxy          // in the order they were started
	conns   map[*conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

// ErrClosed is returned for a broker met after Close.
var ErrClosed = errors.New("linkproxy: link closed")

// Start opens a proxy on a loopback port in front of each of brokers
// (host:port addresses of one cluster).
func Start(brokers []string, o Options) (*Link, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(brokers) == 0 {
		return nil, errors.New("linkproxy: no broker addresses")
	}
	l := &Link{
		opts:     o,
		toBroker: newPacer(o.Bandwidth),
		toClient: newPacer(o.Bandwidth),
		proxies:  make(map[string]*proxy),
		conns:    make(map[*conn]struct{}),
	}
	for _, b := range brokers {
		if _, err := l.proxyFor(b, true); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Addrs are the proxy addresses of the brokers given to Start, in their
// order: what clients bootstrap from.
func (l *Link) Addrs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.order {
		if p.seed {
			out = append(out, p.addr)
		}
	}
	return out
}

// Options returns what the link adds.
func (l *Link) Options() Options { return l.opts }

// Close closes every proxy and connection and waits for them.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	for _, p := range l.order {
		_ = p.ln.Close()
	}
	for c := range l.conns {
		c.close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.pipes.close()
}

// proxy is the listener in front of one broker.
type proxy struct {
	upstream string
	addr     string // the listener's, host:port
	host     string
	port     int32
	seed     bool // given to Start
	ln       net.Listener
}

// proxyFor returns the proxy in front of upstream, starting one if there is
// none yet; seed marks one of the brokers given to Start.
func (l *Link) proxyFor(upstream string, seed bool) (*proxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.proxies[upstream]; ok {
		return p, nil
	}
	if l.closed {
		return nil, ErrClosed
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("linkproxy: listen in front of %s: %w", upstream, err)
	}
	a := ln.Addr().(*net.TCPAddr)
	p := &proxy{
		upstream: upstream, addr: a.String(), host: a.IP.String(), port: int32(a.Port),
		seed: seed, ln: ln,
	}
	l.proxies[upstream] = p
	l.order = append(l.order, p)
	l.wg.Go(func() { l.accept(p) })
	return p, nil
}

// rewrite returns the proxy address to announce instead of the broker at
// host:port.
func (l *Link) rewrite(host string, port int32) (string, int32, error) {
	p, err := l.proxyFor(net.JoinHostPort(host, strconv.Itoa(int(port))), false)
	if err != nil {
		return "", 0, err
	}
	return p.host, p.port, nil
}

func (l *Link) accept(p *proxy) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = client.Close()
			return
		}
		c := newConn(l, client)
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		l.wg.Go(func() {
			c.run(p.upstream)
			l.mu.Lock()
			delete(l.conns, c)
			l.mu.Unlock()
		})
	}
}

// rewriteFrame returns the answer frame (to the request h) with every
// broker it names replaced by the proxy in front of that broker. A frame
// that does not decode goes through as it is.
func (l *Link) rewriteFrame(frame []byte, h Header) []byte {
	resp, err := DecodeResponse(frame, h.Key, h.Version)
	if err != nil {
		return frame
	}
	// each rewrites one named broker in place; a broker the link cannot
	// proxy any more (closed) keeps its address, and the client fails to
	// reach it.
	each := func(host *string, port *int32) {
		if *host == "" {
			return // an error entry names no broker
		}
		if ph, pp, err := l.rewrite(*host, *port); err == nil {
			*host, *port = ph, pp
		}
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			each(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		each(&r.Host, &r.Port)
		for i := range r.Coordinators {
			each(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			each(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			each(&r.NodeEndpoints[i].Host, &r.NodeEndpoints[i].Port)
		}
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.NodeEndpoints {
			each(&r.NodeEndpoints[i].Host, &r.NodeEndpoints[i].Port)
		}
	default:
		return frame
	}
	return AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:])), resp)
}
