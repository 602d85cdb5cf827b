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

// openLedgerTxn mirrors the one-partition topic ledger through a committed
// transaction and into an open one ("inside-1"), caught up, and returns the
// source producer holding it open.
func openLedgerTxn(t *testing.T, e *env) *kgo.Client {
	t.Helper()
	e.src.CreateTopic(t, "ledger", 1, nil)
	e.startMirror("ledger")
	tp := txnProducer(t, e.src, "ledger-app")
	inTxn(t, tp, "ledger", []int32{0}, 5, "before", true)
	if err := tp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	writeTxn(t, tp, "ledger", []int32{0}, 5, "inside-1")
	e.waitCaughtUp("ledger")
	return tp
}

// txnProducer is a real franz-go transactional producer on the source.
func txnProducer(t *testing.T, c *enginetest.Cluster, id string) *kgo.Client {
	return c.Client(t, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.TransactionTimeout(60*time.Second))
}

// inTxn writes n records to each of parts in one transaction and ends it.
func inTxn(t *testing.T, cl *kgo.Client, topic string, parts []int32, n int, tag string, commit bool) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	writeTxn(t, cl, topic, parts, n, tag)
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

func writeTxn(t *testing.T, cl *kgo.Client, topic string, parts []int32, n int, tag string) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range parts {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "%s-%d", tag, i), Value: fmt.Appendf(nil, "%s value %d", tag, i)})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readCommitted reads a partition with a READ_COMMITTED consumer.
func readCommitted(t *testing.T, c *enginetest.Cluster, topic string, p int32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := enginetest.ConsumeCommitted(ctx, c.Client(t), topic, p)
	if err != nil {
		t.Fatalf("read committed %s/%d: %v", topic, p, err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, r.Value)
	}
	return out
}

// lastStable returns each partition's last stable offset.
func lastStable(t *testing.T, c *enginetest.Cluster, topic string) map[int32]int64 {
	t.Helper()
	l, err := kadm.NewClient(c.Client(t)).ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func TestTransactionsMirrorAtIdenticalOffsets(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "payments", 3, nil)
	e.startMirror("payments")
	plain := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	t1, t2 := txnProducer(t, e.src, "app-1"), txnProducer(t, e.src, "app-2")
	all := []int32{0, 1, 2}

	enginetest.Produce(t, plain, "payments", 3, 20, "plain-a")
	inTxn(t, t1, "payments", []int32{0}, 10, "t1-commit", true)
	inTxn(t, t2, "payments", []int32{1}, 10, "t2-abort", false)
	enginetest.Produce(t, plain, "payments", 3, 20, "plain-b")
	inTxn(t, t1, "payments", all, 5, "t1-all-commit", true)
	inTxn(t, t2, "payments", all, 5, "t2-all-abort", false)
	inTxn(t, t1, "payments", []int32{2}, 7, "t1-commit-2", true)
	enginetest.Produce(t, plain, "payments", 3, 10, "plain-c")
	// A transaction left open.
	if err := t2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	writeTxn(t, t2, "payments", []int32{0, 2}, 4, "t2-open")

	e.waitCaughtUp("payments")
	e.assertIdentical("payments")
	for p := range int32(3) {
		if s, d := readCommitted(t, e.src, "payments", p), readCommitted(t, e.dst, "payments", p); !slices.Equal(s, d) {
			t.Fatalf("payments/%d: READ_COMMITTED records differ:\nsource %v\ndestination %v", p, s, d)
		}
	}
	if s, d := lastStable(t, e.src, "payments"), lastStable(t, e.dst, "payments"); fmt.Sprint(s) != fmt.Sprint(d) {
		t.Fatalf("last stable offsets: source %v, destination %v", s, d)
	}
	var open int
	for _, p := range e.partitions() {
		open += p.OpenTxns
	}
	if open != 2 {
		t.Fatalf("%d open mirrored transactions in the snapshot, want 2 (partitions 0 and 2)", open)
	}

	// The stop (failover) aborts the open transaction: READ_COMMITTED
	// consumers on the destination reach its log end.
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		e.waitState("payments", p, partition.Stopped)
	}
	ends, err := enginetest.Ends(context.Background(), e.dstCl, "payments")
	if err != nil {
		t.Fatal(err)
	}
	lso := lastStable(t, e.dst, "payments")
	for p, end := range ends {
		if lso[int32(p)] != end {
			t.Fatalf("payments/%d: destination last stable offset %d, log end %d after stop", p, lso[int32(p)], end)
		}
	}
}

func TestRestartInsideMirroredTransaction(t *testing.T) {
	e := newEnv(t)
	tp := openLedgerTxn(t, e)

	e.eng.Close() // the engine dies with a mirrored transaction open
	e.startEngine()
	e.startMirror("ledger")
	writeTxn(t, tp, "ledger", []int32{0}, 5, "inside-2")
	if err := tp.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("none", true)...), "ledger", 1, 3, "after")
	e.waitCaughtUp("ledger")
	e.assertIdentical("ledger")
	if s, d := readCommitted(t, e.src, "ledger", 0), readCommitted(t, e.dst, "ledger", 0); !slices.Equal(s, d) {
		t.Fatalf("READ_COMMITTED records differ:\nsource %v\ndestination %v", s, d)
	}
}

func TestCompactedSourceGapPolicy(t *testing.T) {
	setup := func(t *testing.T) *env {
		e := newEnv(t)
		e.src.CreateTopic(t, "inventory", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		cl := e.src.Client(t, enginetest.ProducerOpts("snappy", true)...)
		for round := range 4 {
			enginetest.Produce(t, cl, "inventory", 1, 40, fmt.Sprintf("r%d", round)) // keys repeat: compaction removes older ones
		}
		e.src.Compact()
		return e
	}
	t.Run("fail", func(t *testing.T) {
		e := setup(t)
		e.startMirror("inventory")
		failed := e.waitState("inventory", 0, partition.Failed)
		if !strings.Contains(failed.Error, "gap in source log") || !strings.Contains(failed.Error, "mirror.gap.policy=fill") || failed.Retryable {
			t.Fatalf("error %q (retryable %v): want a non-retryable gap naming the policy", failed.Error, failed.Retryable)
		}
	})
	t.Run("fill", func(t *testing.T) {
		e := setup(t)
		e.startMirrorWith(func(c *engine.MirrorConfig) { c.GapFill = true }, "inventory")
		e.waitCaughtUp("inventory")
		ctx := context.Background()
		src, err := enginetest.Consume(ctx, e.srcCl, "inventory", 0)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := enginetest.Consume(ctx, e.dstCl, "inventory", 0)
		if err != nil {
			t.Fatal(err)
		}
		var real []enginetest.Record
		fillers := 0
		for _, r := range dst {
			if r.Key == "__kmirror_gap" && r.Value == "" {
				fillers++
				continue
			}
			real = append(real, r)
		}
		if !slices.Equal(real, src) || fillers == 0 {
			t.Fatalf("destination: %d records besides %d fillers; source %d records", len(real), fillers, len(src))
		}
		if len(dst) != int(dst[len(dst)-1].Offset-dst[0].Offset+1) {
			t.Fatalf("destination offsets are not contiguous")
		}
		if p := e.partitions()[0]; p.FillerBatches == 0 {
			t.Fatalf("no filler batch counted in the snapshot")
		}
	})
}
