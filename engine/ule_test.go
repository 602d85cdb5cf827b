package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestSourceUncleanElection: the source answers OffsetForLeaderEpoch as a
// broker does after an unclean leader election truncated it: epoch 0 ends at
// offset 30 though 50 records of that epoch were mirrored. By default the
// partition is FAILED, non-retryable, naming the divergence offset; with
// mirror.unclean.leader.election.enable the destination-only records are
// quarantined and the topic is mirrored again, identical to the source.
// (kfake cannot truncate a live log, so the answer is injected.)
func TestSourceUncleanElection(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("recovery=%v", enabled), func(t *testing.T) {
			e := newEnv(t)
			e.src.CreateTopic(t, "ule", 1, nil)
			enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "ule", 1, 25, "a")
			enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "ule", 1, 25, "b")
			e.startMirrorWith(func(c *engine.MirrorConfig) { c.UncleanRecovery = enabled }, "ule")
			e.waitCaughtUp("ule")

			// The source answers as a truncated log would until the rebuild
			// deleted the destination topic: after that, mirroring again
			// copies kfake's untruncated log, which the injected answer no
			// longer describes. (Answering a fixed number of requests
			// raced with realignments the engine may make on its own.)
			var rebuilt atomic.Bool
			e.dst.ControlKey(int16(kmsg.DeleteTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
				e.dst.KeepControl()
				for _, dt := range req.(*kmsg.DeleteTopicsRequest).Topics {
					if dt.Topic != nil && *dt.Topic == "ule" {
						rebuilt.Store(true)
					}
				}
				for _, n := range req.(*kmsg.DeleteTopicsRequest).TopicNames {
					if n == "ule" {
						rebuilt.Store(true)
					}
				}
				return nil, nil, false
			})
			e.src.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				e.src.KeepControl()
				if rebuilt.Load() {
					return nil, nil, false
				}
				r := req.(*kmsg.OffsetForLeaderEpochRequest)
				resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = "ule"
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.LeaderEpoch, rp.EndOffset = 0, 0, 30
				rt.Partitions = append(rt.Partitions, rp)
				resp.Topics = append(resp.Topics, rt)
				return resp, nil, true
			})
			// Realign: pause, then resume.
			ctx := context.Background()
			if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
				t.Fatal(err)
			}
			e.waitState("ule", 0, partition.Paused)
			if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
				t.Fatal(err)
			}
			if !enabled {
				p := e.waitState("ule", 0, partition.Failed)
				if !strings.Contains(p.Error, "unclean leader election") || !strings.Contains(p.Error, "ends at offset 30") || p.Retryable {
					t.Fatalf("error %q (retryable %v): want a non-retryable unclean election naming offset 30", p.Error, p.Retryable)
				}
				return
			}
			var quarantine string
			enginetest.Wait(t, 60*time.Second, func() (bool, string) {
				topics, err := kadm.NewClient(e.dstCl).ListTopics(ctx)
				if err != nil {
					return false, err.Error()
				}
				for _, n := range topics.Names() {
					if strings.HasPrefix(n, "ule.kmirror-quarantine-") {
						quarantine = n
					}
				}
				return quarantine != "", e.describe()
			})
			e.waitCaughtUp("ule")
			e.assertIdentical("ule")
			q, err := enginetest.Consume(ctx, e.dstCl, quarantine, 0)
			if err != nil || len(q) != 20 || q[0].Offset != 0 {
				t.Fatalf("quarantine holds %d records (%v), want the 20 records from offset 30", len(q), err)
			}
		})
	}
}

// TestFetchDivergingEpoch: a source that supports it answers a fetch whose
// LastFetchedEpoch it no longer has with DivergingEpoch (kfake never does,
// so the answer is injected). The partition fails as an unclean election,
// naming where the source's log left the mirrored one.
func TestFetchDivergingEpoch(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "div", 1, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("lz4", true)...), "div", 1, 50, "a")
	e.startMirror("div")
	e.waitCaughtUp("div")
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].FetchOffset != 50 || fr.Topics[0].Partitions[0].LastFetchedEpoch != 0 {
			return nil, nil, false
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = fr.Topics[0].Topic, fr.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset = 60, 60
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 0, 30
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	p := e.waitState("div", 0, partition.Failed)
	if !strings.Contains(p.Error, "unclean leader election") || !strings.Contains(p.Error, "ends at offset 30") || p.Retryable {
		t.Fatalf("error %q (retryable %v): want a non-retryable unclean election at offset 30", p.Error, p.Retryable)
	}
}
