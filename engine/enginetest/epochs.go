package enginetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

// EpochBroker stands between a kfake cluster's listeners and its clients
// and makes the cluster fence producers as a real broker does. A real
// partition leader learns a producer's epoch only from a write with it: a
// Produce batch, or a transaction marker its coordinator writes there at
// EndTxn. It refuses an older epoch only from then on; an InitProducerID
// bump nobody wrote with fences nothing on it. kfake checks every append
// against the producer's newest epoch, so a bump fences at once there.
//
// The difference matters for a request that outlives its sender: a
// zombie's Produce still in a socket buffer, or on a broker's request
// queue, when another owner takes over. Hold swallows every Produce of a
// topic (the first is kept; the client's resends are lost with it) until
// Release delivers the first as the real broker would: applied if the
// partition has not learnt a newer epoch of its producer since, refused
// (INVALID_PRODUCER_EPOCH) if it has. Pass Listen to the cluster with
// kfake.ListenFn.
type EpochBroker struct {
	mu      sync.Mutex
	learned map[epochKey]int16    // the newest epoch each partition saw a producer write with
	txns    map[string][]epochKey // partitions added to each transactional id's open transaction
	topic   string                // the topic whose Produce requests are held, "" none
	held    []byte                // the first held request frame
	heldAt  string                // the listener it came to
	nHeld   int
	names   map[[16]byte]string // topic names by id: Produce v13 names topics by id
	listen  func(network, address string) (net.Listener, error)
}

type epochKey struct {
	pid   int64
	topic string
	p     int32
}

// NewEpochBroker returns a broker that holds nothing yet.
func NewEpochBroker() *EpochBroker {
	return &EpochBroker{learned: map[epochKey]int16{}, txns: map[string][]epochKey{}, names: map[[16]byte]string{}}
}

// On makes the broker listen through listen (another test listener, such
// as a Network's) instead of net.Listen, and returns it.
func (b *EpochBroker) On(listen func(network, address string) (net.Listener, error)) *EpochBroker {
	b.listen = listen
	return b
}

// Holding reports whether a hold is armed.
func (b *EpochBroker) Holding() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.topic != ""
}

// Name tells the broker topic's id on the cluster.
func (b *EpochBroker) Name(topic string, id [16]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.names[id] = topic
}

// topicOf is a Produce topic's name. b.mu is held.
func (b *EpochBroker) topicOf(name string, id [16]byte) string {
	if name != "" {
		return name
	}
	return b.names[id]
}

// Hold swallows every Produce request naming topic from now on.
func (b *EpochBroker) Hold(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topic, b.held, b.nHeld = topic, nil, 0
}

// Held is how many Produce requests the hold swallowed.
func (b *EpochBroker) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nHeld
}

// Learned is the newest epoch partition p of topic has seen producer pid
// write with, -1 none.
func (b *EpochBroker) Learned(pid int64, topic string, p int32) int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.learned[epochKey{pid, topic, p}]; ok {
		return e
	}
	return -1
}

// Delivery is what became of a held request's batches at Release.
type Delivery struct {
	Applied, Refused int // batches
}

