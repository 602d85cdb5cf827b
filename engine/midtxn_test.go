package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/engine/enginetest"
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
	e.src.CreateTopic(t, "midtx", 1, nil)
	tp := txnProducer(t, e.src, "app-mid")
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	for i := range 30 {
		if i%3 == 0 {
			enginetest.Produce(t, cl, "midtx", 1, 20, fmt.Sprintf("p%d", i))
		} else {
			inTxn(t, tp, "midtx", []int32{0}, 20, fmt.Sprintf("t%d", i), i%5 != 0)
		}
	}
	slowDestinationSending(t, e, "midtx", 3, 9, 15)
	e.startMirror("midtx")
	e.waitCaughtUp("midtx")
	e.assertIdentical("midtx")
	if s, d := readCommitted(t, e.src, "midtx", 0), readCommitted(t, e.dst, "midtx", 0); !slices.Equal(s, d) {
		t.Fatalf("READ_COMMITTED records differ: %d on the source, %d on the destination", len(s), len(d))
	}
}
