package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
)

// locateFetches bounds the marker search: it is a diagnostic for an error
// that already fails the partition, not worth reading a whole log for.
const locateFetches = 16

// errStop ends a batch walk early.
var errStop = errors.New("stop")

// locateMarker searches the destination partition from offset from for the
// first control batch of producer pid and returns its offset, or -1 when it
// is not found or the search fails. It reads raw batches with Fetch from the
// partition leader (kgo does not route a Fetch to the leader by itself).
func (m *Mapper) locateMarker(ctx context.Context, pid, from int64) int64 {
	at, _, err := m.searchMarker(ctx, pid, from)
	if err != nil {
		m.log.Warn("could not locate the coordinator's abort marker", attrProducerID, pid, attrFromOffset, from, attrErr, err)
		return -1
	}
	return at
}

// Committed reports whether the destination holds a commit marker of
// producer pid at or after offset from: a transaction kmirror meant to
// abort may have been committed already by an EndTxn whose answer never
// came back.
func (m *Mapper) Committed(ctx context.Context, pid, from int64) (bool, error) {
	at, commit, err := m.searchMarker(ctx, pid, from)
	return at >= 0 && commit, err
}

// searchMarker is locateMarker's search; it also returns the marker's
// outcome (true for commit).
func (m *Mapper) searchMarker(ctx context.Context, pid, from int64) (at int64, commit bool, err error) {
	end, err := m.logEnd(ctx)
	if err != nil {
		return -1, false, err
	}
	leader, topicID, err := m.leader(ctx)
	if err != nil {
		return -1, false, err
	}
	for off, n := from, 0; off < end && n < locateFetches; n++ {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 4 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = m.cfg.Topic
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = m.cfg.Partition
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := m.cfg.Client.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return -1, false, fmt.Errorf("fetch at %d: %w", off, err)
		}
		fr, ok := resp.(*kmsg.FetchResponse)
		if !ok || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return -1, false, fmt.Errorf("fetch at %d: malformed response", off)
		}
		fp := fr.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return -1, false, fmt.Errorf("fetch at %d: %w", off, err)
		}
		found, before := int64(-1), off
		_, err = batch.Split(fp.RecordBatches, func(h batch.Header, b []byte) error {
			if h.NextOffset() <= off {
				return nil
			}
			if h.IsControl() && h.ProducerID == pid {
				found = h.BaseOffset
				commit, err = ParseControl(b)
				if err != nil {
					return err
				}
				return errStop
			}
			off = h.NextOffset()
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return -1, false, fmt.Errorf("fetch at %d: %w", before, err)
		}
		if found >= 0 {
			return found, commit, nil
		}
		if off == before {
			break // a batch larger than the fetch limit; give up
		}
	}
	return -1, false, nil
}

// leader returns the destination partition's leader and topic id from an
// uncached Metadata request.
func (m *Mapper) leader(ctx context.Context) (int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(m.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cfg.Client)
	if err != nil {
		return -1, [16]byte{}, fmt.Errorf("metadata %s: %w", m.cfg.Topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != m.cfg.Topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, [16]byte{}, fmt.Errorf("metadata %s: %w", m.cfg.Topic, err)
		}
		if m.cfg.TopicID != ([16]byte{}) && t.TopicID != m.cfg.TopicID {
			return -1, [16]byte{}, fmt.Errorf("metadata %s: topic id changed (recreated)", m.cfg.Topic)
		}
		for _, p := range t.Partitions {
			if p.Partition == m.cfg.Partition {
				return p.Leader, t.TopicID, kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return -1, [16]byte{}, fmt.Errorf("metadata %s/%d: partition missing", m.cfg.Topic, m.cfg.Partition)
}