// Release ends the hold and delivers the first request it swallowed: each
// batch whose partition has learnt a newer epoch of its producer is
// refused; the others are applied, as a real broker would. kfake itself
// would refuse those too (their producer was bumped), so they are sent as
// plain batches, which it appends at the log end as the real broker would
// have.
func (b *EpochBroker) Release(ctx context.Context) (Delivery, error) {
	b.mu.Lock()
	frame, at := b.held, b.heldAt
	b.topic, b.held = "", nil
	b.mu.Unlock()
	var d Delivery
	if frame == nil {
		return d, nil
	}
	h, req, err := linkproxy.DecodeRequest(frame)
	if err != nil {
		return d, err
	}
	pr := req.(*kmsg.ProduceRequest)
	b.mu.Lock()
	for i := range pr.Topics {
		t := &pr.Topics[i]
		topic := b.topicOf(t.Topic, t.TopicID)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			var out []byte
			_, err := batch.Split(p.Records, func(bh batch.Header, raw []byte) error {
				if e, ok := b.learned[epochKey{bh.ProducerID, topic, p.Partition}]; ok && e > bh.ProducerEpoch {
					d.Refused++
					return nil
				}
				d.Applied++
				plain := append([]byte(nil), raw...)
				binary.BigEndian.PutUint64(plain[43:], ^uint64(0)) // producer id -1
				binary.BigEndian.PutUint16(plain[51:], ^uint16(0)) // epoch -1
				binary.BigEndian.PutUint32(plain[53:], ^uint32(0)) // sequence -1
				binary.BigEndian.PutUint32(plain[17:], batch.Checksum(plain))
				out = append(out, plain...)
				return nil
			})
			if err != nil {
				b.mu.Unlock()
				return d, err
			}
			p.Records = out
		}
	}
	b.mu.Unlock()
	if d.Applied == 0 {
		return d, nil
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", at)
	if err != nil {
		return d, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	out := kmsg.NewRequestFormatter(kmsg.FormatterClientID("held-zombie")).AppendRequest(nil, pr, h.Corr)
	if _, err := conn.Write(out); err != nil {
		return d, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return d, err
	}
	answer := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(answer, size[:])
	if _, err := io.ReadFull(conn, answer[4:]); err != nil {
		return d, err
	}
	resp, err := linkproxy.DecodeResponse(answer, h.Key, h.Version)
	if err != nil {
		return d, err
	}
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return d, fmt.Errorf("held request applied to %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return d, nil
}

// Listen opens a TCP listener whose connections go through the broker.
func (b *EpochBroker) Listen(network, address string) (net.Listener, error) {
	listen := b.listen
	if listen == nil {
		listen = net.Listen
	}
	l, err := listen(network, address)
	if err != nil {
		return nil, err
	}
	return &epochListener{Listener: l, b: b}, nil
}

type epochListener struct {
	net.Listener
	b *EpochBroker
}

func (l *epochListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &epochConn{Conn: c, b: l.b, at: l.Addr().String()}, nil
}

// epochConn is the cluster's side of one client connection: Read hands
// the cluster the client's requests, less the held ones.
type epochConn struct {
	net.Conn
	b       *EpochBroker
	at      string
	in, fwd []byte
	err     error
	buf     [32 << 10]byte
}

func (c *epochConn) Read(p []byte) (int, error) {
	for len(c.fwd) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		n, err := c.Conn.Read(c.buf[:])
		c.in = append(c.in, c.buf[:n]...)
		for {
			frame, rest, ok := linkproxy.NextFrame(c.in)
			if !ok {
				break
			}
			if c.b.request(frame, c.at) {
				c.fwd = append(c.fwd, frame...)
			}
			c.in = append(c.in[:0], rest...)
		}
		c.err = err
	}
	n := copy(p, c.fwd)
	c.fwd = c.fwd[n:]
	return n, nil
}

// request learns what a request frame writes and reports whether the
// cluster gets it (false: held).
func (b *EpochBroker) request(frame []byte, at string) bool {
	h, _, err := linkproxy.ParseRequestHeader(frame)
	if err != nil {
		return true
	}
	switch kmsg.Key(h.Key) {
	case kmsg.Produce, kmsg.AddPartitionsToTxn, kmsg.EndTxn:
	default:
		return true
	}
	_, req, err := linkproxy.DecodeRequest(frame)
	if err != nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range req.Topics {
			if b.topic != "" && b.topicOf(t.Topic, t.TopicID) == b.topic {
				if b.nHeld++; b.held == nil {
					b.held, b.heldAt = append([]byte(nil), frame...), at
				}
				return false
			}
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				_, _ = batch.Split(p.Records, func(bh batch.Header, _ []byte) error {
					b.learn(epochKey{bh.ProducerID, b.topicOf(t.Topic, t.TopicID), p.Partition}, bh.ProducerEpoch)
					return nil
				})
			}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				b.txns[req.TransactionalID] = append(b.txns[req.TransactionalID], epochKey{req.ProducerID, t.Topic, p})
			}
		}
	case *kmsg.EndTxnRequest:
		// The coordinator writes a marker with the epoch on every
		// partition of the transaction.
		for _, k := range b.txns[req.TransactionalID] {
			if k.pid == req.ProducerID {
				b.learn(k, req.ProducerEpoch)
			}
		}
		delete(b.txns, req.TransactionalID)
	}
	return true
}

func (b *EpochBroker) learn(k epochKey, epoch int16) {
	if k.pid < 0 {
		return
	}
	if e, ok := b.learned[k]; !ok || epoch > e {
		b.learned[k] = epoch
	}
}
