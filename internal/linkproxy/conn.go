package linkproxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// chunkSize is the most bytes read and forwarded at once: frames are
	// streamed, not stored and forwarded, so a large Fetch answer is not
	// held back by its own size.
	chunkSize = 256 << 10
	// lineChunks bounds the chunks queued in one direction of one
	// connection (at most lineChunks × chunkSize bytes); a full queue
	// stops reading, and TCP pushes back on the sender.
	lineChunks = 64
	// headerPeek is how much of a request is looked at before it is
	// forwarded: its header and, for a Produce, the acks after it.
	headerPeek  = 1 << 10
	dialTimeout = 10 * time.Second
)

var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// conn is one client connection and the proxy's connection to the broker.
type conn struct {
	link   *Link
	client net.Conn

	mu       sync.Mutex
	upstream net.Conn
	closed   bool
	answers  map[int32]Header // requests whose answers the proxy must know: rewritten ones, and every one under ProduceLatency

	done     chan struct{}  // closed by close
	released chan time.Time // under ProduceLatency: when the answer to the request in the broker leaves it
}

func newConn(l *Link, client net.Conn) *conn {
	return &conn{
		link: l, client: client, answers: make(map[int32]Header),
		done: make(chan struct{}), released: make(chan time.Time, 1),
	}
}

// close closes both connections; the pumps then end.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	_ = c.client.Close()
	if c.upstream != nil {
		_ = c.upstream.Close()
	}
}

// run dials the broker and pumps both directions until either side closes.
func (c *conn) run(broker string) {
	up, err := net.DialTimeout("tcp", broker, dialTimeout)
	c.mu.Lock()
	if err == nil && c.closed {
		_ = up.Close()
	}
	if err != nil || c.closed {
		c.mu.Unlock()
		c.close()
		return
	}
	c.upstream = up
	c.mu.Unlock()

	half := c.link.opts.RTT / 2
	// A direction that adds nothing (no delay, no cap; requests are never
	// held, only Produce answers) is written straight from its reader.
	plain := half == 0 && c.link.opts.Bandwidth == 0
	toBroker := newLine(c, c.client, up, c.link.toBroker, half, plain)
	toClient := newLine(c, up, c.client, c.link.toClient, half, plain && c.link.opts.ProduceLatency == 0)
	var wg sync.WaitGroup
	wg.Go(toBroker.write)
	wg.Go(toClient.write)
	wg.Go(func() { c.requests(toBroker) })
	c.responses(toClient)
	wg.Wait()
}

// expect notes that the answer to h must be looked at.
func (c *conn) expect(h Header) {
	c.mu.Lock()
	c.answers[h.Corr] = h
	c.mu.Unlock()
}

// take returns and forgets the request an answer with correlation id corr
// answers, if it was noted.
func (c *conn) take(corr int32) (Header, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.answers[corr]
	delete(c.answers, corr)
	return h, ok
}

// rewritten are the answers that name brokers.
func rewritten(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Metadata, kmsg.FindCoordinator, kmsg.DescribeCluster, kmsg.ShareFetch, kmsg.ShareAcknowledge:
		return true
	}
	return false
}

// requests reads the client's requests and forwards them to the broker.
func (c *conn) requests(out *line) {
	defer close(out.q)
	serial := c.link.opts.ProduceLatency > 0
	br := out.reader()
	for {
		size, err := frameSize(br)
		if err != nil || size < 8 {
			return
		}
		head, err := br.Peek(min(4+size, headerPeek))
		if err != nil {
			return
		}
		h, body, err := ParseRequestHeader(head)
		if err != nil {
			return
		}
		answered := true
		if h.Key == int16(kmsg.Produce) {
			if acks, ok := produceAcks(h.Version, body); ok && acks == 0 {
				answered = false
			}
		}
		if answered && (serial || rewritten(h.Key)) {
			c.expect(h)
		}
		if !out.forward(br, 4+size, time.Time{}) {
			return
		}
		if !serial || !answered {
			continue
		}
		// One request at a time in the broker: the next one goes on
		// only once this one's answer has left it.
		select {
		case <-c.done:
			return
		case at := <-c.released:
			if !waitUntil(at, c.done) {
				return
			}
		}
	}
}

