package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestStopFenceHoldsOnAFirstWriteBroker: on a destination that learns a
// producer's epoch only from a write with it (enginetest.EpochBroker, as a
// real broker does), an owner's Produce is held in the network while the
// source goes away and the owner dies; a new owner takes the topic over
// (an InitProducerID bump, no write: the source is away) and stops it.
// The held Produce arrives after STOPPED, with the old owner's epoch: the
// stop's fence (an empty transaction of the writer identity, aborted,
// whose marker carries the new epoch) has taught the partition the new
// epoch, so it is refused, and nothing of kmirror's lands on the stopped
// topic. Before, the stop only bumped the epoch, and the zombie's batch
// landed after STOPPED, among what clients write there.
func TestStopFenceHoldsOnAFirstWriteBroker(t *testing.T) {
	n := enginetest.NewNetwork()
	brk := enginetest.NewEpochBroker()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(n.Listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(brk.Listen))
	e, adm := newStateEnvWith(t, src, dst, "z", 1, fastCheckpoints)
	ctx := context.Background()
	enginetest.Produce(t, e.srcCl, "z", 1, 20, "before")
	e.waitCaughtUp("z")
	waitCheckpointed(t, e, adm, "z", 1)
	brk.Name("z", e.dst.TopicInfo("z").TopicID)

	// The owner's next Produce stays in the network.
	brk.Hold("z")
	enginetest.Produce(t, e.srcCl, "z", 1, 5, "held")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return brk.Held() > 0, "the owner sent no Produce of z yet"
	})
	n.Down("")
	e.eng.Close()
	e.eng = e.joinInstance("two")
	if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", nil, false); err != nil {
		t.Fatal(err)
	}
	recs := waitPersisted(t, adm, "z", 1, partition.Stopped, "two")
	if recs[0].LastOffset != 19 {
		t.Fatalf("z/0 STOPPED with last mirrored offset %d, want 19", recs[0].LastOffset)
	}
	ends, err := enginetest.Ends(ctx, e.dstCl, "z")
	if err != nil {
		t.Fatal(err)
	}
	d, err := brk.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := enginetest.Ends(ctx, e.dstCl, "z")
	if err != nil {
		t.Fatal(err)
	}
	if d.Applied != 0 || d.Refused == 0 || after[0] != ends[0] {
		t.Fatalf("the old owner's held Produce after STOPPED: %d batches applied, %d refused; destination end %d before it, %d after: want it refused, nothing landed", d.Applied, d.Refused, ends[0], after[0])
	}
}
