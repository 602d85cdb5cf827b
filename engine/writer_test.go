package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// countWriterInits counts, from now on, the InitProducerID requests c gets
// for the writer id of topic in mirror a-to-b.
func countWriterInits(c *enginetest.Cluster, topic string) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if id := kreq.(*kmsg.InitProducerIDRequest).TransactionalID; id != nil && *id == "kmirror/a-to-b/"+topic {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// mirrorTopicOf4 starts e's mirror of a new source topic of 4 partitions
// holding n records each, caught up, and returns the source producer.
func mirrorTopicOf4(e *env, topic string, n int) *kgo.Client {
	e.t.Helper()
	e.src.CreateTopic(e.t, topic, 4, nil)
	cl := e.src.Client(e.t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(e.t, cl, topic, 4, n, "first")
	e.startMirror(topic)
	e.waitCaughtUp(topic)
	return cl
}

// TestStopKeepsTheEpochItFenced: the instance that aligned and fenced a
// partition sends no InitProducerID when it stops it (every earlier owner
// already holds an older epoch; the bump would fence only itself), and the
// stopped destination is identical and writable. An instance that stops
// partitions it never fenced bumps their topic's identity once:
// TestStopWithSourceGone.
func TestStopKeepsTheEpochItFenced(t *testing.T) {
	const parts = 4
	e := newEnv(t)
	mirrorTopicOf4(e, "orders", 40)
	epochs := map[int32]int16{}
	for _, p := range e.partitions() {
		epochs[p.Partition] = p.WriterEpoch
	}
	inits := countWriterInits(e.dst, "orders")
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitAll(parts, partition.Stopped)
	if n := inits.Load(); n != 0 {
		t.Fatalf("the stop sent %d InitProducerID requests for the partitions this instance fenced, want none", n)
	}
	for _, p := range e.partitions() {
		if p.WriterEpoch != epochs[p.Partition] {
			t.Fatalf("orders/%d: writer epoch %d after the stop, %d before (the stop's fence writes the epoch it has)", p.Partition, p.WriterEpoch, epochs[p.Partition])
		}
	}
	e.assertIdentical("orders")
	enginetest.Produce(t, e.dstCl, "orders", parts, 1, "on-b")
}

// TestANewEpochMovesItsTopicAlong: the partitions of a topic share one
// writer identity. A partition whose append the broker refuses for its
// sequence (OUT_OF_ORDER_SEQUENCE_NUMBER) aligns again with a new epoch of
// it; the broker then refuses the other partitions' appends for their old
// epoch, and they align and take the new one instead of failing as
// fenced by another owner. One InitProducerID in all, nothing FAILED, the
// copy identical.
func TestANewEpochMovesItsTopicAlong(t *testing.T) {
	const parts = 4
	e := newEnv(t)
	cl := mirrorTopicOf4(e, "moved", 50)
	epoch := func(p int32) int16 {
		ps, _ := e.snapshotOf("moved", p)
		return ps.WriterEpoch
	}
	before := epoch(0)
	for p := range int32(parts) {
		if epoch(p) != before {
			t.Fatalf("moved/%d: writer epoch %d, moved/0 %d: the topic's partitions do not share one identity", p, epoch(p), before)
		}
	}
	inits := countWriterInits(e.dst, "moved")
	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "moved", Partitions: []int32{0}, Err: kerr.OutOfOrderSequenceNumber})
	enginetest.Produce(t, cl, "moved", parts, 50, "second")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return h.Hits() == 1 && epoch(0) == before+1, fmt.Sprintf("fault hit %d times, moved/0 at writer epoch %d", h.Hits(), epoch(0))
	})
	// The others append with the old epoch now.
	enginetest.Produce(t, cl, "moved", parts, 50, "third")
	e.waitCaughtUp("moved")
	e.assertIdentical("moved")
	for _, ps := range e.partitions() {
		if ps.State != partition.Mirroring || ps.WriterEpoch != before+1 {
			t.Fatalf("moved/%d is %s at writer epoch %d (%s), want MIRRORING at %d", ps.Partition, ps.State, ps.WriterEpoch, ps.Error, before+1)
		}
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("%d InitProducerID requests for the topic's writer id, want the one bump", n)
	}
}

// TestAnotherOwnersBumpFencesTheWholeTopic: a new owner of a topic bumps
// the topic's writer id once (InitProducerID on kmirror/<mirror>/<topic>,
// sent here as a new owner sends it); the instance that still mirrors
// the topic has every partition's next append refused for its old epoch,
// and each goes FAILED as fenced by another owner, not retryable, with
// nothing appended after the bump.
func TestAnotherOwnersBumpFencesTheWholeTopic(t *testing.T) {
	const parts = 4
	e := newEnv(t)
	cl := mirrorTopicOf4(e, "taken", 20)
	ctx := context.Background()
	ends, err := enginetest.Ends(ctx, e.dstCl, "taken")
	if err != nil {
		t.Fatal(err)
	}

	req := kmsg.NewPtrInitProducerIDRequest()
	id := "kmirror/a-to-b/taken"
	req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60_000, -1, -1
	resp, err := req.RequestWith(ctx, e.dstCl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("the other owner's InitProducerID: %v", err)
	}

	enginetest.Produce(t, cl, "taken", parts, 20, "after")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		for _, ps := range e.partitions() {
			if ps.State != partition.Failed {
				return false, fmt.Sprintf("taken/%d is %s", ps.Partition, ps.State)
			}
		}
		return true, ""
	})
	for _, ps := range e.partitions() {
		if ps.Retryable || !strings.Contains(ps.Error, "is another kmirror instance mirroring this partition?") {
			t.Fatalf("taken/%d FAILED with %q (retryable %v), want fenced by another owner", ps.Partition, ps.Error, ps.Retryable)
		}
	}
	after, err := enginetest.Ends(ctx, e.dstCl, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, ends) {
		t.Fatalf("destination ends %v after the fence, %v before: appended with a fenced epoch", after, ends)
	}
}

