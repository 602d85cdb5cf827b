// Package wire is kmirror's own Kafka broker connection. It exists for one
// guarantee the engine depends on: requests reach the broker in exactly the
// order they were issued, without waiting for earlier responses. kmirror pipelines up to five idempotent Produce requests of one
// partition; if two of them were written out of order the broker would
// answer OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// A Conn is one TCP (optionally TLS) connection to one broker. Dial
// negotiates API versions and authenticates; Issue writes a request and
// returns a Pending without waiting; a single reader goroutine reads
// responses in order and completes the Pendings.
package wire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

const (
	apiVersionsKey = 18

	// defaultDialTimeout bounds Dial when Options.DialTimeout is zero.
	defaultDialTimeout = 10 * time.Second

	// maxQueued is how many requests may be in flight on one connection
	// before Issue blocks until the oldest response has been read. A
	// broker handles one request per connection at a time, so this only
	// bounds memory; the engine keeps far fewer in flight.
	maxQueued = 1024

	// maxResponseBytes rejects absurd response sizes, which in practice
	// mean the peer is not speaking Kafka (for example a TLS listener
	// spoken to in plaintext).
	maxResponseBytes = 256 << 20

	// keepWriteBuf is the largest request buffer kept between writes.
	keepWriteBuf = 1 << 20
)

// Options configure Dial.
type Options struct {
	// ClientID is sent in every request header.
	ClientID string
	// TLS, if non-nil, wraps the connection in TLS. An empty ServerName
	// is filled in from addr's host.
	TLS *tls.Config
	// SASL, if non-nil, authenticates the connection (SaslHandshake v1
	// and SaslAuthenticate) after version negotiation.
	SASL sasl.Mechanism
	// DialTimeout bounds all of Dial: connecting, the TLS handshake,
	// ApiVersions and SASL. Zero means 10s.
	DialTimeout time.Duration
	// Dialer, if set, opens the raw connection instead of a net.Dialer.
	// TLS, if configured, is layered on top of what it returns.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResponseTimeout, if positive, bounds the wait for each response,
	// counted from when the reader starts waiting for it (the broker
	// answers one connection's requests one after another) and added to
	// the time the request itself allows the broker (a Produce's
	// TimeoutMillis, a Fetch's MaxWaitMillis). A response that does not
	// come in time kills the connection, failing every pending request
	// with ErrConnClosed: a broker that stopped answering must not hold
	// its requests for ever. Zero waits as long as the connection lives.
	ResponseTimeout time.Duration
	// Buffers, if set, is where the connection takes the buffer each
	// request is written from, and gives it back after the write:
	// connections that share one keep one buffer between them, not one
	// each (a fetcher's connections, whose requests list every partition
	// they fetch). Nil: the connection keeps its own.
	Buffers *Buffers
}

// Buffers is a free list of request buffers shared by connections. It
// keeps one buffer of at most keepWriteBuf bytes; a second one written
// concurrently is dropped after its write.
type Buffers struct {
	mu   sync.Mutex
	free []byte
}

// take returns the kept buffer, or nil (AppendRequest allocates).
func (b *Buffers) take() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	buf := b.free
	b.free = nil
	return buf[:0]
}

// give keeps buf for the next write, unless a buffer is kept already or
// buf is larger than is worth keeping.
func (b *Buffers) give(buf []byte) {
	if cap(buf) > keepWriteBuf {
		return
	}
	b.mu.Lock()
	if b.free == nil {
		b.free = buf
	}
	b.mu.Unlock()
}

// versionRange is what the broker advertised for one request key.
type versionRange struct{ min, max int16 }

// Conn is an order-preserving connection to one Kafka broker.
//
// Issue may be called from several goroutines; requests are written in the
// order the calls acquire the connection's write lock, so a caller that
// needs a particular order (one partition's Produce requests) must issue
// them from one goroutine, one after another.
type Conn struct {
	addr      string
	nc        net.Conn
	formatter *kmsg.RequestFormatter
	respWait  time.Duration // Options.ResponseTimeout

	// versions is filled by Dial before the Conn is returned and only
	// read afterwards.
	versions map[int16]versionRange

	// writeMu makes "assign correlation id, queue for the reader, write
	// the bytes" one step, so the reader's queue order is the wire order.
	// A SASL re-authentication holds it from its handshake to its last
	// answer: nothing else may be written in between.
	writeMu sync.Mutex
	corrID  int32
	wbuf    []byte   // the request buffer, when bufs is nil
	bufs    *Buffers // Options.Buffers

	// The SASL session (KIP-368), under writeMu: the mechanism, how long
	// one authentication may take, when to authenticate again (zero: the
	// broker announced no session lifetime) and how often it was done.
	mech     sasl.Mechanism
	authWait time.Duration
	reauthAt time.Time
	reauthed int

	// queue hands issued requests to the reader goroutine, oldest first.
	queue chan *Pending

	// dead is closed by fail, after err is set; err is read only after
	// dead is observed closed.
	dead     chan struct{}
	failOnce sync.Once
	err      error

	wg sync.WaitGroup // the reader goroutine
}

