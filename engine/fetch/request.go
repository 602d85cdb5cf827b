package fetch

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Limits are a Fetch request's byte limits (fetch.min.bytes,
// fetch.response.max.bytes); zero fields take Kafka's replica fetcher
// defaults.
type Limits struct {
	MinBytes, MaxBytes int32
}

// newFetchRequest is a Fetch request with no partitions and no session.
func newFetchRequest(maxWait int32, limits Limits) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes, req.MaxBytes = 1, 64<<20
	if limits.MinBytes > 0 {
		req.MinBytes = limits.MinBytes
	}
	if limits.MaxBytes > 0 {
		req.MaxBytes = limits.MaxBytes
	}
	req.IsolationLevel = 0 // READ_UNCOMMITTED: everything up to the high watermark
	req.SessionID = 0
	req.SessionEpoch = -1
	return req
}

// fetchPartition is w's partition in a Fetch request.
func fetchPartition[R Receiver](w Want[R]) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = w.Partition
	rp.FetchOffset = w.Offset
	rp.CurrentLeaderEpoch = w.LeaderEpoch
	rp.LastFetchedEpoch = w.LastEpoch
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = w.MaxBytes
	return rp
}

// fetchRequest builds the sessionless Fetch request of job, with the index
// that finds a want from a response partition.
func fetchRequest[R Receiver](job fetchJob[R]) (*kmsg.FetchRequest, *wantIndex) {
	req := newFetchRequest(job.maxWait, job.limits)
	idx := newWantIndex()
	for j, w := range job.wants {
		i, added := idx.add(w.topic(), w.TopicID, w.Partition, j)
		if added {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = w.topic()
			rt.TopicID = w.TopicID
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fetchPartition(w))
	}
	return req, idx
}

// wantIndex finds the want a response partition answers: by topic (by
// name, or by id in v13+ answers), then by partition number. A long-poll
// lists every idle partition its connection serves and lives as long as
// the poll, so it costs four bytes per partition, not a map entry.
type wantIndex struct {
	byName map[string]int   // topic → its place in topics and in the request
	byID   map[[16]byte]int // the same by topic id
	topics []indexedTopic
}

// indexedTopic is one topic of a wantIndex.
type indexedTopic struct {
	name  string
	wants []int32 // by partition number: the want's index + 1, 0 when not asked
}

func newWantIndex() *wantIndex {
	return &wantIndex{byName: make(map[string]int), byID: make(map[[16]byte]int)}
}

// add records want j for partition p of a topic and returns the topic's
// place, and whether the topic is new to the index.
func (x *wantIndex) add(name string, id [16]byte, p int32, j int) (int, bool) {
	i, ok := x.byName[name]
	if !ok {
		i = len(x.topics)
		x.byName[name] = i
		x.topics = append(x.topics, indexedTopic{name: name})
	}
	x.byID[id] = i
	t := &x.topics[i]
	if n := int(p) + 1; n > len(t.wants) {
		t.wants = append(t.wants, make([]int32, n-len(t.wants))...)
	}
	t.wants[p] = int32(j) + 1
	return i, !ok
}

// find returns the index of the want of partition p of the topic a
// response names (name, or id when name is empty), and the topic's name.
func (x *wantIndex) find(name string, id [16]byte, p int32) (int, string, bool) {
	i, ok := x.byName[name]
	if name == "" {
		i, ok = x.byID[id]
	}
	if !ok || p < 0 {
		return 0, name, false
	}
	t := x.topics[i]
	if int(p) >= len(t.wants) || t.wants[p] == 0 {
		return 0, t.name, false
	}
	return int(t.wants[p]) - 1, t.name, true
}

// hasRecords reports whether a Fetch response holds records for any
// partition.
func hasRecords(fr *kmsg.FetchResponse) bool {
	for _, t := range fr.Topics {
		for i := range t.Partitions {
			if len(t.Partitions[i].RecordBatches) > 0 {
				return true
			}
		}
	}
	return false
}

// resultOf is the fetch result of w from its partition's answer p (of
// topic name), which arrived from broker at at, the fetcher's round trip
// to it being rtt.
func resultOf[R Receiver](w Want[R], p *kmsg.FetchResponseTopicPartition, name string, broker int32, at, rtt time.Duration) Result {
	res := Result{Gen: w.Gen, Offset: w.Offset, Records: p.RecordBatches, HWM: p.HighWatermark, LogStart: p.LogStartOffset, At: at, RTT: rtt}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		res.Err = fetchErr(name, p.Partition, w.Offset, broker, err)
	}
	if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
		d := p.DivergingEpoch
		res.Divergence = &d
	}
	return res
}

// fetchErr is the error of a fetch of topic/p at offset from broker.
func fetchErr(topic string, p int32, offset int64, broker int32, err error) error {
	return fmt.Errorf("fetch %s/%d at %d from source broker %d: %w", topic, p, offset, broker, err)
}
