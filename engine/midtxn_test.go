package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestCommandMidTransactionsLosesNothing is TestCommandMidFetchAnswerLosesNothing
// with mirrored transactions (committed and aborted) between plain
// batches: resume and recover, sent three times while the runner appends
// behind a slow destination, also cut short the drain before a marker.
// Every batch still in flight stays in the pipeline; the partition
// catches up identical, with the same committed records. Before, the
// drain cut short dropped the batches in flight, and the marker's check
// then took the destination for written to (FAILED "transaction marker
// misplaced", 41 where 61 was expected).
func TestCommandMidTransactionsLosesNothing(t *testing.T) {
	e := newEnv(t)
	plainAndTransactions(t, e, "midtx")
	slowDestinationSending(t, e, "midtx", noOpCommands, 3, 9, 15)
	e.startMirror("midtx")
	e.waitCaughtUp("midtx")
	e.assertIdentical("midtx")
	if s, d := readCommitted(t, e.src, "midtx", 0), readCommitted(t, e.dst, "midtx", 0); !slices.Equal(s, d) {
		t.Fatalf("READ_COMMITTED records differ: %d on the source, %d on the destination", len(s), len(d))
	}
}

// TestPauseMidTransactionsRecordsTheLME: a pause reaches the runner while
// it appends mirrored transactions behind a slow destination. PAUSED, the
// partition's last mirrored offset is the destination's end - 1; resumed,
// it catches up identical, with the same committed records.
func TestPauseMidTransactionsRecordsTheLME(t *testing.T) {
	e := newEnv(t)
	plainAndTransactions(t, e, "pz")
	slowDestinationSending(t, e, "pz", []engine.CommandKind{engine.CmdPause}, 3)
	e.startMirror("pz")
	var ps engine.PartitionSnapshot
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		all := e.partitions()
		if len(all) != 1 {
			return false, fmt.Sprint(all)
		}
		ps = all[0]
		return ps.State == partition.Paused, fmt.Sprintf("pz/0 %s", ps.State)
	})
	ends, err := enginetest.Ends(context.Background(), e.dstCl, "pz")
	if err != nil {
		t.Fatal(err)
	}
	if ps.LastOffset != ends[0]-1 {
		t.Fatalf("pz/0 PAUSED with last mirrored offset %d, destination end %d", ps.LastOffset, ends[0])
	}
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b", Topics: []string{"pz"}}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("pz")
	e.assertIdentical("pz")
	if s, d := readCommitted(t, e.src, "pz", 0), readCommitted(t, e.dst, "pz", 0); !slices.Equal(s, d) {
		t.Fatalf("READ_COMMITTED records differ: %d on the source, %d on the destination", len(s), len(d))
	}
}

// plainAndTransactions fills a new one-partition source topic with 30
// bursts of 20 records: plain batches between mirrored transactions, most
// committed, some aborted.
func plainAndTransactions(t *testing.T, e *env, topic string) {
	t.Helper()
	e.src.CreateTopic(t, topic, 1, nil)
	tp := txnProducer(t, e.src, "app-"+topic)
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	for i := range 30 {
		if i%3 == 0 {
			enginetest.Produce(t, cl, topic, 1, 20, fmt.Sprintf("p%d", i))
		} else {
			inTxn(t, tp, topic, []int32{0}, 20, fmt.Sprintf("t%d", i), i%5 != 0)
		}
	}
}
