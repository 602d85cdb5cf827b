package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// What a rebuild keeps. The rule (docs/design.md, "What a rebuild keeps"):
// everything the destination holds that the rebuilt topic will not, on
// every partition, is copied and count-checked before anything is
// deleted: the destination-only records (from each partition's divergence
// point, found by verification, never from end offsets) into the
// quarantine, and what lies below them (what the source no longer has,
// and the mirrored records the rebuilt topic gets again) into the
// retained topic. The rebuilt topic keeps the destination's own configs
// and replication factor.

// writeForeign writes one record straight to a destination partition, as
// a client that ignores the mirror would.
func writeForeign(t *testing.T, e *env, topic string, p int32, value string) {
	t.Helper()
	foreign := e.dst.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := foreign.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Key: []byte("k"), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("foreign write to %s/%d: %v", topic, p, err)
	}
}

// keptTopic waits for the rebuild's topic of topic with the given infix
// (".kmirror-quarantine-", ".kmirror-retained-") and returns its name.
func keptTopic(t *testing.T, e *env, topic, infix string) string {
	t.Helper()
	var q string
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		topics, err := kadm.NewClient(e.dstCl).ListTopics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, n := range topics.Names() {
			if strings.HasPrefix(n, topic+infix) {
				q = n
			}
		}
		return q != "", "no " + topic + infix + "* topic: " + e.describe()
	})
	return q
}

// values returns the records' values.
func values(recs []enginetest.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// failWithForeignWrites pauses topic, writes one foreign record to each
// of its partitions on the destination, moves the source past the
// destination's end, and resumes: every partition FAILED, not retryable.
func failWithForeignWrites(t *testing.T, e *env, topic string, parts int32) {
	t.Helper()
	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b", Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		e.waitState(topic, p, partition.Paused)
	}
	for p := range parts {
		writeForeign(t, e, topic, p, fmt.Sprintf("foreign-%d", p))
	}
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), topic, parts, 10, "later")
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b", Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		if ps := e.waitState(topic, p, partition.Failed); ps.Retryable {
			t.Fatalf("%s/%d FAILED as retryable: %s", topic, p, ps.Error)
		}
	}
}

// TestRebuildQuarantinesForeignWritesOnEveryPartition: two partitions
// each get a record written straight to the destination while paused, the
// source moves past the destination's end, both FAIL, and one rebuild
// quarantines both records: each partition's divergence point is found by
// verification, also on the partitions that did not ask for the rebuild.
// Before, only the asking partition got its divergence point; the other's
// range was [source end, destination end), empty once the source had moved
// on, and its foreign record was gone from the destination and from the
// quarantine.
func TestRebuildQuarantinesForeignWritesOnEveryPartition(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "fw", 2, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "fw", 2, 10, "a")
	e.startMirror("fw")
	e.waitCaughtUp("fw")
	failWithForeignWrites(t, e, "fw", 2)

	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdRecover, Mirror: "a-to-b", Topics: []string{"fw"}, Rebuild: true}); err != nil {
		t.Fatal(err)
	}
	q := keptTopic(t, e, "fw", ".kmirror-quarantine-")
	e.waitCaughtUp("fw")
	e.assertIdentical("fw")
	for p := range int32(2) {
		recs, err := enginetest.Consume(context.Background(), e.dstCl, q, p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := values(recs), []string{fmt.Sprintf("foreign-%d", p)}; !slices.Equal(got, want) {
			t.Errorf("quarantine %s/%d holds %q, want %q (the partition's destination-only record)", q, p, got, want)
		}
	}
}

