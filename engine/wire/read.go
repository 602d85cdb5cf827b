package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readLoop is the connection's reader and the only goroutine that completes
// Pendings. Kafka answers the requests of one connection in the order they
// were sent, so the oldest queued Pending always owns the next response.
func (c *Conn) readLoop() {
	// Small: a response body larger than the buffer is read straight
	// into its own allocation, and an engine keeps many connections.
	br := bufio.NewReaderSize(c.nc, 8<<10)
	for {
		var p *Pending
		select {
		case p = <-c.queue:
		case <-c.dead:
			c.drain()
			return
		}
		if c.respWait > 0 {
			// A failure to set it surfaces as the read's error.
			_ = c.nc.SetReadDeadline(time.Now().Add(p.brokerWait + c.respWait))
		}
		resp, fatal, err := c.readResponse(br, p)
		if fatal != nil {
			c.fail(fatal)
			<-c.dead
			p.complete(nil, c.err)
			c.drain()
			return
		}
		p.complete(resp, err)
	}
}

// drain fails every queued Pending once the connection is dead. Holding
// writeMu guarantees no Issue is between its dead check and its enqueue, so
// nothing can be queued after drain returns.
func (c *Conn) drain() {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	for {
		select {
		case p := <-c.queue:
			p.complete(nil, c.err)
		default:
			return
		}
	}
}

// readResponse reads one response frame for p. A fatal error means the
// byte stream can no longer be trusted and the connection must die; a
// non-fatal error is a body that failed to decode, which fails only p.
func (c *Conn) readResponse(br *bufio.Reader, p *Pending) (resp kmsg.Response, fatal, err error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
		return nil, fmt.Errorf("read %s v%d response: %w", kmsg.NameForKey(p.key), p.version, err), nil
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 || size > maxResponseBytes {
		return nil, fmt.Errorf("read %s v%d response: invalid response size %d (is the broker speaking TLS or another protocol?)", kmsg.NameForKey(p.key), p.version, size), nil
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, fmt.Errorf("read %s v%d response: %w", kmsg.NameForKey(p.key), p.version, err), nil
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != p.corrID {
		return nil, fmt.Errorf("%w: %s v%d expected %d, got %d", ErrCorrelationMismatch, kmsg.NameForKey(p.key), p.version, p.corrID, got), nil
	}
	body := buf[4:]
	if p.flexibleHeader {
		if body, err = skipTags(body); err != nil {
			return nil, nil, fmt.Errorf("decode %s v%d response header: %w", kmsg.NameForKey(p.key), p.version, err)
		}
	}
	resp = p.resp
	// A broker that does not know our ApiVersions version answers in the
	// v0 body layout with UNSUPPORTED_VERSION (KIP-511).
	if p.key == apiVersionsKey && len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(p.key), p.version, err)
	}
	return resp, nil, nil
}

var errShortTags = errors.New("tagged fields truncated")

// skipTags skips a KIP-482 tagged-field section: a count, then per field a
// tag, a size and that many bytes, all unsigned varints.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errShortTags
	}
	b = b[l:]
	for ; n > 0; n-- {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errShortTags
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errShortTags
		}
		b = b[l+int(size):]
	}
	return b, nil
}
