package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// fastCheckpoints writes the last mirrored offset every 200 ms.
var fastCheckpoints = map[string]string{props.KeyCheckpointInterval: "200"}

// produceOneByOne writes records to partition p one batch each, with the
// given timestamps' base, uncompressed, so that two clusters given the same
// records hold byte-identical batches.
func produceOneByOne(t *testing.T, cl *kgo.Client, topic string, p int32, values []string, ts time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, v := range values {
		r := &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v), Timestamp: ts.Add(time.Duration(i) * time.Millisecond)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
	}
}

// oneByOneClient is a producer that writes each record as its own batch
// to the partition the record names.
func oneByOneClient(t *testing.T, c *enginetest.Cluster) *kgo.Client {
	return c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxProduceRequestsInflightPerBroker(1))
}

// waitCheckpointed waits until __mirror_state records, for every partition
// of topic, a last mirrored offset one below the destination log end while
// the partition is MIRRORING: the checkpoint, not a transition, wrote it.
func waitCheckpointed(t *testing.T, e *env, adm *engine.Admin, topic string, partitions int) {
	t.Helper()
	ctx := context.Background()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ends, err := enginetest.Ends(ctx, e.dstCl, topic)
		if err != nil {
			return false, err.Error()
		}
		cat, err := adm.Catalog(ctx)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		ok := 0
		for _, r := range cat.PartitionsOf("a-to-b", topic) {
			got = append(got, fmt.Sprintf("%d:%s lme %d end %d", r.Partition, r.State, r.LastOffset, ends[r.Partition]))
			if r.State == partition.Mirroring && r.LastOffset == ends[r.Partition]-1 {
				ok++
			}
		}
		return ok == partitions, fmt.Sprintf("records %v", got)
	})
}

// mirroringEvents returns the transitions into MIRRORING of topic/p after
// since.
func mirroringEvents(l *eventLog, topic string, p int32, since time.Time) []engine.Event {
	var out []engine.Event
	for _, ev := range l.matching(engine.LevelInfo, "→ MIRRORING") {
		if ev.Topic == topic && ev.Partition == p && !ev.Time.Before(since) {
			out = append(out, ev)
		}
	}
	return out
}

// TestForeignWriteBeforeAlignment writes one record straight to a
// destination partition while it is PAUSED, or while no instance runs,
// followed by exactly one new source record, so the destination's log end
// lines up with the source's. Alignment compares what lies above the last
// mirrored offset with the source: the partition is FAILED, naming the
// offset and the producer id of the foreign batch, and never MIRRORING;
// the other partition mirrors on. Sources writing large batches and
// one-record batches alike.
func TestForeignWriteBeforeAlignment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restart  bool // no instance runs during the write (else: PAUSED)
		oneByOne bool // the source writes one record per batch
	}{
		{name: "paused"},
		{name: "paused/one-record-batches", oneByOne: true},
		{name: "no-instance", restart: true},
		{name: "no-instance/one-record-batches", restart: true, oneByOne: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := enginetest.Pair(t)
			e, adm := newStateEnvWith(t, src, dst, "orders", 2, fastCheckpoints)
			ctx := context.Background()
			srcProd := oneByOneClient(t, e.src)
			if tc.oneByOne {
				for p := range int32(2) {
					produceOneByOne(t, srcProd, "orders", p, []string{"a", "b", "c", "d", "e"}, time.Now())
				}
			} else {
				enginetest.Produce(t, e.srcCl, "orders", 2, 40, "before")
			}
			e.waitCaughtUp("orders")
			ends, err := enginetest.Ends(ctx, e.dstCl, "orders")
			if err != nil {
				t.Fatal(err)
			}
			if tc.restart {
				waitCheckpointed(t, e, adm, "orders", 2)
				e.eng.Close()
			} else {
				if _, err := adm.Control(ctx, engine.CmdPause, "a-to-b", nil, false); err != nil {
					t.Fatal(err)
				}
				e.waitAll(2, partition.Paused)
			}
			// The foreign record, then as many new source records.
			foreign := oneByOneClient(t, e.dst)
			if err := foreign.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("intruder")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			produceOneByOne(t, srcProd, "orders", 0, []string{"after"}, time.Now())
			produceOneByOne(t, srcProd, "orders", 1, []string{"after"}, time.Now())
			var log *eventLog
			since := time.Now()
			if tc.restart {
				e.eng = e.joinInstance("two")
				log = collectEvents(t, e.eng)
			} else {
				log = collectEvents(t, e.eng)
				if _, err := adm.Control(ctx, engine.CmdResume, "a-to-b", nil, false); err != nil {
					t.Fatal(err)
				}
			}
			p0 := e.waitState("orders", 0, partition.Failed)
			want := fmt.Sprintf("1 record after offset %d that is not from the source (first at offset %d, producer id ", ends[0]-1, ends[0])
			if !strings.Contains(p0.Error, want) || p0.Retryable {
				t.Fatalf("orders/0 FAILED with %q (retryable %v), want it to name %q", p0.Error, p0.Retryable, want)
			}
			e.waitState("orders", 1, partition.Mirroring)
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				de, err := enginetest.Ends(ctx, e.dstCl, "orders")
				return err == nil && de[1] == ends[1]+1, fmt.Sprintf("orders/1 destination ends %v, want %d", de, ends[1]+1)
			})
			if evs := mirroringEvents(log, "orders", 0, since); len(evs) > 0 {
				t.Fatalf("orders/0 entered MIRRORING after the foreign write: %v", evs)
			}
			// Nothing was appended after the foreign record.
			de, err := enginetest.Ends(ctx, e.dstCl, "orders")
			if err != nil {
				t.Fatal(err)
			}
			if de[0] != ends[0]+1 {
				t.Fatalf("orders/0 destination end %d, want %d (the foreign record only)", de[0], ends[0]+1)
			}
			waitPersisted(t, adm, "orders", 1, partition.Failed, e.eng.Snapshot().Instance)
		})
	}
}

