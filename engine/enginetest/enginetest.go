// Package enginetest runs kmirror against real in-process Kafka clusters
// (franz-go's kfake, three brokers each, distinct cluster ids) and compares
// what lands on the destination with the source, batch by batch and record
// by record.
package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
)

// Cluster is one in-process Kafka cluster.
type Cluster struct {
	*kfake.Cluster
	ID string
}

// Addrs are the cluster's listener addresses.
func (c *Cluster) Addrs() []string { return c.ListenAddrs() }

// NewCluster starts a three-broker kfake cluster with the given cluster id
// and closes it when the test ends.
func NewCluster(t testing.TB, id string, opts ...kfake.Opt) *Cluster {
	t.Helper()
	all := append([]kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID(id)}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("start cluster %s: %v", id, err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Cluster: c, ID: id}
}

// Pair starts a source and a destination cluster with distinct ids.
func Pair(t testing.TB) (src, dst *Cluster) {
	return NewCluster(t, "kmirror-test-source"), NewCluster(t, "kmirror-test-destination")
}

// Client returns a franz-go client for the cluster, closed with the test.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client for the cluster.
func (c *Cluster) Admin(t testing.TB) *kadm.Client { return kadm.NewClient(c.Client(t)) }

// CreateTopic creates a topic with partitions partitions.
func (c *Cluster) CreateTopic(t testing.TB, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := c.Admin(t).CreateTopic(context.Background(), partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// Codecs are the compression codecs Kafka knows, by name.
var Codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// ProducerOpts returns the options of a real franz-go producer that batches:
// the codec, idempotent or not, and a linger so batches hold many records.
func ProducerOpts(codec string, idempotent bool) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ProducerBatchCompression(Codecs[codec]),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	}
	return opts
}

// Produce writes n keyed records with headers to each partition of topic,
// in bursts so that batches hold many records, and waits for every ack.
func Produce(t testing.TB, cl *kgo.Client, topic string, partitions int32, n int, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, 0, n*int(partitions))
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{
				Topic:     topic,
				Partition: p,
				Key:       fmt.Appendf(nil, "%s-k%d", tag, i%17),
				Value:     fmt.Appendf(nil, `{"tag":%q,"p":%d,"i":%d,"pad":"%s"}`, tag, p, i, strings.Repeat("x", i%50)),
				Headers:   []kgo.RecordHeader{{Key: "tag", Value: []byte(tag)}, {Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
			})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// RawBatch is one stored batch as a fetch returns it.
type RawBatch struct {
	Header  batch.Header
	Payload []byte // the records section, still compressed
}

// ProduceInBackground writes n records to each partition of each topic,
// round after round, until stop is closed; wait on the group it returns
// after closing stop.
func ProduceInBackground(t testing.TB, cl *kgo.Client, partitions int32, n int, stop <-chan struct{}, topics ...string) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, topic := range topics {
				Produce(t, cl, topic, partitions, n, fmt.Sprintf("bg-%d", round))
			}
		}
	})
	return &wg
}

// Offsets returns a partition's log start and end.
func Offsets(ctx context.Context, adm *kadm.Client, topic string, p int32) (start, end int64, err error) {
	s, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, err
	}
	so, _ := s.Lookup(topic, p)
	eo, _ := e.Lookup(topic, p)
	if so.Err != nil {
		return 0, 0, so.Err
	}
	return so.Offset, eo.Offset, eo.Err
}

// ReadBatches fetches every batch of a partition from log start to the high
// watermark with raw Fetch requests, so nothing is decoded or reordered.
func ReadBatches(ctx context.Context, cl *kgo.Client, topic string, p int32) ([]RawBatch, error) {
	adm := kadm.NewClient(cl)
	start, end, err := Offsets(ctx, adm, topic, p)
	if err != nil {
		return nil, err
	}
	var out []RawBatch
	for off := start; off < end; {
		meta := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		meta.Topics = append(meta.Topics, mt)
		mresp, err := meta.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		if len(mresp.Topics) != 1 || int(p) >= len(mresp.Topics[0].Partitions) {
			return nil, fmt.Errorf("metadata for %s/%d missing", topic, p)
		}
		var leader int32 = -1
		for _, mp := range mresp.Topics[0].Partitions {
			if mp.Partition == p {
				leader = mp.Leader
			}
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 32 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.TopicID = mresp.Topics[0].TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 16 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetch %s/%d: malformed response", topic, p)
		}
		fp := fr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, off, err)
		}
		before := off
		_, err = batch.Split(fp.RecordBatches, func(h batch.Header, b []byte) error {
			if h.NextOffset() <= off {
				return nil
			}
			if err := batch.VerifyCRC(b); err != nil {
				return err
			}
			out = append(out, RawBatch{Header: h, Payload: slices.Clone(b[batch.HeaderSize:])})
			off = h.NextOffset()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, before, err)
		}
		if off == before {
			return nil, fmt.Errorf("fetch %s/%d at %d: no progress below end %d", topic, p, off, end)
		}
	}
	return out, nil
}

