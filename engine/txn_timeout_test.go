package engine_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// newEnvDst is newEnv with options for the destination cluster.
func newEnvDst(t *testing.T, dstOpts ...kfake.Opt) *env {
	t.Helper()
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination", dstOpts...)
	e := envOn(t, src, dst)
	e.startEngine()
	return e
}

// A pause longer than the destination's transaction timeout, with a source
// transaction open, lets the destination abort the mirrored transaction: a
// marker the source does not have. The partition must fail saying so, and
// --recover --rebuild must bring it back identical.
func TestPauseOutlivesDestinationTxnTimeout(t *testing.T) {
	const txnMax = 2 * time.Second
	e := newEnvDst(t, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "2000"}))
	ctx := context.Background()
	tp := openLedgerTxn(t, e)

	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitState("ledger", 0, partition.Paused)
	// The operator is told when the destination will abort it.
	deadline := regexp.MustCompile(`paused with 1 open mirrored transactions: they will be aborted by the destination at \d\d:\d\d:\d\d `)
	waitEvent(t, e.eng, func(ev engine.Event) bool {
		return ev.Level == engine.LevelWarn && ev.Topic == "ledger" && deadline.MatchString(ev.Message)
	})
	// The destination aborts the mirrored transaction on its own: its
	// marker moves the log end past the source's.
	srcEnds, err := enginetest.Ends(ctx, e.srcCl, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Wait(t, 10*txnMax, func() (bool, string) {
		ends, err := enginetest.Ends(ctx, e.dstCl, "ledger")
		if err != nil {
			return false, err.Error()
		}
		return ends[0] > srcEnds[0], "the destination has not aborted the mirrored transaction yet"
	})
	writeTxn(t, tp, "ledger", []int32{0}, 5, "inside-2")
	if err := tp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	ps := e.waitState("ledger", 0, partition.Failed)
	if ps.Cause != partition.CauseTxnAborted || ps.Retryable {
		t.Fatalf("FAILED with cause %s (retryable %v): %s; want %s, not retryable", ps.Cause, ps.Retryable, ps.Error, partition.CauseTxnAborted)
	}
	t.Logf("failed: %s", ps.Error)

	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdRecover, Mirror: "a-to-b", Topics: []string{"ledger"}, Rebuild: true}); err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("none", true)...), "ledger", 1, 3, "after")
	e.waitCaughtUp("ledger")
	e.assertIdentical("ledger")
	if s, d := readCommitted(t, e.src, "ledger", 0), readCommitted(t, e.dst, "ledger", 0); !slices.Equal(s, d) {
		t.Fatalf("READ_COMMITTED records differ:\nsource %v\ndestination %v", s, d)
	}
}