// responses reads the broker's answers and forwards them to the client,
// rewriting the ones that name brokers and holding Produce answers for
// the produce latency.
func (c *conn) responses(out *line) {
	defer close(out.q)
	serial := c.link.opts.ProduceLatency > 0
	br := out.reader()
	for {
		size, err := frameSize(br)
		if err != nil || size < 4 {
			return
		}
		head, err := br.Peek(8)
		if err != nil {
			return
		}
		h, noted := c.take(int32(binary.BigEndian.Uint32(head[4:])))
		release := time.Now()
		if noted && h.Key == int16(kmsg.Produce) {
			release = release.Add(c.link.opts.ProduceLatency)
		}
		if noted && rewritten(h.Key) {
			frame := make([]byte, 4+size)
			if _, err := io.ReadFull(br, frame); err != nil {
				return
			}
			if !out.send(c.link.rewriteFrame(frame, h), nil, release) {
				return
			}
		} else if !out.forward(br, 4+size, release) {
			return
		}
		if serial && noted {
			select {
			case c.released <- release:
			case <-c.done:
				return
			}
		}
	}
}

// frameSize waits for the next frame and returns its size (the bytes after
// the 4-byte size).
func frameSize(br *bufio.Reader) (int, error) {
	b, err := br.Peek(4)
	if err != nil {
		return 0, err
	}
	return int(int32(binary.BigEndian.Uint32(b))), nil
}