// CompareBatches checks that a destination partition holds the source's
// batches: same base offsets and offset ranges, same attributes (the
// LogAppendTime bit aside, which kmirror clears), same record counts and
// timestamps, same payload bytes; transaction markers match by offset and
// commit/abort type. It returns the number of batches compared.
func CompareBatches(ctx context.Context, src, dst *kgo.Client, topic string, p int32) (int, error) {
	sb, err := ReadBatches(ctx, src, topic, p)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	db, err := ReadBatches(ctx, dst, topic, p)
	if err != nil {
		return 0, fmt.Errorf("destination: %w", err)
	}
	if len(db) > len(sb) {
		if err := fenceMarkers(db, db[len(sb):]); err != nil {
			return 0, fmt.Errorf("%s/%d: source has %d batches, destination %d: %w", topic, p, len(sb), len(db), err)
		}
		db = db[:len(sb)]
	}
	if len(sb) != len(db) {
		return 0, fmt.Errorf("%s/%d: source has %d batches, destination %d", topic, p, len(sb), len(db))
	}
	for i := range sb {
		s, d := sb[i].Header, db[i].Header
		switch {
		case s.BaseOffset != d.BaseOffset || s.LastOffsetDelta != d.LastOffsetDelta:
			return i, fmt.Errorf("%s/%d batch %d: source offsets %d..%d, destination %d..%d", topic, p, i, s.BaseOffset, s.LastOffset(), d.BaseOffset, d.LastOffset())
		case s.Attributes&^batch.AttrLogAppendTime != d.Attributes:
			return i, fmt.Errorf("%s/%d batch at %d: source attributes %#x, destination %#x", topic, p, s.BaseOffset, s.Attributes, d.Attributes)
		case s.RecordCount != d.RecordCount:
			return i, fmt.Errorf("%s/%d batch at %d: source %d records, destination %d", topic, p, s.BaseOffset, s.RecordCount, d.RecordCount)
		case s.IsControl():
			// A marker is written by each cluster's transaction coordinator,
			// with its own timestamp and coordinator epoch: what must match
			// is the offset and the commit/abort type in the record key.
			sk, err1 := controlKey(sb[i].Payload)
			dk, err2 := controlKey(db[i].Payload)
			if err := errors.Join(err1, err2); err != nil {
				return i, fmt.Errorf("%s/%d control batch at %d: %w", topic, p, s.BaseOffset, err)
			}
			if !bytes.Equal(sk, dk) {
				return i, fmt.Errorf("%s/%d control batch at %d: source key %x, destination key %x", topic, p, s.BaseOffset, sk, dk)
			}
		case s.BaseTimestamp != d.BaseTimestamp || s.MaxTimestamp != d.MaxTimestamp:
			return i, fmt.Errorf("%s/%d batch at %d: timestamps differ", topic, p, s.BaseOffset)
		case !bytes.Equal(sb[i].Payload, db[i].Payload):
			return i, fmt.Errorf("%s/%d batch at %d: payload bytes differ", topic, p, s.BaseOffset)
		}
	}
	return len(sb), nil
}

// fenceMarkers checks that the destination's batches past the source's
// last, extra, are the markers of a stop's fence: abort markers of empty
// transactions, by a producer that wrote no transactional data in all of
// the destination's batches, all. kmirror writes one on each partition it
// stops, with its writer identity, so that a broker which learns producer
// epochs at the first write fences older writers. A stray marker of a
// mirrored transaction (data of its producer before it) is no fence.
func fenceMarkers(all, extra []RawBatch) error {
	txnData := map[int64]bool{}
	for _, b := range all {
		if b.Header.IsTransactional() && !b.Header.IsControl() {
			txnData[b.Header.ProducerID] = true
		}
	}
	for _, b := range extra {
		if !b.Header.IsControl() {
			return fmt.Errorf("a data batch at %d the source does not have", b.Header.BaseOffset)
		}
		key, err := controlKey(b.Payload)
		if err != nil {
			return fmt.Errorf("control batch at %d: %w", b.Header.BaseOffset, err)
		}
		if len(key) < 4 || key[3] != 0 {
			return fmt.Errorf("a commit marker at %d the source does not have", b.Header.BaseOffset)
		}
		if txnData[b.Header.ProducerID] {
			return fmt.Errorf("an abort marker at %d of producer %d, which wrote transactional data here: no stop's fence", b.Header.BaseOffset, b.Header.ProducerID)
		}
	}
	return nil
}

