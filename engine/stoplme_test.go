package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// stopLMEEnv is a state env whose source network the test can take down,
// with the destination's options dstOpts.
func stopLMEEnv(t *testing.T, topic string, dstOpts ...kfake.Opt) (*env, *engine.Admin, *enginetest.Network) {
	t.Helper()
	n := enginetest.NewNetwork()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(n.Listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination", dstOpts...)
	e, adm := newStateEnvWith(t, src, dst, topic, 1, fastCheckpoints)
	return e, adm, n
}

// openTxnMirrored mirrors topic's one partition through a committed
// transaction (offsets 0..4, its marker at 5) and into an open one (6..10),
// caught up and checkpointed: LME 10.
func openTxnMirrored(t *testing.T, e *env, adm *engine.Admin, topic string) {
	t.Helper()
	tp := txnProducer(t, e.src, topic+"-app")
	inTxn(t, tp, topic, []int32{0}, 5, "before", true)
	if err := tp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	writeTxn(t, tp, topic, []int32{0}, 5, "inside")
	e.waitCaughtUp(topic)
	waitCheckpointed(t, e, adm, topic, 1)
}

// restartWithSourceGone takes the source off the network and replaces the
// instance with a new one, which opens the mirror from __mirror_state
// alone and never aligns the partition.
func restartWithSourceGone(e *env, n *enginetest.Network) {
	n.Down("")
	e.eng.Close()
	e.eng = e.joinInstance("two")
}

// stopAndRecord sends --stop and returns the STOPPED record of topic/0.
func stopAndRecord(t *testing.T, adm *engine.Admin, topic string) store.PartitionRecord {
	t.Helper()
	if _, err := adm.Control(context.Background(), engine.CmdStop, "a-to-b", nil, false); err != nil {
		t.Fatal(err)
	}
	return waitPersisted(t, adm, topic, 1, partition.Stopped, "two")[0]
}

// TestStopLMEIsNotItsOwnAbortMarker: an instance that never aligned the
// partition (started while the source is away) stops it with a mirrored
// transaction open: the stop aborts it, and its abort marker, which the
// source does not have, lands after the last mirrored record. The STOPPED
// record's LME is that record (10), not the marker (11); the transaction's
// first offset is kept for the failback.
func TestStopLMEIsNotItsOwnAbortMarker(t *testing.T) {
	e, adm, n := stopLMEEnv(t, "ledger")
	openTxnMirrored(t, e, adm, "ledger")
	restartWithSourceGone(e, n)
	rec := stopAndRecord(t, adm, "ledger")
	ends, err := enginetest.Ends(context.Background(), e.dstCl, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != 13 {
		t.Fatalf("destination end %d after the stop, want 13 (the stop's abort marker at 11, its fence marker at 12)", ends[0])
	}
	if rec.LastOffset != 10 || !slices.Equal(rec.StopAborted, []int64{6}) {
		t.Fatalf("STOPPED with last mirrored offset %d and aborted transactions from %v, want 10 (the last source record, not the stop's abort marker at 11) and [6]", rec.LastOffset, rec.StopAborted)
	}
	if lso := lastStable(t, e.dst, "ledger"); lso[0] != ends[0] {
		t.Fatalf("destination last stable offset %d, log end %d: the mirrored transaction is still open", lso[0], ends[0])
	}
}

// TestStopLMEIsNotAForeignTransaction: while no instance runs and the
// source is away, another producer commits a transaction straight to the
// destination partition, above the last checkpoint (19). An instance that
// never aligned the partition stops it: the STOPPED record's LME stays the
// last source record, not the foreign transaction's last offset.
func TestStopLMEIsNotAForeignTransaction(t *testing.T) {
	e, adm, n := stopLMEEnv(t, "orders")
	enginetest.Produce(t, e.srcCl, "orders", 1, 20, "before")
	e.waitCaughtUp("orders")
	waitCheckpointed(t, e, adm, "orders", 1)
	n.Down("")
	e.eng.Close()
	inTxn(t, txnProducer(t, e.dst, "foreign-app"), "orders", []int32{0}, 3, "foreign", true) // 20..22, marker 23
	e.eng = e.joinInstance("two")
	rec := stopAndRecord(t, adm, "orders")
	if rec.LastOffset != 19 {
		t.Fatalf("STOPPED with last mirrored offset %d, want 19: offsets 20..23 are a foreign transaction", rec.LastOffset)
	}
}

// TestStopWithSourceGoneAfterTheDestinationAbortedATxn: a mirrored
// transaction is open when the instance is replaced, and the destination's
// coordinator aborts it on its timeout (5 s here). The new instance starts
// with the source away, or with the source there (its alignment then finds
// the coordinator's marker: FAILED, transaction_aborted) and the source
// goes away after. A stop must not need the source: STOPPED within seconds,
// with the last source record as LME (10, not the coordinator's marker at
// 11), the transaction's first offset kept for the failback, and no marker
// of the stop's own (the transaction was aborted already). Before, the
// stop's restore of the transaction asked the source whether the abort was
// kmirror's own, and the stop was retried as source_unreachable for as
// long as the outage lasted.
func TestStopWithSourceGoneAfterTheDestinationAbortedATxn(t *testing.T) {
	for _, sourceAtRestart := range []bool{false, true} {
		t.Run(fmt.Sprintf("source-at-restart=%v", sourceAtRestart), func(t *testing.T) {
			ctx := context.Background()
			e, adm, n := stopLMEEnv(t, "ledger", kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"}))
			tp := txnProducer(t, e.src, "ledger-app")
			inTxn(t, tp, "ledger", []int32{0}, 5, "before", true)
			if err := tp.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			writeTxn(t, tp, "ledger", []int32{0}, 5, "inside")
			// Mirrored (offsets 0..10), and the instance gone, before the
			// destination's timeout runs out: no instance sees the abort.
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				ends, err := enginetest.Ends(ctx, e.dstCl, "ledger")
				if err != nil {
					return false, err.Error()
				}
				return ends[0] == 11, fmt.Sprintf("destination end %v, want 11", ends)
			})
			e.eng.Close()
			// The destination aborts the mirrored transaction on its own:
			// its marker at 11 moves the log end past the source's.
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				ends, err := enginetest.Ends(ctx, e.dstCl, "ledger")
				if err != nil {
					return false, err.Error()
				}
				return ends[0] == 12, fmt.Sprintf("destination end %v, want 12: the destination has not aborted the mirrored transaction yet", ends)
			})
			if sourceAtRestart {
				e.eng = e.joinInstance("two")
				ps := e.waitState("ledger", 0, partition.Failed)
				if ps.Cause != partition.CauseTxnAborted {
					t.Fatalf("FAILED with cause %s: %s; want %s", ps.Cause, ps.Error, partition.CauseTxnAborted)
				}
				n.Down("")
			} else {
				restartWithSourceGone(e, n)
			}
			if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", nil, false); err != nil {
				t.Fatal(err)
			}
			var rec store.PartitionRecord
			enginetest.Wait(t, 20*time.Second, func() (bool, string) {
				cat, err := adm.Catalog(ctx)
				if err != nil {
					return false, err.Error()
				}
				rec = cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "ledger", Partition: 0}]
				return rec.State == partition.Stopped, fmt.Sprintf("ledger/0 is %s (cause %s): %s", rec.State, rec.Cause, rec.Error)
			})
			ends, err := enginetest.Ends(ctx, e.dstCl, "ledger")
			if err != nil {
				t.Fatal(err)
			}
			if ends[0] != 13 || rec.LastOffset != 10 || !slices.Equal(rec.StopAborted, []int64{6}) {
				t.Fatalf("STOPPED with last mirrored offset %d, aborted transactions from %v, destination end %d; want 10, [6] and 13 (the stop's fence marker at 12)", rec.LastOffset, rec.StopAborted, ends[0])
			}
			if lso := lastStable(t, e.dst, "ledger"); lso[0] != ends[0] {
				t.Fatalf("destination last stable offset %d, log end %d", lso[0], ends[0])
			}
			enginetest.Produce(t, e.dstCl, "ledger", 1, 1, "on-b") // writable
		})
	}
}
