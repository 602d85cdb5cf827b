package sandbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Election is an unclean leader election simulated on A.
type Election struct {
	Topic     string
	Partition int32
	// OldEpoch is the leader epoch that ended, at EndOffset: the new
	// leader's log held the offsets below it and none from it on.
	OldEpoch  int32
	EndOffset int64
	OldLeader int32
	NewLeader int32
	At        time.Time
}

// UncleanElection simulates an unclean leader election of topic/p on A: its
// leadership moves to another broker under a new epoch, and A answers as a
// broker whose new leader's log ended at end, as Kafka does after electing an
// out-of-sync replica: OffsetForLeaderEpoch for the old epoch ends at end,
// and a fetch beyond end from the old epoch is told where it diverged
// (KIP-320). The other partitions of such a fetch are answered "not leader"
// once, as during any leadership change.
//
// kfake cannot truncate a log: A keeps the records from end on, and A's
// producers go on writing after them, not over them. What the election
// lost is therefore the set of records A had acknowledged at offsets from
// end on when it happened; the ledger names them. The answers stop when A
// goes down (a restarted A is a new cluster without them).
func (s *Sandbox) UncleanElection(topic string, p int32, end int64) (Election, error) {
	s.mu.Lock()
	a, up := s.A, s.aUp
	s.mu.Unlock()
	if !up {
		return Election{}, errors.New("unclean election: cluster A is down")
	}
	info, ti := a.PartitionInfo(topic, p), a.TopicInfo(topic)
	if info == nil || ti == nil {
		return Election{}, fmt.Errorf("unclean election: %s/%d not on A", topic, p)
	}
	if end < info.LogStartOffset || end > info.HighWatermark {
		return Election{}, fmt.Errorf("unclean election: %s/%d holds offsets %d..%d, not %d", topic, p, info.LogStartOffset, info.HighWatermark, end)
	}
	// Nodes are numbered from 0 (kfake.NumBrokers(3) in Start).
	el := Election{Topic: topic, Partition: p, OldEpoch: info.Epoch, EndOffset: end, OldLeader: info.Leader, NewLeader: (info.Leader + 1) % 3}
	a.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetForLeaderEpochRequest)
		if len(r.Topics) != 1 || r.Topics[0].Topic != topic || len(r.Topics[0].Partitions) != 1 ||
			r.Topics[0].Partitions[0].Partition != p || r.Topics[0].Partitions[0].LeaderEpoch > el.OldEpoch {
			return nil, nil, false
		}
		a.KeepControl()
		resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.EndOffset = p, el.OldEpoch, end
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	a.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		hit := false
		for _, t := range fr.Topics {
			for _, fp := range t.Partitions {
				if (t.Topic == topic || t.TopicID == ti.TopicID) && fp.Partition == p &&
					fp.FetchOffset > end && fp.LastFetchedEpoch <= el.OldEpoch {
					hit = true
				}
			}
		}
		if !hit {
			return nil, nil, false
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range fr.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, fp := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = fp.Partition
				if (t.Topic == topic || t.TopicID == ti.TopicID) && fp.Partition == p {
					rp.HighWatermark, rp.LastStableOffset = end, end
					rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = el.OldEpoch, end
				} else {
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
					rp.HighWatermark, rp.LastStableOffset = -1, -1
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	if err := a.MoveTopicPartition(topic, p, el.NewLeader); err != nil {
		return Election{}, fmt.Errorf("unclean election: move the leader of %s/%d: %w", topic, p, err)
	}
	el.At = time.Now()
	return el, nil
}