// controlKey returns the key (version, commit/abort type) of a control
// batch's one record.
func controlKey(payload []byte) ([]byte, error) {
	var rec kmsg.Record
	if err := rec.ReadFrom(payload); err != nil {
		return nil, err
	}
	return rec.Key, nil
}

// Record is what a consumer sees of one record.
type Record struct {
	Offset    int64
	Key       string
	Value     string
	Headers   string
	Timestamp int64
}

// Consume reads a partition from its log start to its end with a franz-go
// consumer (READ_UNCOMMITTED). It reads as many records as the raw batches
// hold, so trailing transaction markers (which carry no record a consumer
// sees) do not leave it waiting.
func Consume(ctx context.Context, cl *kgo.Client, topic string, p int32) ([]Record, error) {
	return consume(ctx, cl, topic, p, false)
}

// ConsumeCommitted reads what a READ_COMMITTED consumer sees of a
// partition: non-transactional records and those of committed transactions,
// as many as the raw batches say there are.
func ConsumeCommitted(ctx context.Context, cl *kgo.Client, topic string, p int32) ([]Record, error) {
	return consume(ctx, cl, topic, p, true)
}

func consume(ctx context.Context, cl *kgo.Client, topic string, p int32, committed bool) ([]Record, error) {
	bs, err := ReadBatches(ctx, cl, topic, p)
	if err != nil {
		return nil, err
	}
	start, _, err := Offsets(ctx, kadm.NewClient(cl), topic, p)
	if err != nil {
		return nil, err
	}
	want, pending := 0, map[int64]int{}
	for _, b := range bs {
		h := b.Header
		n := int(h.RecordCount)
		if h.BaseOffset < start { // the log start lies inside this batch
			n = int(h.NextOffset() - start)
		}
		switch {
		case h.IsControl():
			if committed {
				key, err := controlKey(b.Payload)
				if err != nil {
					return nil, fmt.Errorf("%s/%d control batch at %d: %w", topic, p, h.BaseOffset, err)
				}
				if len(key) < 4 {
					return nil, fmt.Errorf("%s/%d control batch at %d: key of %d bytes", topic, p, h.BaseOffset, len(key))
				}
				if key[3] == 1 { // the control type in the key: 1 commits
					want += pending[h.ProducerID]
				}
				delete(pending, h.ProducerID)
			}
		case h.IsTransactional() && committed:
			pending[h.ProducerID] += n
		default:
			want += n
		}
	}
	if want == 0 {
		return nil, nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds(cl)...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(start)}})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var out []Record
	for len(out) < want {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %s/%d: %d of %d records: %w", topic, p, len(out), want, err)
		}
		if err := fs.Err(); err != nil {
			return out, err
		}
		for _, r := range fs.Records() {
			var hs strings.Builder
			for _, h := range r.Headers {
				fmt.Fprintf(&hs, "%s=%s;", h.Key, h.Value)
			}
			out = append(out, Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Headers: hs.String(), Timestamp: r.Timestamp.UnixMilli()})
		}
	}
	return out, nil
}

func seeds(cl *kgo.Client) []string {
	var out []string
	for _, s := range cl.OptValues(kgo.SeedBrokers) {
		out = append(out, s.([]string)...)
	}
	return out
}

// Wait polls cond until it reports done or the deadline passes; the
// condition's last message is the failure.
func Wait(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %s", timeout, msg)
		}
		<-tick.C
	}
}

// Ends returns the log end offset of each partition of topic, indexed by
// partition.
func Ends(ctx context.Context, cl *kgo.Client, topic string) ([]int64, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, err
	}
	var out []int64
	ends.Each(func(o kadm.ListedOffset) {
		for int(o.Partition) >= len(out) {
			out = append(out, -1)
		}
		out[o.Partition] = o.Offset
	})
	return out, nil
}
