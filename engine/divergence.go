package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
)

// A rebuild's divergence points. Where a partition's destination stops
// being the source's copy is found by comparing the two, batch by batch,
// from the partition's checkpoint on; never from end offsets, which say
// nothing about what lies at them: a partition FAILED for a foreign write
// holds the foreign batch below the source's end once the source moved on.

// logBatch is one batch read with a raw Fetch; b holds the whole batch.
type logBatch struct {
	h batch.Header
	b []byte
}

// partitionReader reads one partition's batches in order with raw Fetch
// requests to its leader, so nothing is decoded or reordered.
type partitionReader struct {
	c      *cluster
	topic  string
	p      int32
	leader int32
	id     [16]byte
	buf    []logBatch // read ahead, in order
}

// readerMaxBytes is how much one of a comparison's fetches asks for.
const readerMaxBytes = 4 << 20

// reader reads partition p of topic from its leader as meta (an uncached
// Metadata answer, asked once for all of a topic's partitions) names it.
func (c *cluster) reader(meta clusterMeta, topic string, p int32) (*partitionReader, error) {
	tm, ok := meta.topics[topic]
	if !ok || tm.err != nil || int(p) >= len(tm.partitions) {
		return nil, topicNotFound(c.name, topic, tm.err)
	}
	pm := tm.partitions[p]
	if err := pm.err(); err != nil {
		return nil, fmt.Errorf("%s partition %s/%d: %w", c.name, topic, p, err)
	}
	return &partitionReader{c: c, topic: topic, p: p, leader: pm.leader, id: tm.id}, nil
}

// at returns the batch holding offset, or the first one after it when the
// log has a gap there; ok is false when the log holds nothing at or after
// offset (below its high watermark).
func (r *partitionReader) at(ctx context.Context, offset int64) (logBatch, bool, error) {
	for range 2 {
		if i := slices.IndexFunc(r.buf, func(b logBatch) bool { return b.h.NextOffset() > offset }); i >= 0 {
			r.buf = r.buf[i:]
			return r.buf[0], true, nil
		}
		bs, err := r.fetch(ctx, offset)
		if err != nil {
			return logBatch{}, false, err
		}
		r.buf = bs
		if len(bs) == 0 {
			return logBatch{}, false, nil
		}
	}
	return logBatch{}, false, nil
}

func (r *partitionReader) fetch(ctx context.Context, offset int64) ([]logBatch, error) {
	for size := int32(readerMaxBytes); ; size *= 2 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = size
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = r.topic, r.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = r.p, offset, size
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := r.c.cl.Broker(int(r.leader)).Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("read %s %s/%d at %d: %w", r.c.name, r.topic, r.p, offset, err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
			return nil, fmt.Errorf("read %s %s/%d at %d: %w", r.c.name, r.topic, r.p, offset, err)
		}
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("read %s %s/%d at %d: malformed fetch answer", r.c.name, r.topic, r.p, offset)
		}
		fp := fr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return nil, fmt.Errorf("read %s %s/%d at %d: %w", r.c.name, r.topic, r.p, offset, err)
		}
		var out []logBatch
		partialAt, err := batch.Split(fp.RecordBatches, func(h batch.Header, b []byte) error {
			if h.NextOffset() > offset {
				out = append(out, logBatch{h, slices.Clone(b)})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s %s/%d at %d: %w", r.c.name, r.topic, r.p, offset, err)
		}
		if len(out) > 0 || partialAt < 0 || size >= 64<<20 {
			return out, nil
		}
	}
}

// firstDifference compares the destination partition with the source from
// offset from up to the destination's end dstEnd and returns the base
// offset of the first destination batch that is not the source's copy
// (batch.Same), or that the source has no batch for; dstEnd when every
// batch from from on is identical. The source is read from its log start
// srcStart on: a batch that straddles it is still whole there.
// srcMeta and dstMeta are the clusters' metadata of the topic.
func firstDifference(ctx context.Context, src, dst *cluster, srcMeta, dstMeta clusterMeta, topic string, p int32, from, dstEnd, srcStart int64) (int64, error) {
	if from >= dstEnd {
		return dstEnd, nil
	}
	dr, err := dst.reader(dstMeta, topic, p)
	if err != nil {
		return 0, err
	}
	sr, err := src.reader(srcMeta, topic, p)
	if err != nil {
		return 0, err
	}
	for off := from; off < dstEnd; {
		d, ok, err := dr.at(ctx, off)
		if err != nil {
			return 0, err
		}
		if !ok || d.h.BaseOffset >= dstEnd {
			return dstEnd, nil
		}
		s, ok, err := sr.at(ctx, max(d.h.BaseOffset, srcStart))
		if err != nil {
			return 0, err
		}
		if !ok || s.h.BaseOffset > d.h.LastOffset() || batch.Same(s.h, s.b, d.h, d.b) != nil {
			return d.h.BaseOffset, nil
		}
		off = d.h.NextOffset()
	}
	return dstEnd, nil
}
