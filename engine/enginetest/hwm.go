package enginetest

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/linkproxy"
)

// HWMHold stands between a kfake cluster's listeners and its clients and
// makes one partition behave like a real replicating broker whose
// followers lag: a Produce is applied, but its answer is lost (the
// connection is closed instead), and the high watermark stays where it was
// before that Produce, so ListOffsets(latest) and Fetch show neither the
// batch nor the offsets after it. kfake alone keeps the high watermark at
// the log end, and a Produce it applies is always answered.
//
// The hold ends when an answer to a later Produce of the partition goes
// through (with acks=all that means the followers caught up), or at
// Release. Pass Listen to the cluster with kfake.ListenFn.
//
// It also answers DescribeProducers for the partition as a real broker
// does: kfake lists only producers with an open transaction there, a real
// leader every producer with state on the partition (idempotent ones too),
// and from its log, above the high watermark too. The hold adds what it saw
// applied of the others.
//
// It parses the Kafka framing itself, because a kfake control function can
// only answer a request in place of the cluster or let the cluster answer
// it, not both: it cannot have a Produce applied and then lose the answer.
type HWMHold struct {
	mu        sync.Mutex
	topic     string
	topicID   [16]byte
	partition int32
	armed     bool
	drops     int   // Produce answers still to lose
	dropped   int   // Produce answers lost so far
	held      int64 // the high watermark shown for the partition, -1 when none is held
	// producers is the state of each producer that the partition applied
	// a batch of since Arm, by producer id.
	producers map[int64]producerState
}

// producerState is what a leader keeps of one producer on a partition.
type producerState struct {
	epoch         int16
	lastSequence  int32
	lastTimestamp int64
}

// NewHWMHold returns a hold on no partition yet (Arm).
func NewHWMHold() *HWMHold { return &HWMHold{held: -1, producers: make(map[int64]producerState)} }

// Arm targets partition p of topic (whose id on the cluster is id: newer
// Produce and Fetch versions name topics by id) and loses the answers to
// its next n successful Produce requests.
func (h *HWMHold) Arm(topic string, id [16]byte, p int32, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.topic, h.topicID, h.partition, h.armed, h.drops = topic, id, p, true, n
}

// Dropped is how many Produce answers have been lost so far.
func (h *HWMHold) Dropped() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

// Held is the high watermark shown for the partition while the hold
// lasts, -1 when none is held.
func (h *HWMHold) Held() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Release ends the hold and loses no more answers: the followers caught up.
func (h *HWMHold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.drops = -1, 0
}

// Listen opens a TCP listener whose connections go through the hold.
func (h *HWMHold) Listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &hwmListener{Listener: l, h: h}, nil
}

type hwmListener struct {
	net.Listener
	h *HWMHold
}

func (l *hwmListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &hwmConn{Conn: c, h: l.h, reqs: make(map[int32]reqInfo)}, nil
}

// reqInfo is what a response needs to know of its request.
type reqInfo struct {
	key, version int16
	latest       bool // a ListOffsets asking the partition's latest offset
	// produced is the producer state a Produce's batch for the
	// partition leaves once applied, for producerID (-1: none).
	produced   producerState
	producerID int64
}

// hwmConn is the cluster's side of one client connection: Read sees the
// client's requests, Write the cluster's responses. kfake reads from one
// goroutine and writes from another, hence mu around reqs.
type hwmConn struct {
	net.Conn
	h *HWMHold

	in  []byte // request bytes read, short of a whole request
	out []byte // response bytes written, short of a whole response

	mu   sync.Mutex
	reqs map[int32]reqInfo // requests of the partition by correlation id, awaiting their answers
}

var errAnswerLost = errors.New("answer lost by the test's high watermark hold")

func (c *hwmConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in = append(c.in, p[:n]...)
	for {
		frame, rest, ok := linkproxy.NextFrame(c.in)
		if !ok {
			break
		}
		c.noteRequest(frame)
		c.in = append(c.in[:0], rest...)
	}
	return n, err
}

func (c *hwmConn) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	for {
		frame, rest, ok := linkproxy.NextFrame(c.out)
		if !ok {
			return len(p), nil
		}
		frame, lose := c.answer(frame)
		c.out = append(c.out[:0], rest...)
		if lose {
			_ = c.Conn.Close()
			return 0, errAnswerLost
		}
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
	}
}

// noteRequest remembers a Produce, Fetch or ListOffsets request naming the
// partition, so its answer can be lost or rewritten.
func (c *hwmConn) noteRequest(frame []byte) {
	h, _, err := linkproxy.ParseRequestHeader(frame)
	if err != nil {
		return
	}
	switch kmsg.Key(h.Key) {
	case kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.DescribeProducers:
	default:
		return
	}
	_, req, err := linkproxy.DecodeRequest(frame)
	if err != nil {
		return
	}
	info, ok := c.h.names(req)
	if !ok {
		return
	}
	info.key, info.version = h.Key, h.Version
	c.mu.Lock()
	c.reqs[h.Corr] = info
	c.mu.Unlock()
}

// answer returns the response frame to write instead of frame, or lose.
func (c *hwmConn) answer(frame []byte) (out []byte, lose bool) {
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	c.mu.Lock()
	info, ok := c.reqs[corr]
	delete(c.reqs, corr)
	c.mu.Unlock()
	if !ok {
		return frame, false
	}
	resp, err := linkproxy.DecodeResponse(frame, info.key, info.version)
	if err != nil {
		return frame, false
	}
	changed, lose := c.h.rewrite(resp, info)
	if lose || !changed {
		return frame, lose
	}
	return linkproxy.AppendResponse(nil, corr, resp), false
}

