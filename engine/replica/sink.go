package replica

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/wire"
)

const (
	// sinkInFlight is how many Produce requests a sink keeps in flight
	// on its connection. A broker handles them one at a time, answering
	// each once its followers have the data; what the pipeline saves is
	// the round trip between an answer and the next request. While they
	// are all out, appends queue and the next request carries them all.
	sinkInFlight = 5
	// sinkConns is how many connections (and sinks) a destination
	// broker gets; a partition always uses the same one. A broker
	// handles the requests of different connections at the same time,
	// those of one connection one after the other.
	sinkConns = 4
	// sinkRequestBytes bounds the record bytes of one Produce request (a
	// single larger batch goes alone). A connection keeps the buffer it
	// writes requests from only up to 1 MiB (wire), and one that grew
	// past it by appending would be allocated anew for every request:
	// a byte allocated per byte appended.
	sinkRequestBytes = 768 << 10
)

var (
	// errSinkClosed fails the appends still queued when the engine closes.
	errSinkClosed = errors.New("engine closing: append not sent")
	// ErrMalformedProduce is the outcome of an append whose partition the
	// Produce answer leaves out.
	ErrMalformedProduce = errors.New("malformed produce response")
	// ErrMuted is the outcome of an append not sent because an earlier
	// append of its partition failed: sent after it, it could land
	// before that one's resend.
	ErrMuted = errors.New("not sent: an earlier append of the partition failed")
	// ErrNotAllowed: the append was not written, the instance may have
	// lost its shards (the owner gate closed after it was issued).
	ErrNotAllowed = errors.New("not sent: this instance may no longer own the partition")
)

// Append is one batch's append through a sink and, once Done is closed,
// its outcome.
type Append struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	TxnID     *string // a mirrored transaction's: such a batch shares a request only with batches of the same id
	Records   []byte
	// Gen is the partition's send generation: the runner moves it on
	// when it resends or aligns, which lifts a mute (appendSink.mute).
	Gen uint32

	done chan struct{}
	resp kmsg.ProduceResponseTopicPartition // the partition's answer, when err is nil
	err  error
	at   time.Time // when the outcome arrived
}

// Done is closed once the outcome is known.
func (c *Append) Done() <-chan struct{} { return c.done }

