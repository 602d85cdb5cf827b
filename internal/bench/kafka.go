package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/wire"
	"github.com/kmirror/kmirror/internal/backoff"
)

// codecs are the compression codecs the bench can produce with, by name.
var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// newClient connects a franz-go client to a bench cluster.
func newClient(addrs []string, opts ...kgo.Opt) (*kgo.Client, error) {
	// Client telemetry (KIP-714) would add a compressor and periodic
	// pushes to the figures of the process; the bench's own clients are
	// not what is measured.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID("kmirror-bench"), kgo.DisableClientMetrics()}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", addrs, err)
	}
	return cl, nil
}

// layout is where a topic's partitions live: leader broker and leader
// epoch by partition, and the topic id raw requests need from v13 on.
type layout struct {
	topic   string
	id      [16]byte
	leaders []int32
	epochs  []int32
}

// topicLayout asks for a topic's layout with an uncached Metadata request,
// waiting until every partition has a leader (a topic just created may not).
func topicLayout(ctx context.Context, cl *kgo.Client, topic string) (layout, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := tryLayout(ctx, cl, topic)
		if err == nil || time.Now().After(deadline) {
			return l, err
		}
		if werr := backoff.Sleep(ctx, 50*time.Millisecond); werr != nil {
			return l, werr
		}
	}
}

func tryLayout(ctx context.Context, cl *kgo.Client, topic string) (layout, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return layout{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return layout{}, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return layout{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	l := layout{topic: topic, id: t.TopicID, leaders: make([]int32, len(t.Partitions)), epochs: make([]int32, len(t.Partitions))}
	for i := range l.leaders {
		l.leaders[i] = -1
	}
	for _, p := range t.Partitions {
		if p.Partition < 0 || int(p.Partition) >= len(l.leaders) {
			return layout{}, fmt.Errorf("metadata of %s: partition %d out of range", topic, p.Partition)
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return layout{}, fmt.Errorf("metadata of %s/%d: %w", topic, p.Partition, err)
		}
		l.leaders[p.Partition], l.epochs[p.Partition] = p.Leader, p.LeaderEpoch
	}
	for p, ld := range l.leaders {
		if ld < 0 {
			return layout{}, fmt.Errorf("metadata of %s/%d: no leader", topic, p)
		}
	}
	return l, nil
}

// byLeader groups partition numbers by leader broker.
func (l layout) byLeader() map[int32][]int32 {
	out := make(map[int32][]int32)
	for p, ld := range l.leaders {
		out[ld] = append(out[ld], int32(p))
	}
	return out
}

// createTopic creates a topic and waits until all its partitions have leaders.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) (layout, error) {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return layout{}, fmt.Errorf("create topic %s: %w", topic, err)
	}
	return topicLayout(ctx, cl, topic)
}

// deleteTopics deletes topics; the bench frees broker memory with it
// between phases, so an error is only reported, never fatal to a result.
func deleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	return nil
}

// endOffsets returns the log end offset of every partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32) ([]int64, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	out := make([]int64, partitions)
	for p := range partitions {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			return nil, fmt.Errorf("list end offsets of %s: partition %d missing", topic, p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// fetchPart is one partition of a raw fetch.
type fetchPart struct {
	partition int32
	offset    int64
	maxBytes  int32
}

// fetchAnswer is one partition's answer to a raw fetch.
type fetchAnswer struct {
	partition int32
	records   []byte
	hwm       int64
}

// rawFetch sends one Fetch request for parts of l's topic to broker and
// returns each partition's raw record bytes. Any partition error fails it:
// the bench's topics are stable, so an error means the bench is broken.
func rawFetch(ctx context.Context, cl *kgo.Client, broker int32, l layout, parts []fetchPart, maxWait time.Duration) ([]fetchAnswer, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = l.topic
	rt.TopicID = l.id
	for _, fp := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = fp.partition
		rp.FetchOffset = fp.offset
		rp.CurrentLeaderEpoch = l.epochs[fp.partition]
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = fp.maxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s from broker %d: %w", l.topic, broker, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s from broker %d: %w", l.topic, broker, err)
	}
	out := make([]fetchAnswer, 0, len(parts))
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetch %s/%d from broker %d: %w", l.topic, p.Partition, broker, err)
			}
			out = append(out, fetchAnswer{partition: p.Partition, records: p.RecordBatches, hwm: p.HighWatermark})
		}
	}
	return out, nil
}

// rawProduce appends one v2 batch (already rewritten for a client Produce)
// to partition p of l's topic and returns the base offset it landed at.
func rawProduce(ctx context.Context, cl *kgo.Client, l layout, p int32, b []byte) (int64, error) {
	resp, err := cl.Broker(int(l.leaders[p])).Request(ctx, wire.ProduceRequest(l.topic, l.id, p, b, 30*time.Second, nil))
	if err != nil {
		return 0, fmt.Errorf("produce to %s/%d: %w", l.topic, p, err)
	}
	base, err := wire.ProduceAnswer(resp)
	if err != nil {
		return 0, fmt.Errorf("produce to %s/%d: %w", l.topic, p, err)
	}
	return base, nil
}