// TestTopicStartsWhenItsWriterIDIsSlowToInit: the destination's
// transaction coordinator answers the topic's InitProducerID with
// COORDINATOR_LOAD_IN_PROGRESS seven times, more than one bump retries.
// The partition whose bump gave up aligns again; the topic's partitions
// all end MIRRORING with one writer epoch among them, and the copy is
// identical.
func TestTopicStartsWhenItsWriterIDIsSlowToInit(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "loading", 4, nil)
	enginetest.Produce(t, e.srcCl, "loading", 4, 30, "first")
	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: "kmirror/a-to-b/loading", Err: kerr.CoordinatorLoadInProgress, Count: 7})
	e.startMirror("loading")
	e.waitCaughtUp("loading")
	if h.Hits() != 7 {
		t.Fatalf("%d of 7 faults hit", h.Hits())
	}
	e.assertIdentical("loading")
	epochs := map[int16]bool{}
	for _, ps := range e.partitions() {
		if ps.State != partition.Mirroring {
			t.Fatalf("loading/%d is %s: %s", ps.Partition, ps.State, ps.Error)
		}
		epochs[ps.WriterEpoch] = true
	}
	if len(epochs) != 1 {
		t.Fatalf("writer epochs %v: the topic's partitions do not share one identity", epochs)
	}
}

// TestTopicWriterThroughPauseRecoverAndRestart: the topic's writer
// identity through the states a partition goes through. A pause and resume
// of the topic bump its epoch once for all four partitions (the first to
// fence had appended; the others take its epoch). A partition FAILED by a
// refused append and recovered bumps it once more, and its siblings take
// the new epoch at their next append (the broker refuses their old one).
// A restarted engine bumps it once on taking the topic again. Every step
// ends identical, every partition MIRRORING at one epoch.
func TestTopicWriterThroughPauseRecoverAndRestart(t *testing.T) {
	e := newEnv(t)
	cl := mirrorTopicOf4(e, "cycled", 20)
	ps, _ := e.snapshotOf("cycled", 0)
	base := ps.WriterEpoch
	inits := countWriterInits(e.dst, "cycled")
	ctx := context.Background()
	control := func(kind engine.CommandKind) {
		t.Helper()
		if err := e.eng.Control(ctx, engine.Command{Kind: kind, Mirror: "a-to-b", Topics: []string{"cycled"}}); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(step string, bumps int64) {
		t.Helper()
		e.waitCaughtUp("cycled")
		e.assertIdentical("cycled")
		for _, ps := range e.partitions() {
			if ps.State != partition.Mirroring || ps.WriterEpoch != base+int16(bumps) {
				t.Fatalf("after %s: cycled/%d is %s at writer epoch %d (%s), want MIRRORING at %d", step, ps.Partition, ps.State, ps.WriterEpoch, ps.Error, base+int16(bumps))
			}
		}
		if n := inits.Load(); n != bumps {
			t.Fatalf("after %s: %d InitProducerID requests for the topic's writer id, want %d", step, n, bumps)
		}
	}

	control(engine.CmdPause)
	e.waitAll(4, partition.Paused)
	enginetest.Produce(t, cl, "cycled", 4, 20, "while-paused")
	control(engine.CmdResume)
	settled("pause and resume", 1)

	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "cycled", Partitions: []int32{0}, Err: kerr.InvalidRecord})
	enginetest.Produce(t, cl, "cycled", 4, 20, "refused")
	if ps := e.waitState("cycled", 0, partition.Failed); !strings.Contains(ps.Error, "INVALID_RECORD") {
		t.Fatalf("cycled/0 FAILED with %q, want the refused append", ps.Error)
	}
	if h.Hits() != 1 {
		t.Fatalf("%d faults hit, want 1", h.Hits())
	}
	control(engine.CmdRecover)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ps, _ := e.snapshotOf("cycled", 0)
		return ps.State == partition.Mirroring && ps.WriterEpoch == base+2, fmt.Sprintf("cycled/0 is %s at writer epoch %d", ps.State, ps.WriterEpoch)
	})
	enginetest.Produce(t, cl, "cycled", 4, 20, "after-recover")
	settled("recover", 2)

	e.eng.Close()
	e.startEngine()
	e.startMirror("cycled")
	enginetest.Produce(t, cl, "cycled", 4, 20, "after-restart")
	settled("restart", 3)
}