// Wait returns the partition's answer, or why there is none. An outcome
// already known is returned even if ctx has ended: a select between the
// two would drop a landed batch's answer half the time (and with it the
// batch from the last mirrored offset a stop records).
func (c *Append) Wait(ctx context.Context) (*kmsg.ProduceResponseTopicPartition, error) {
	select {
	case <-c.done:
	default:
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	return &c.resp, nil
}

// CompletedAt is when the outcome arrived.
func (c *Append) CompletedAt() time.Time { return c.at }

func (c *Append) finish(resp *kmsg.ProduceResponseTopicPartition, err error, at time.Time) {
	if resp != nil {
		c.resp = *resp
	}
	c.err, c.at, c.Records = err, at, nil
	close(c.done)
}

// Sinks are the engine's sinks, one per destination broker, each
// with its own goroutine: the appends of every partition a broker leads
// share its Produce requests, as a Kafka producer's do.
type Sinks struct {
	pool    *Conns
	timeout int32       // TimeoutMillis of every Produce
	allowed func() bool // the owner gate, nil: none

	ctx    context.Context // ends after the runners are done (close)
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	sinks map[connSlot]*appendSink
}

// NewSinks returns the sinks on pool's connections, whose Produce requests
// wait up to timeout for the destination's replicas. allowed is the owner
// gate (nil: always open), asked right before each request is written: a
// request queued while the instance could write is not written once it
// may have lost its shards (its appends fail unsent, ErrNotAllowed).
func NewSinks(pool *Conns, timeout time.Duration, allowed func() bool) *Sinks {
	s := &Sinks{pool: pool, timeout: int32(timeout / time.Millisecond), allowed: allowed, sinks: make(map[connSlot]*appendSink)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Issue queues c for the destination broker and returns at once, on the
// sink of its partition's slot.
func (s *Sinks) Issue(broker int32, c *Append) {
	c.done = make(chan struct{})
	slot := connSlot{broker: broker, slot: Slot(c.Topic, c.Partition, sinkConns)}
	s.mu.Lock()
	sk, ok := s.sinks[slot]
	if !ok {
		sk = &appendSink{pool: s.pool, slot: slot, timeout: s.timeout, allowed: s.allowed, wake: make(chan struct{}, 1)}
		s.sinks[slot] = sk
		s.wg.Go(func() { sk.run(s.ctx) })
	}
	s.mu.Unlock()
	sk.add(c)
}

// Close ends the sinks once nothing appends any more (the runners have
// exited): what is queued or in flight fails.
func (s *Sinks) Close() {
	s.cancel()
	s.wg.Wait()
}

// appendSink sends the appends for one destination broker. Each request
// carries at most one batch per partition, and a partition's batches go in
// the order they were issued, in requests written in that order on one
// connection, so the broker sees each partition's sequences in order.
//
// Once an append fails, its partition is muted: what it still has queued,
// and what it issues until its runner resends or aligns again (a newer
// Gen), fails unsent. The broker's sequence checks keep one writer's
// batches in order, but not batches of different producers (kmirror's
// writer and a mirrored transaction's): a later batch of another
// producer sent on a new connection while an earlier one's outcome is
// unknown could land at the earlier one's offset.
type appendSink struct {
	pool    *Conns
	slot    connSlot
	timeout int32
	allowed func() bool

	mu    sync.Mutex
	queue []*Append          // issued, not sent, oldest first
	muted map[sinkKey]uint32 // by partition (by name), the Gen of its failed append
	wake  chan struct{}
}

func (s *appendSink) add(c *Append) {
	s.mu.Lock()
	k := sinkKey{topic: c.Topic, partition: c.Partition}
	if g, ok := s.muted[k]; ok {
		if !newerGen(c.Gen, g) {
			s.mu.Unlock()
			c.finish(nil, ErrMuted, time.Now())
			return
		}
		delete(s.muted, k) // the runner resends or aligned again
	}
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// newerGen compares send generations across their wrap.
func newerGen(a, b uint32) bool { return int32(a-b) > 0 }

// mute stops the partitions of calls, failed appends, from sending
// anything more of their generation: their queued appends fail unsent.
// A failure of an older generation than the partition's newest mute
// changes nothing.
func (s *appendSink) mute(calls []*Append) {
	s.mu.Lock()
	for _, c := range calls {
		k := sinkKey{topic: c.Topic, partition: c.Partition}
		if g, ok := s.muted[k]; ok && !newerGen(c.Gen, g) {
			continue
		}
		if s.muted == nil {
			s.muted = make(map[sinkKey]uint32)
		}
		s.muted[k] = c.Gen
	}
	var drop []*Append
	keep := s.queue[:0]
	for _, c := range s.queue {
		if g, ok := s.muted[sinkKey{topic: c.Topic, partition: c.Partition}]; ok && !newerGen(c.Gen, g) {
			drop = append(drop, c)
			continue
		}
		keep = append(keep, c)
	}
	clear(s.queue[len(keep):])
	s.queue = keep
	s.mu.Unlock()
	s.fail(drop, ErrMuted, time.Now())
}

// sentRequest is a Produce request in flight and the appends it carries.
type sentRequest struct {
	p     *wire.Pending
	conn  *wire.Conn
	calls []*Append
}

func (s *appendSink) run(ctx context.Context) {
	var (
		conn   *wire.Conn
		flight []sentRequest
	)
	for {
		if ctx.Err() != nil {
			// The runners are done (close): nobody waits for an
			// answer any more, and a hung broker must not hold Close.
			s.failQueued(errSinkClosed)
			for _, sr := range flight {
				s.fail(sr.calls, errSinkClosed, time.Now())
			}
			return
		}
		if len(flight) < sinkInFlight && s.queued() {
			var err error
			if conn, err = s.connect(ctx, conn); err != nil {
				s.mute(s.failQueued(err))
				continue
			}
			req, calls := s.take()
			if s.allowed != nil && !s.allowed() {
				s.fail(calls, ErrNotAllowed, time.Now())
				s.mute(calls)
				continue
			}
			p, err := conn.Issue(req)
			if err != nil {
				s.pool.failed(s.slot, conn, err)
				conn = nil
				s.fail(calls, fmt.Errorf("produce to destination broker %d: %w", s.slot.broker, err), time.Now())
				s.mute(calls)
				continue
			}
			flight = append(flight, sentRequest{p: p, conn: conn, calls: calls})
			continue
		}
		var oldest <-chan struct{}
		if len(flight) > 0 {
			oldest = flight[0].p.Done()
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-oldest:
			sr := flight[0]
			flight[0] = sentRequest{}
			flight = flight[1:]
			if s.answer(sr) {
				// Every request still out on that connection is
				// lost with it: mute their partitions now, before
				// anything goes out on a new one.
				for _, o := range flight {
					if o.conn == sr.conn {
						s.mute(o.calls)
					}
				}
				if sr.conn == conn {
					conn = nil
				}
			}
		}
	}
}

// connect returns conn if it is still usable, or the pool's connection.
func (s *appendSink) connect(ctx context.Context, conn *wire.Conn) (*wire.Conn, error) {
	if conn != nil {
		select {
		case <-conn.Done():
		default:
			return conn, nil
		}
	}
	return s.pool.get(ctx, s.slot)
}

func (s *appendSink) queued() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// failQueued fails every append not sent yet and returns them.
func (s *appendSink) failQueued(err error) []*Append {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.fail(q, err, time.Now())
	return q
}

func (s *appendSink) fail(calls []*Append, err error, at time.Time) {
	for _, c := range calls {
		c.finish(nil, err, at)
	}
}

// sinkKey finds a partition in a request and in its answer, which names
// topics by id from v13 on and by name before.
type sinkKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// take removes from the queue the appends of the next request and builds
// it: the oldest append, and after it every append of a partition not in
// the request yet, with the same transactional id, within the request's
// size; an append left queued holds back its partition's later ones.
func (s *appendSink) take() (*kmsg.ProduceRequest, []*Append) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.queue[0]
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = s.timeout
	req.TransactionID = first.TxnID
	seen := make(map[sinkKey]bool, len(s.queue))
	topics := make(map[string]int)
	var (
		calls []*Append
		rest  []*Append
		bytes int
	)
	for _, c := range s.queue {
		k := sinkKey{topic: c.Topic, partition: c.Partition}
		fits := len(calls) == 0 || (bytes+len(c.Records) <= sinkRequestBytes && sameTxn(c.TxnID, first.TxnID))
		if seen[k] || !fits {
			seen[k] = true
			rest = append(rest, c)
			continue
		}
		seen[k] = true
		bytes += len(c.Records)
		calls = append(calls, c)
		i, ok := topics[c.Topic]
		if !ok {
			i = len(req.Topics)
			topics[c.Topic] = i
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = c.Topic, c.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = c.Partition
		rp.Records = c.Records
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	s.queue = rest
	return req, calls
}

func sameTxn(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// answer completes the appends of an answered request and reports whether
// its connection failed.
func (s *appendSink) answer(sr sentRequest) (connFailed bool) {
	raw, err := sr.p.Wait(context.Background()) // done already
	at := sr.p.CompletedAt()
	if err != nil {
		s.pool.failed(s.slot, sr.conn, err)
		s.fail(sr.calls, err, at)
		s.mute(sr.calls)
		return errors.Is(err, wire.ErrConnClosed)
	}
	resp := raw.(*kmsg.ProduceResponse)
	byID := resp.GetVersion() >= 13
	answers := make(map[sinkKey]*kmsg.ProduceResponseTopicPartition, len(sr.calls))
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			k := sinkKey{topic: t.Topic, partition: t.Partitions[j].Partition}
			if byID {
				k = sinkKey{id: t.TopicID, partition: t.Partitions[j].Partition}
			}
			answers[k] = &t.Partitions[j]
		}
	}
	var failed []*Append
	for _, c := range sr.calls {
		k := sinkKey{topic: c.Topic, partition: c.Partition}
		if byID {
			k = sinkKey{id: c.TopicID, partition: c.Partition}
		}
		a, ok := answers[k]
		switch {
		case !ok:
			failed = append(failed, c)
			c.finish(nil, ErrMalformedProduce, at)
		case a.ErrorCode != 0 && a.ErrorCode != kerr.DuplicateSequenceNumber.Code:
			// The partition's runner resends or aligns; a resend
			// answered DUPLICATE_SEQUENCE_NUMBER may have landed.
			failed = append(failed, c)
			c.finish(a, nil, at)
		default:
			c.finish(a, nil, at)
		}
	}
	s.mute(failed)
	return false
}

// Slot spreads the partitions of one broker over n: the mirror's fetchers,
// the destination broker's connections (sinkConns).
func Slot(topic string, p int32, n int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((h.Sum32() + uint32(p)) % uint32(n))
}
