package engine

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchKey identifies a fetcher. Partitions of different mirrors never share
// one (each mirror has its own source client and credentials); partitions of
// one mirror led by one broker spread over mirror.num.fetchers fetchers.
type fetchKey struct {
	mirror string
	broker int32
	index  int
}

// want asks a fetcher for one partition's records from offset. The runner
// that owns the partition keeps at most one want outstanding; the fetcher
// answers it exactly once on reply (buffered, so the fetcher never blocks).
type want struct {
	topic       string
	topicID     [16]byte
	partition   int32
	offset      int64
	leaderEpoch int32 // CurrentLeaderEpoch: the source epoch the runner last saw
	lastEpoch   int32 // LastFetchedEpoch: epoch of the last batch fetched, -1 none
	maxBytes    int32
	gen         uint64
	reply       chan fetchResult
	behind      bool // offset is below the high watermark last seen: data is waiting
}

// fetchResult is a fetcher's answer to a want.
type fetchResult struct {
	gen        uint64
	offset     int64  // the offset that was asked for
	records    []byte // raw batches, still compressed; owned by the receiver
	hwm        int64
	logStart   int64
	divergence *kmsg.FetchResponseTopicPartitionDivergingEpoch // nil unless the broker reported one
	err        error
}

// fetcher sends raw Fetch requests for the partitions that want data to one
// source broker. It keeps no per-partition state beyond the pending wants:
// the runners own their positions, so moving a partition to another fetcher
// after a leader change loses nothing.
type fetcher struct {
	key     fetchKey
	src     *cluster
	maxWait int32
	wants   chan want
}

func newFetcher(key fetchKey, src *cluster, maxWaitMs int32) *fetcher {
	return &fetcher{key: key, src: src, maxWait: maxWaitMs, wants: make(chan want, 1024)}
}

// run serves wants until ctx ends.
func (f *fetcher) run(ctx context.Context) {
	pending := make([]want, 0, 64)
	for {
		pending = pending[:0]
		select {
		case <-ctx.Done():
			return
		case w := <-f.wants:
			pending = append(pending, w)
		}
	drain:
		for {
			select {
			case w := <-f.wants:
				pending = append(pending, w)
			default:
				break drain
			}
		}
		f.fetch(ctx, pending)
	}
}

// fetch issues one Fetch request for pending and answers each want.
func (f *fetcher) fetch(ctx context.Context, pending []want) {
	pending = newestWants(pending)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = f.maxWait
	for _, w := range pending {
		if w.behind {
			// A partition with data waiting must not sit behind a
			// long-poll of the caught-up ones.
			req.MaxWaitMillis = 0
			break
		}
	}
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	req.IsolationLevel = 0 // READ_UNCOMMITTED: everything up to the high watermark
	req.SessionID = 0
	req.SessionEpoch = -1
	byTopic := make(map[string]int)
	byID := make(map[[16]byte]string)
	idx := make(map[tp]int, len(pending))
	for j, w := range pending {
		idx[tp{w.topic, w.partition}] = j
		byID[w.topicID] = w.topic
		i, ok := byTopic[w.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[w.topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = w.topic
			rt.TopicID = w.topicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = w.partition
		rp.FetchOffset = w.offset
		rp.CurrentLeaderEpoch = w.leaderEpoch
		rp.LastFetchedEpoch = w.lastEpoch
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = w.maxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}

	resp, err := f.src.cl.Broker(int(f.key.broker)).Request(ctx, req)
	if err != nil {
		for _, w := range pending {
			deliver(w.reply, fetchResult{gen: w.gen, offset: w.offset, err: fmt.Errorf("fetch from source broker %d: %w", f.key.broker, err)})
		}
		return
	}
	fr := resp.(*kmsg.FetchResponse)
	answered := make([]bool, len(pending))
	topErr := kerr.ErrorForCode(fr.ErrorCode)
	for _, t := range fr.Topics {
		name := t.Topic
		if name == "" { // v13+ answers by topic id
			name = byID[t.TopicID]
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			j, ok := idx[tp{name, p.Partition}]
			if !ok || answered[j] {
				continue
			}
			answered[j] = true
			w := pending[j]
			res := fetchResult{gen: w.gen, offset: w.offset, records: p.RecordBatches, hwm: p.HighWatermark, logStart: p.LogStartOffset}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				res.err = fmt.Errorf("fetch %s/%d at %d from source broker %d: %w", name, p.Partition, w.offset, f.key.broker, err)
			}
			if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
				d := p.DivergingEpoch
				res.divergence = &d
			}
			deliver(w.reply, res)
		}
	}
	for j, w := range pending {
		if answered[j] {
			continue
		}
		err := topErr
		if err == nil {
			err = kerr.UnknownTopicOrPartition
		}
		deliver(w.reply, fetchResult{gen: w.gen, offset: w.offset, err: fmt.Errorf("fetch %s/%d from source broker %d: partition missing from response: %w", w.topic, w.partition, f.key.broker, err)})
	}
}

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// deliver hands res to a runner without ever blocking the fetcher, which
// serves other partitions too. A runner cares only about the answer to its
// newest want, so an unread older answer is replaced.
func deliver(ch chan fetchResult, res fetchResult) {
	for {
		select {
		case ch <- res:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// newestWants keeps one want per partition, the last one posted: a runner
// that realigned posts a new want while its previous one may still wait
// here, and one request must not ask for a partition twice (the answers
// could not be told apart).
func newestWants(pending []want) []want {
	last := make(map[tp]int, len(pending))
	for i, w := range pending {
		last[tp{w.topic, w.partition}] = i
	}
	if len(last) == len(pending) {
		return pending
	}
	out := pending[:0]
	for i, w := range pending {
		if last[tp{w.topic, w.partition}] == i {
			out = append(out, w)
		}
	}
	return out
}