// isTopic reports whether a request or response names the held topic.
func (h *HWMHold) isTopic(name string, id [16]byte) bool {
	return name == h.topic || (id != [16]byte{} && id == h.topicID)
}

// names reports whether req names the held partition.
func (h *HWMHold) names(req kmsg.Request) (reqInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed {
		return reqInfo{}, false
	}
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if h.isTopic(t.Topic, t.TopicID) && p.Partition == h.partition {
					return producedBy(p.Records), true
				}
			}
		}
	case *kmsg.DescribeProducersRequest:
		for _, t := range req.Topics {
			if h.isTopic(t.Topic, [16]byte{}) && slices.Contains(t.Partitions, h.partition) {
				return reqInfo{}, true
			}
		}
	case *kmsg.FetchRequest:
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if h.isTopic(t.Topic, t.TopicID) && p.Partition == h.partition {
					return reqInfo{}, true
				}
			}
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if h.isTopic(t.Topic, [16]byte{}) && p.Partition == h.partition {
					return reqInfo{latest: p.Timestamp == -1}, true
				}
			}
		}
	}
	return reqInfo{}, false
}

// rewrite applies the hold to a response of the held partition: it loses
// a Produce answer, or shows the held high watermark.
func (h *HWMHold) rewrite(resp kmsg.Response, info reqInfo) (changed, lose bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch resp := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if !h.isTopic(t.Topic, t.TopicID) || p.Partition != h.partition || p.ErrorCode != 0 {
					continue
				}
				if info.producerID >= 0 {
					// Applied: the leader's producer state has it,
					// answered or not.
					h.producers[info.producerID] = info.produced
				}
				if h.drops > 0 {
					// Applied, unanswered: the high watermark stays
					// before the batch (or before an earlier one
					// still held).
					h.drops--
					h.dropped++
					if h.held < 0 || p.BaseOffset < h.held {
						h.held = p.BaseOffset
					}
					return false, true
				}
				h.held = -1 // acknowledged: the followers have it all
			}
		}
	case *kmsg.DescribeProducersResponse:
		for i := range resp.Topics {
			t := &resp.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if h.isTopic(t.Topic, [16]byte{}) && p.Partition == h.partition && p.ErrorCode == 0 {
					changed = h.addProducers(p) || changed
				}
			}
		}
	case *kmsg.ListOffsetsResponse:
		if h.held < 0 || !info.latest {
			return false, false
		}
		for i := range resp.Topics {
			t := &resp.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if h.isTopic(t.Topic, [16]byte{}) && p.Partition == h.partition && p.ErrorCode == 0 && p.Offset > h.held {
					p.Offset, changed = h.held, true
				}
			}
		}
	case *kmsg.FetchResponse:
		if h.held < 0 {
			return false, false
		}
		for i := range resp.Topics {
			t := &resp.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if !h.isTopic(t.Topic, t.TopicID) || p.Partition != h.partition || p.HighWatermark <= h.held {
					continue
				}
				p.HighWatermark = h.held
				p.LastStableOffset = min(p.LastStableOffset, h.held)
				p.RecordBatches = below(p.RecordBatches, h.held)
				changed = true
			}
		}
	}
	return changed, false
}

// below keeps the record batches of b that end at or before end: a broker
// serves consumers nothing above the high watermark.
func below(b []byte, end int64) []byte {
	var n int
	for n+27 <= len(b) {
		base := int64(binary.BigEndian.Uint64(b[n:]))
		size := 12 + int(binary.BigEndian.Uint32(b[n+8:]))
		last := base + int64(int32(binary.BigEndian.Uint32(b[n+23:])))
		if last >= end || n+size > len(b) {
			break
		}
		n += size
	}
	return b[:n]
}

// producedBy returns the producer state a Produce's records leave once
// applied, producerID -1 when they carry none.
func producedBy(records []byte) reqInfo {
	const headerSize = 61
	if len(records) < headerSize {
		return reqInfo{producerID: -1}
	}
	id := int64(binary.BigEndian.Uint64(records[43:]))
	if id < 0 {
		return reqInfo{producerID: -1}
	}
	base := int32(binary.BigEndian.Uint32(records[53:]))
	count := int32(binary.BigEndian.Uint32(records[57:]))
	last := int64(base) + int64(count) - 1
	if last > math.MaxInt32 {
		last -= math.MaxInt32 + 1 // sequences wrap to 0 past MaxInt32
	}
	return reqInfo{producerID: id, produced: producerState{
		epoch:         int16(binary.BigEndian.Uint16(records[51:])),
		lastSequence:  int32(last),
		lastTimestamp: int64(binary.BigEndian.Uint64(records[35:])),
	}}
}

// addProducers adds to p the producers the hold saw applied that the
// cluster did not list.
func (h *HWMHold) addProducers(p *kmsg.DescribeProducersResponseTopicPartition) bool {
	var changed bool
	for id, st := range h.producers {
		if slices.ContainsFunc(p.ActiveProducers, func(a kmsg.DescribeProducersResponseTopicPartitionActiveProducer) bool { return a.ProducerID == id }) {
			continue
		}
		a := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		a.ProducerID, a.ProducerEpoch = id, int32(st.epoch)
		a.LastSequence, a.LastTimestamp = st.lastSequence, st.lastTimestamp
		p.ActiveProducers = append(p.ActiveProducers, a)
		changed = true
	}
	return changed
}