// TestPreexistingDestinationTopic starts a mirror into a destination topic
// that already holds records: partition 0 holds exactly the source's
// batches and is adopted (an event says so) and mirrored on; partition 1
// holds a different value at offset 5 and is FAILED naming that offset and
// the remedies. Nothing is deleted from it.
func TestPreexistingDestinationTopic(t *testing.T) {
	src, dst := enginetest.Pair(t)
	ctx := context.Background()
	src.CreateTopic(t, "adopt", 2, nil)
	dst.CreateTopic(t, "adopt", 2, nil)
	ts := time.Now().Add(-time.Hour)
	values := []string{"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"}
	other := append([]string(nil), values...)
	other[5] = "not-v5"
	sp, dp := oneByOneClient(t, src), oneByOneClient(t, dst)
	for p := range int32(2) {
		produceOneByOne(t, sp, "adopt", p, values, ts)
	}
	produceOneByOne(t, dp, "adopt", 0, values, ts)
	produceOneByOne(t, dp, "adopt", 1, other, ts)

	e := envOn(t, src, dst)
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	if _, err := adm.CreateMirror(ctx, "a-to-b", props.FromMap(map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ",")}), false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics("adopt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	e.eng = e.joinInstance("one")
	log := collectEvents(t, e.eng)

	p1 := e.waitState("adopt", 1, partition.Failed)
	for _, want := range []string{"already holds records that differ from the source, first at offset 5", "--recover --rebuild", "delete the destination topic"} {
		if !strings.Contains(p1.Error, want) {
			t.Fatalf("adopt/1 FAILED with %q, want it to say %q", p1.Error, want)
		}
	}
	e.waitState("adopt", 0, partition.Mirroring)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return len(log.matching(engine.LevelInfo, "adopted the destination's offsets 0..9")) == 1, "no adoption event"
	})
	produceOneByOne(t, sp, "adopt", 0, []string{"new"}, time.Now())
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		n, err := enginetest.CompareBatches(ctx, e.srcCl, e.dstCl, "adopt", 0)
		return err == nil && n == 11, fmt.Sprintf("adopt/0: %d batches identical (%v), want 11", n, err)
	})
	recs, err := enginetest.Consume(ctx, e.dstCl, "adopt", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 || recs[0].Offset != 0 || recs[5].Value != "not-v5" {
		t.Fatalf("adopt/1 holds %d records (first %+v), want its own 10 untouched", len(recs), recs)
	}
}

// TestCheckpointWhileMirroring: a MIRRORING partition's last mirrored
// offset reaches __mirror_state within the checkpoint interval, without a
// state transition, and follows new records; describe with no instance
// running shows it.
func TestCheckpointWhileMirroring(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "orders", 3, fastCheckpoints)
	enginetest.Produce(t, e.srcCl, "orders", 3, 30, "one")
	e.waitCaughtUp("orders")
	waitCheckpointed(t, e, adm, "orders", 3)
	enginetest.Produce(t, e.srcCl, "orders", 3, 30, "two")
	e.waitCaughtUp("orders")
	waitCheckpointed(t, e, adm, "orders", 3)

	e.eng.Close()
	rows, err := adm.Describe(context.Background(), "a-to-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("describe: %d rows, want 3", len(rows))
	}
	for _, r := range rows {
		if r.LastMirrorOffset != r.DestinationOffset-1 || r.DestinationOffset <= 0 {
			t.Fatalf("describe with no instance: %s/%d lastMirrorOffset %d, destinationOffset %d", r.Topic, r.Partition, r.LastMirrorOffset, r.DestinationOffset)
		}
	}
}

// TestSourceUncleanElectionWhileDown: while no instance runs, the source
// loses mirrored records in an unclean leader election (its epoch now ends
// at offset 30 where 50 were mirrored; injected, as kfake cannot truncate a
// log). The next instance's alignment asks the source about the
// checkpointed epoch and fails the partition (by default), naming the
// divergence.
func TestSourceUncleanElectionWhileDown(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "ule", 1, fastCheckpoints)
	enginetest.Produce(t, e.srcCl, "ule", 1, 50, "a")
	e.waitCaughtUp("ule")
	waitCheckpointed(t, e, adm, "ule", 1)
	e.eng.Close()

	e.src.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		return epochAnswer(req, func(_ string, p kmsg.OffsetForLeaderEpochRequestTopicPartition) (int32, int64) {
			return p.LeaderEpoch, 30
		}), nil, true
	})
	e.eng = e.joinInstance("two")
	p := e.waitState("ule", 0, partition.Failed)
	if !strings.Contains(p.Error, "source unclean leader election") || !strings.Contains(p.Error, "ends at offset 30") || p.Retryable {
		t.Fatalf("ule/0 FAILED with %q (retryable %v), want the unclean election named", p.Error, p.Retryable)
	}
	cat, err := adm.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rec := cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "ule", Partition: 0}]; rec.LastOffset != 49 {
		t.Fatalf("persisted last mirrored offset %d, want 49", rec.LastOffset)
	}
}