// waitUntil waits for the time at, or until done is closed (false).
func waitUntil(at time.Time, done <-chan struct{}) bool {
	d := time.Until(at)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// chunk is bytes on their way through one direction of a connection: in
// memory, or n bytes in a pipe.
type chunk struct {
	b      []byte
	pooled *[]byte // b's buffer, back to chunks once written
	pipe   *pipe
	n      int
	due    time.Time
}

// line is one direction of a connection: chunks leave in the order they
// came, each at its due time.
type line struct {
	c      *conn
	dst    net.Conn
	pace   *pacer
	delay  time.Duration
	direct bool // nothing is added: chunks are written at once by the reader
	q      chan chunk
	src    net.Conn // what the line's reader reads
	// srcRaw and raw are src's and dst's descriptors when the line
	// moves bytes socket to socket (forward); both nil when it copies
	// them.
	srcRaw, raw syscall.RawConn
}

func newLine(c *conn, src, dst net.Conn, pace *pacer, delay time.Duration, direct bool) *line {
	ln := &line{c: c, dst: dst, pace: pace, delay: delay, direct: direct, q: make(chan chunk, lineChunks), src: src}
	if sr, dr := rawConn(src), rawConn(dst); sr != nil && dr != nil {
		ln.srcRaw, ln.raw = sr, dr
	}
	return ln
}

// reader returns the reader of the line's source: what forward splices
// is what the reader has not buffered, so a line that splices buffers
// little more than a header.
func (ln *line) reader() *bufio.Reader {
	if ln.raw != nil {
		return bufio.NewReaderSize(ln.src, 4*headerPeek)
	}
	return bufio.NewReaderSize(ln.src, chunkSize)
}

// stream forwards the next n bytes of br as they arrive, none before
// notBefore; false once the connection is done.
func (ln *line) stream(br *bufio.Reader, n int, notBefore time.Time) bool {
	for n > 0 {
		buf := chunks.Get().(*[]byte)
		k, err := br.Read((*buf)[:min(n, chunkSize)])
		if k > 0 && !ln.send((*buf)[:k], buf, notBefore) {
			return false
		}
		if err != nil {
			return false
		}
		n -= k
	}
	return true
}

// forward passes the next n bytes of br, the line's reader, on as they
// arrive, none before notBefore. What br has not buffered yet goes from
// socket to socket inside the kernel (splice) where it can: at once on a
// direct line, through pipes held until their due time on a delayed one.
// The proxy then costs the cores the bench runs on no copy of the bytes
// in and out of its memory, a cost a real network does not add to the
// mirror's host.
func (ln *line) forward(br *bufio.Reader, n int, notBefore time.Time) bool {
	if ln.raw == nil {
		return ln.stream(br, n, notBefore)
	}
	if b := min(br.Buffered(), n); b > 0 {
		if !ln.stream(br, b, notBefore) {
			return false
		}
		n -= b
	}
	// br holds nothing now: the rest comes straight from the socket,
	// and br's next read starts after it.
	if ln.direct {
		k, err := ln.dst.(*net.TCPConn).ReadFrom(io.LimitReader(ln.src, int64(n)))
		if err != nil || k < int64(n) {
			ln.c.close()
			return false
		}
		return true
	}
	for n > 0 {
		p, err := ln.c.link.pipes.get()
		if err != nil {
			return ln.stream(br, n, notBefore) // no pipe to be had: copy
		}
		k, err := p.fill(ln.srcRaw, n)
		if err != nil || k == 0 {
			ln.c.link.pipes.put(p) // empty
			ln.c.close()
			return false
		}
		n -= k
		if !ln.queue(chunk{pipe: p, n: k}, k, notBefore) {
			ln.c.link.pipes.drop(p)
			return false
		}
	}
	return true
}

// send queues b to leave after the bandwidth and the delay of the link,
// and not before notBefore.
func (ln *line) send(b []byte, pooled *[]byte, notBefore time.Time) bool {
	if ln.direct {
		_, err := ln.dst.Write(b)
		if pooled != nil {
			chunks.Put(pooled)
		}
		if err != nil {
			ln.c.close()
			return false
		}
		return true
	}
	return ln.queue(chunk{b: b, pooled: pooled}, len(b), notBefore)
}

// queue queues ch, of n bytes, to leave after the bandwidth and the delay
// of the link, and not before notBefore.
func (ln *line) queue(ch chunk, n int, notBefore time.Time) bool {
	at := time.Now()
	if notBefore.After(at) {
		at = notBefore
	}
	ch.due = ln.pace.after(at, n).Add(ln.delay)
	select {
	case ln.q <- ch:
		return true
	case <-ln.c.done:
		return false
	}
}

// write writes the queued chunks at their due times until the queue is
// closed, then closes the connection. After a failed write it only drains.
func (ln *line) write() {
	defer ln.c.close()
	t := time.NewTimer(0)
	<-t.C
	ok := true
	for ch := range ln.q {
		if d := time.Until(ch.due); ok && d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ln.c.done:
				ok = false
			}
		}
		if ok {
			var err error
			if ch.pipe != nil {
				err = ch.pipe.drain(ln.raw, ch.n)
			} else {
				_, err = ln.dst.Write(ch.b)
			}
			if err != nil {
				ok = false
				ln.c.close()
			}
		}
		switch {
		case ch.pipe != nil && ok:
			ln.c.link.pipes.put(ch.pipe) // drained
		case ch.pipe != nil:
			ln.c.link.pipes.drop(ch.pipe)
		case ch.pooled != nil:
			chunks.Put(ch.pooled)
		}
	}
}

// pacer is one direction's bandwidth, shared by a link's connections.
type pacer struct {
	mu   sync.Mutex
	rate int64     // bytes per second; 0 is unlimited
	free time.Time // when the bytes scheduled so far have all been sent
}

func newPacer(rate int64) *pacer { return &pacer{rate: rate} }

// after schedules n bytes that are ready at and returns when their last
// byte has been sent.
func (p *pacer) after(at time.Time, n int) time.Time {
	if p.rate <= 0 {
		return at
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free.After(at) {
		at = p.free
	}
	p.free = at.Add(time.Duration(int64(n) * int64(time.Second) / p.rate))
	return p.free
}