// TestRebuildKeepsWhatTheSourceNoLongerHas: the source deleted offsets
// the destination still holds (DeleteRecords, as retention does), then a
// foreign write made the partition FAIL; after the rebuild the destination
// starts at the source's log start, and the records below it are in the
// retained topic, with the mirrored records above them, in order; the
// foreign record is in the quarantine. Before, the records below the
// source's log start were in neither.
func TestRebuildKeepsWhatTheSourceNoLongerHas(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "old", 1, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("lz4", true)...), "old", 1, 20, "a")
	e.startMirror("old")
	e.waitCaughtUp("old")
	ctx := context.Background()
	before, err := enginetest.Consume(ctx, e.dstCl, "old", 0)
	if err != nil || len(before) != 20 {
		t.Fatalf("destination old/0 before: %d records, %v", len(before), err)
	}
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "old", Partition: 0, At: 12})
	if resp, err := e.src.Admin(t).DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete source records below 12: %v %v", err, resp.Error())
	}
	failWithForeignWrites(t, e, "old", 1)

	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdRecover, Mirror: "a-to-b", Topics: []string{"old"}, Rebuild: true}); err != nil {
		t.Fatal(err)
	}
	q := keptTopic(t, e, "old", ".kmirror-quarantine-")
	kept := keptTopic(t, e, "old", ".kmirror-retained-")
	e.waitCaughtUp("old")
	e.assertIdentical("old")
	if start, _, err := enginetest.Offsets(ctx, kadm.NewClient(e.dstCl), "old", 0); err != nil || start != 12 {
		t.Fatalf("rebuilt destination old/0 starts at %d (%v), want the source's log start 12", start, err)
	}
	recs, err := enginetest.Consume(ctx, e.dstCl, kept, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(recs), values(before); !slices.Equal(got, want) {
		t.Errorf("retained %s/0 holds %q, want the destination's 20 records before the rebuild %q", kept, got, want)
	}
	recs, err = enginetest.Consume(ctx, e.dstCl, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(recs), []string{"foreign-0"}; !slices.Equal(got, want) {
		t.Errorf("quarantine %s/0 holds %q, want %q", q, got, want)
	}
}

// TestRebuildKeepsTheDestinationTopicsConfigs: the rebuilt topic keeps
// what the operator set on the destination topic (retention, the minimum
// in-sync replicas) and its replication factor, besides the configs
// byte-for-byte mirroring needs. Before, it was recreated with four
// configs and the cluster's default replication factor.
func TestRebuildKeepsTheDestinationTopicsConfigs(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "cfg", 1, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "cfg", 1, 10, "a")
	e.startMirror("cfg")
	e.waitCaughtUp("cfg")
	ctx := context.Background()
	adm := kadm.NewClient(e.dstCl)
	set := map[string]string{"retention.ms": "987654321", "min.insync.replicas": "2", "segment.bytes": "7340032"}
	var alter []kadm.AlterConfig
	for k, v := range set {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	if resp, err := adm.AlterTopicConfigs(ctx, alter, "cfg"); err != nil || resp[0].Err != nil {
		t.Fatalf("set destination configs: %v %v", err, resp)
	}
	rfOf := func() int {
		t.Helper()
		tds, err := adm.ListTopics(ctx, "cfg")
		if err != nil || tds["cfg"].Err != nil {
			t.Fatalf("describe destination cfg: %v %v", err, tds["cfg"].Err)
		}
		return len(tds["cfg"].Partitions[0].Replicas)
	}
	rf := rfOf()
	idBefore := topicIDOf(t, adm, "cfg")
	failWithForeignWrites(t, e, "cfg", 1)
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdRecover, Mirror: "a-to-b", Topics: []string{"cfg"}, Rebuild: true}); err != nil {
		t.Fatal(err)
	}
	keptTopic(t, e, "cfg", ".kmirror-quarantine-")
	e.waitCaughtUp("cfg")
	e.assertIdentical("cfg")
	if topicIDOf(t, adm, "cfg") == idBefore {
		t.Fatal("the destination topic was not recreated")
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			got[c.Key] = *c.Value
		}
	}
	for k, v := range set {
		if got[k] != v {
			t.Errorf("rebuilt topic %s=%q, want the destination's own %q", k, got[k], v)
		}
	}
	if got["compression.type"] != "producer" {
		t.Errorf("rebuilt topic compression.type=%q, want producer", got["compression.type"])
	}
	if n := rfOf(); n != rf {
		t.Errorf("rebuilt topic replication factor %d, want the destination's %d", n, rf)
	}
}

func topicIDOf(t *testing.T, adm *kadm.Client, topic string) kadm.TopicID {
	t.Helper()
	tds, err := adm.ListTopics(context.Background(), topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, tds[topic].Err)
	}
	return tds[topic].ID
}

// TestAlignmentKeepsWhatTheLogStartMovesPast: while no instance runs, the
// source deletes offsets (DeleteRecords, as retention does) past the
// destination's end; the next instance continues with fillers up to the
// source's log start and moves the destination's log start there, which
// would delete the records the destination held. They are copied to the
// retained topic first, count-checked. Before, records 0..9, mirrored
// before, were gone from the destination and kept nowhere (found by the
// compound-fault explorer, seed 1312).
func TestAlignmentKeepsWhatTheLogStartMovesPast(t *testing.T) {
	e, adm := newStateEnvWith(t, enginetest.NewCluster(t, "kmirror-test-source"), enginetest.NewCluster(t, "kmirror-test-destination"), "gone", 1, fastCheckpoints)
	ctx := context.Background()
	enginetest.Produce(t, e.srcCl, "gone", 1, 10, "mirrored")
	e.waitCaughtUp("gone")
	waitCheckpointed(t, e, adm, "gone", 1)
	before, err := enginetest.Consume(ctx, e.dstCl, "gone", 0)
	if err != nil || len(before) != 10 {
		t.Fatalf("destination gone/0: %d records (%v)", len(before), err)
	}
	e.eng.Close()
	enginetest.Produce(t, e.srcCl, "gone", 1, 10, "unmirrored")
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "gone", Partition: 0, At: 15})
	if resp, err := e.src.Admin(t).DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete source records below 15: %v %v", err, resp.Error())
	}
	e.eng = e.joinInstance("two")
	kept := keptTopic(t, e, "gone", ".kmirror-retained-")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		start, end, err := enginetest.Offsets(ctx, kadm.NewClient(e.dstCl), "gone", 0)
		return err == nil && start == 15 && end == 20, fmt.Sprintf("destination gone/0 offsets %d..%d (%v), want 15..20", start, end, err)
	})
	recs, err := enginetest.Consume(ctx, e.dstCl, kept, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(recs), values(before); !slices.Equal(got, want) {
		t.Errorf("retained %s/0 holds %q, want the destination's 10 records before the log start moved %q", kept, got, want)
	}
	src, err := enginetest.Consume(ctx, e.srcCl, "gone", 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := enginetest.Consume(ctx, e.dstCl, "gone", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(src, dst) {
		t.Errorf("from the source's log start on the destination reads %d records, the source %d", len(dst), len(src))
	}
}
