package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// TestNewInstanceReplaysBeforeStarting: __mirror_state holds thousands of
// checkpoint-like rewrites of a topic's partition records, each with a
// higher state epoch, and about 4 MB of them in the topic's shard, more than
// one fetch returns. A new instance is assigned the shard while its reader
// cannot fetch yet; once it can, it reads the shard in several fetches. It
// starts no partition before it has read the shard to its end: none from
// UNKNOWN, each taken over from the last record, and every state epoch
// written after is above it, so __mirror_state read back in order shows
// only growing epochs per partition. The data stays identical.
func TestNewInstanceReplaysBeforeStarting(t *testing.T) {
	const (
		topic    = "replay"
		parts    = 4
		rewrites = 1000
	)
	e, adm := newStateEnv(t, topic, parts)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, topic, parts, 100, "first")
	e.waitCaughtUp(topic)
	recs := waitPersisted(t, adm, topic, parts, partition.Mirroring, "one")
	e.eng.Close()

	// Rewrites as a checkpointing owner would make them, padded so the
	// shard takes several fetches to read.
	var last int64
	for _, r := range recs {
		last = max(last, r.StateEpoch)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var out []*kgo.Record
	for k := range rewrites {
		for p := range int32(parts) {
			r := recs[p]
			r.StateEpoch = last + 1 + int64(k)
			pad := make([]byte, 500)
			for i := range pad {
				pad[i] = byte(rng.Uint32())
			}
			r.Error = fmt.Sprintf("checkpoint %d %x", k, pad)
			if k == rewrites-1 {
				r.Error = ""
			}
			b, err := store.EncodePartition(r)
			if err != nil {
				t.Fatal(err)
			}
			key := store.PartitionKey(r.Mirror, r.Topic, r.Partition)
			out = append(out, &kgo.Record{Topic: store.Topic, Partition: key.Shard(), Key: key.Bytes(), Value: b})
		}
	}
	last += rewrites
	w := e.dst.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	if err := w.ProduceSync(context.Background(), out...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, cl, topic, parts, 100, "between-instances")

	// The new instance gets its shards before it reads a thing.
	held := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: store.Topic, Err: kerr.NotLeaderForPartition, Count: -1})
	e.eng = e.joinInstance("two")
	events := collectEvents(t, e.eng)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return len(events.matching(engine.LevelInfo, "ownership:", "assigned")) > 0, "instance two was assigned no shards"
	})
	held.Remove()

	got := waitPersisted(t, adm, topic, parts, partition.Mirroring, "two")
	for p, r := range got {
		if r.StateEpoch <= last {
			t.Errorf("%s/%d: instance two persisted state epoch %d, not above the last one recorded, %d", topic, p, r.StateEpoch, last)
		}
	}
	for _, ev := range events.matching(engine.LevelInfo, "UNKNOWN →") {
		if ev.Topic == topic {
			t.Errorf("%s/%d started from UNKNOWN although it had a record: %s", ev.Topic, ev.Partition, ev.Message)
		}
	}
	if n := len(events.matching(engine.LevelInfo, "MIRRORING → LOG_ALIGNMENT", "taken over")); n != parts {
		t.Errorf("%d partitions taken over from their MIRRORING record, want %d", n, parts)
	}
	epochsOnlyGrow(t, e.dst)

	enginetest.Produce(t, cl, topic, parts, 100, "second-instance")
	e.waitCaughtUp(topic)
	e.assertIdentical(topic)
}

// epochsOnlyGrow reads __mirror_state from its start to its end and
// requires the state epochs of every partition record key to never fall.
func epochsOnlyGrow(t *testing.T, dst *enginetest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(dst.Client(t)).ListEndOffsets(ctx, store.Topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	rd := dst.Client(t, kgo.ConsumeTopics(store.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	epochs := map[string]int64{}
	n := 0
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v; shards left %v", store.Topic, err, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
			k, v, err := store.Decode(r.Key, r.Value)
			if err != nil || k.Kind != store.KindPartition || v == nil {
				return
			}
			n++
			rec := v.(store.PartitionRecord)
			if prev, ok := epochs[k.String()]; ok && rec.StateEpoch < prev {
				t.Errorf("%s at offset %d: state epoch %d after %d (written by %s)", k, r.Offset, rec.StateEpoch, prev, rec.Owner)
			}
			epochs[k.String()] = max(epochs[k.String()], rec.StateEpoch)
		})
	}
	t.Logf("%d partition records read back, epochs only grow: %v", n, !t.Failed())
}