// Dial connects to the broker at addr ("host:port"), negotiates API versions
// and authenticates with SASL if configured. ctx bounds only the setup (as
// with net.Dialer.DialContext); the connection then lives until Close or
// until it fails.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	nc, err := dialNet(ctx, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Conn{
		addr:      addr,
		nc:        nc,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID)),
		respWait:  opts.ResponseTimeout,
		bufs:      opts.Buffers,
		versions:  make(map[int16]versionRange),
		queue:     make(chan *Pending, maxQueued),
		dead:      make(chan struct{}),
	}
	c.wg.Go(c.readLoop)

	if err := c.negotiateVersions(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("api versions with %s: %w", addr, err)
	}
	if opts.SASL != nil {
		c.mech, c.authWait = opts.SASL, timeout
		c.writeMu.Lock()
		err := c.authenticate(ctx)
		due := !c.reauthAt.IsZero()
		c.writeMu.Unlock()
		if err != nil {
			c.Close()
			return nil, err
		}
		if due {
			c.wg.Go(c.reauthLoop)
		}
	}
	return c, nil
}

func dialNet(ctx context.Context, addr string, opts Options) (net.Conn, error) {
	dial := opts.Dialer
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if opts.TLS == nil {
		return nc, nil
	}
	cfg := opts.TLS.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls server name: %w", err)
		}
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

// Done is closed once the connection has failed or been closed; requests
// issued afterwards fail. A holder of an idle connection checks it before
// reusing the connection (a broker closes connections idle for long).
func (c *Conn) Done() <-chan struct{} { return c.dead }

// Addr is the address the connection was dialled with.
func (c *Conn) Addr() string { return c.addr }

// MaxVersion returns the highest version of request key the broker
// advertised in ApiVersions, and false if it did not advertise the key. The
// version Issue uses is the lower of this and kmsg's own maximum.
func (c *Conn) MaxVersion(key int16) (int16, bool) {
	v, ok := c.versions[key]
	return v.max, ok
}

// Issue sets req's version to the highest one both kmsg and the broker
// support, writes it, and returns without waiting for the response. Requests
// are written in the order Issue calls are made (see Conn). Issue blocks only
// while writing, or while 1024 requests are already in flight.
//
// Issue mutates req (its version); req must not be used concurrently and
// must not be changed until its response has arrived.
func (c *Conn) Issue(req kmsg.Request) (*Pending, error) {
	name := kmsg.NameForKey(req.Key())
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		return nil, fmt.Errorf("issue %s to %s: %w", name, c.addr, ErrAcksZero)
	}
	v, err := c.pickVersion(req)
	if err != nil {
		return nil, fmt.Errorf("issue %s to %s: %w", name, c.addr, err)
	}
	req.SetVersion(v)
	return c.issue(req)
}

// Request issues req and waits for its response.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	p, err := c.Issue(req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

func (c *Conn) pickVersion(req kmsg.Request) (int16, error) {
	br, ok := c.versions[req.Key()]
	if !ok {
		return 0, fmt.Errorf("%w: broker does not advertise key %d", ErrUnsupportedVersion, req.Key())
	}
	v := min(req.MaxVersion(), br.max)
	if v < br.min || v < 0 {
		return 0, fmt.Errorf("%w: broker supports v%d-v%d, kmirror up to v%d", ErrUnsupportedVersion, br.min, br.max, req.MaxVersion())
	}
	return v, nil
}

// issue writes req at the version already set on it, re-authenticating
// first when the SASL session is due for it (see reauthenticate).
func (c *Conn) issue(req kmsg.Request) (*Pending, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.reauthenticateIfDue(); err != nil {
		return nil, err
	}
	return c.write(req)
}

// write writes req at the version already set on it; the caller holds
// writeMu.
func (c *Conn) write(req kmsg.Request) (*Pending, error) {
	p := newPending(req)
	select {
	case <-c.dead:
		return nil, c.err
	default:
	}

	p.corrID = c.corrID
	buf := c.wbuf
	if c.bufs != nil {
		buf = c.bufs.take()
	}
	buf = c.formatter.AppendRequest(buf[:0], req, p.corrID)
	// Queue before writing: the response can only come after the bytes
	// are out, and the reader must already know what to expect.
	select {
	case c.queue <- p:
	case <-c.dead:
		if c.bufs != nil {
			c.bufs.give(buf)
		}
		return nil, c.err
	}
	c.corrID++
	if c.corrID < 0 {
		c.corrID = 0
	}
	_, err := c.nc.Write(buf)
	switch {
	case c.bufs != nil:
		c.bufs.give(buf)
	case cap(buf) > keepWriteBuf:
		c.wbuf = nil
	default:
		c.wbuf = buf
	}
	if err != nil {
		// p is queued; the reader fails it together with the rest.
		c.fail(fmt.Errorf("write %s v%d: %w", kmsg.NameForKey(p.key), p.version, err))
		<-c.dead
		return nil, c.err
	}
	return p, nil
}

// fail records the connection's terminal error (the first one wins) and
// closes the socket, which wakes a blocked reader or writer.
func (c *Conn) fail(cause error) {
	c.failOnce.Do(func() {
		c.err = &connError{addr: c.addr, cause: cause}
		close(c.dead)
		c.nc.Close()
	})
}

// Close closes the connection, fails every pending request with an error
// matching ErrConnClosed, and waits for the reader goroutine to exit. It is
// safe to call more than once and concurrently with Issue and Wait.
func (c *Conn) Close() error {
	c.fail(errClosedByCaller)
	c.wg.Wait()
	return nil
}
