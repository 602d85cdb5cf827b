package engine_test

import (
	"context"
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

// deletesTopic reports whether a DeleteTopics request names topic.
func deletesTopic(req kmsg.Request, topic string) bool {
	for _, dt := range req.(*kmsg.DeleteTopicsRequest).Topics {
		if dt.Topic != nil && *dt.Topic == topic {
			return true
		}
	}
	for _, n := range req.(*kmsg.DeleteTopicsRequest).TopicNames {
		if n == topic {
			return true
		}
	}
	return false
}

// uncleanEnds makes the source answer OffsetForLeaderEpoch for epoch 0 of
// topic as a log truncated by unclean elections at ends[p] would, until
// the destination topic is deleted (after that the mirror copies kfake's
// untruncated log again).
func uncleanEnds(e *env, topic string, ends map[int32]int64) (deleted *atomic.Bool) {
	deleted = new(atomic.Bool)
	e.dst.ControlKey(int16(kmsg.DeleteTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		if deletesTopic(req, topic) {
			deleted.Store(true)
		}
		return nil, nil, false
	})
	e.src.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		if deleted.Load() {
			return nil, nil, false
		}
		return epochAnswer(req, func(t string, p kmsg.OffsetForLeaderEpochRequestTopicPartition) (int32, int64) {
			if end, ok := ends[p.Partition]; ok && t == topic {
				return 0, end
			}
			return 0, 50
		}), nil, true
	})
	return deleted
}

// epochAnswer is the OffsetForLeaderEpoch response to req that answers
// each partition asked with the leader epoch and end offset end gives.
func epochAnswer(req kmsg.Request, end func(topic string, p kmsg.OffsetForLeaderEpochRequestTopicPartition) (epoch int32, offset int64)) kmsg.Response {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset = end(t.Topic, p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// quarantineOf waits for the quarantine topic of topic and returns its name.
func quarantineOf(t *testing.T, e *env, topic string) string {
	t.Helper()
	var q string
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		topics, err := kadm.NewClient(e.dstCl).ListTopics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, n := range topics.Names() {
			if strings.HasPrefix(n, topic+".kmirror-quarantine-") {
				q = n
			}
		}
		return q != "", e.describe()
	})
	return q
}

// TestRebuildQuarantinesEveryUncleanPartition: unclean elections on three
// partitions of a topic (each truncated at another offset) are all
// quarantined, each exactly from its own divergence point, whichever
// partition asked for the rebuild; the quarantine keeps its records for
// ever and names the mirror.
func TestRebuildQuarantinesEveryUncleanPartition(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "ule3", 3, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "ule3", 3, 25, "a")
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "ule3", 3, 25, "b")
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.UncleanRecovery = true }, "ule3")
	e.waitCaughtUp("ule3")
	ctx := context.Background()
	before := map[int32][]enginetest.Record{}
	for p := range int32(3) {
		recs, err := enginetest.Consume(ctx, e.dstCl, "ule3", p)
		if err != nil || len(recs) != 50 {
			t.Fatalf("destination ule3/%d: %d records, %v", p, len(recs), err)
		}
		before[p] = recs
	}
	ends := map[int32]int64{0: 30, 1: 40, 2: 10}
	uncleanEnds(e, "ule3", ends)
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		e.waitState("ule3", p, partition.Paused)
	}
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	q := quarantineOf(t, e, "ule3")
	e.waitCaughtUp("ule3")
	e.assertIdentical("ule3")
	if !strings.HasSuffix(q, "-a-to-b") {
		t.Errorf("quarantine %s does not name the mirror", q)
	}
	if v, set := topicConfig(t, e.dstCl, q, "retention.ms"); v != "-1" || !set {
		t.Errorf("quarantine retention.ms = %q (set %v), want -1", v, set)
	}
	for p := range int32(3) {
		got, err := enginetest.Consume(ctx, e.dstCl, q, p)
		if err != nil {
			t.Fatal(err)
		}
		want := before[p][ends[p]:]
		if len(got) != len(want) {
			t.Errorf("quarantine partition %d holds %d records, want the %d from offset %d", p, len(got), len(want), ends[p])
			continue
		}
		for i := range got {
			if got[i].Key != want[i].Key || got[i].Value != want[i].Value || got[i].Timestamp != want[i].Timestamp {
				t.Errorf("quarantine %d/%d is %+v, want destination ule3/%d offset %d %+v", p, i, got[i], p, want[i].Offset, want[i])
				break
			}
		}
	}
}

// TestRebuildWithSourceUnreachableDeletesNothing: a rebuild whose source
// does not answer what the recreate needs (its topic configs) fails before
// anything is deleted: the destination keeps its topic and its records,
// and once the source answers again the rebuild completes.
func TestRebuildWithSourceUnreachableDeletesNothing(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "ule", 1, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "ule", 1, 50, "a")
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.UncleanRecovery = true }, "ule")
	e.waitCaughtUp("ule")
	dstID := topicID(t, e.dst, "ule")
	var refused atomic.Int32
	var down atomic.Bool
	down.Store(true)
	e.src.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		return nil, context.DeadlineExceeded, true // the connection is dropped
	})
	deleted := uncleanEnds(e, "ule", map[int32]int64{0: 30})
	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitState("ule", 0, partition.Paused)
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, e.eng, func(ev engine.Event) bool {
		return ev.Topic == "ule" && strings.Contains(ev.Message, "nothing deleted")
	})
	if deleted.Load() || topicID(t, e.dst, "ule") != dstID {
		t.Fatal("the destination topic was deleted while the source did not answer")
	}
	if ends, err := enginetest.Ends(ctx, e.dstCl, "ule"); err != nil || ends[0] != 50 {
		t.Fatalf("destination ends %v (%v), want [50]", ends, err)
	}
	down.Store(false)
	q := quarantineOf(t, e, "ule")
	e.waitCaughtUp("ule")
	e.assertIdentical("ule")
	if recs, err := enginetest.Consume(ctx, e.dstCl, q, 0); err != nil || len(recs) != 20 {
		t.Fatalf("quarantine %s holds %d records (%v), want 20", q, len(recs), err)
	}
}
