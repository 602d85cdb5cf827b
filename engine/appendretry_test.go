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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// newHoldEnv is newEnv with the destination behind an enginetest.HWMHold.
func newHoldEnv(t *testing.T) (*env, *enginetest.HWMHold) {
	t.Helper()
	hold := enginetest.NewHWMHold()
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(hold.Listen))
	e := envOn(t, src, dst)
	e.startEngine()
	return e, hold
}

// snapshotOf returns the snapshot of one partition.
func (e *env) snapshotOf(topic string, p int32) (engine.PartitionSnapshot, bool) {
	for _, ps := range e.partitions() {
		if ps.Topic == topic && ps.Partition == p {
			return ps, true
		}
	}
	return engine.PartitionSnapshot{}, false
}

// holdMirrored mirrors topic (3 partitions), caught up, and arms hold on
// its partition 0 to lose the answers of the next drops appends there; it
// returns partition 0's writer epoch.
func holdMirrored(t *testing.T, e *env, hold *enginetest.HWMHold, topic string, drops int) int16 {
	t.Helper()
	e.src.CreateTopic(t, topic, 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, topic, 3, 100, "first")
	e.startMirror(topic)
	e.waitCaughtUp(topic)
	ps, _ := e.snapshotOf(topic, 0)
	hold.Arm(topic, e.dst.TopicInfo(topic).TopicID, 0, drops)
	return ps.WriterEpoch
}

// TestLostAnswerAboveHWMIsResent: the destination applies an append of
// partition 0 but the answer is lost (the connection closes), and its high
// watermark stays before that batch, as a real broker's does while acks=all
// waits for followers: ListOffsets(latest) does not show it. The batch and
// those behind it are resent unchanged on a new connection and the broker
// deduplicates them: no duplicate, no realignment (the writer epoch stays),
// the destination identical to the source.
func TestLostAnswerAboveHWMIsResent(t *testing.T) {
	e, hold := newHoldEnv(t)
	epoch := holdMirrored(t, e, hold, "held", 1)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "held")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return hold.Dropped() >= 1, "no produce answer lost yet"
	})
	e.waitProgress("held", 3, 100)
	close(stop)
	wg.Wait()
	e.waitCaughtUp("held")
	e.assertIdentical("held")
	if h := hold.Held(); h >= 0 {
		t.Fatalf("high watermark still held at %d: no later append was acknowledged", h)
	}
	ps, _ := e.snapshotOf("held", 0)
	if ps.WriterEpoch != epoch {
		t.Fatalf("writer epoch %d, was %d: the partition realigned instead of resending", ps.WriterEpoch, epoch)
	}
}

// TestLostAnswersExhaustRetries: every resend's answer is lost too, with
// the high watermark held before the first batch, and the destination
// cannot say whether the batch landed (DescribeProducers fails, as on a
// broker before Kafka 3.0). The partition falls back to alignment, which
// reads the held (too low) log end; the next append then lands after the
// batch that was in fact in the log, and its answer's offset says so: the
// partition is FAILED with the offsets, loudly, never mirroring on with a
// silent duplicate.
func TestLostAnswersExhaustRetries(t *testing.T) {
	e, hold := newHoldEnv(t)
	holdMirrored(t, e, hold, "lost", 1+engine.AppendRetries)
	e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeProducers}, Topic: "lost", Count: -1})
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "lost", 3, 100, "second")
	ps := e.waitState("lost", 0, partition.Failed)
	if hold.Dropped() != 1+engine.AppendRetries {
		t.Fatalf("%d answers lost, want %d", hold.Dropped(), 1+engine.AppendRetries)
	}
	if ps.Retryable || !strings.Contains(ps.Error, "expected offset 100,") {
		t.Fatalf("partition 0 FAILED with %q (retryable %v), want an offset mismatch at 100", ps.Error, ps.Retryable)
	}
	// The other partitions mirror on.
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		for _, p := range []int32{1, 2} {
			ps, _ := e.snapshotOf("lost", p)
			if ps.State != partition.Mirroring || ps.DestLogEnd != 200 {
				return false, fmt.Sprintf("lost/%d is %s at %d: %s", p, ps.State, ps.DestLogEnd, ps.Error)
			}
		}
		return true, ""
	})
}

// TestSixLostAnswersAboveTheHighWatermarkLandOnce: an append of partition 0
// is applied and its answer lost, and so are the answers of all its
// resends, with the high watermark held before the batch (ListOffsets does
// not show it), as on a broker whose followers lag. When the resends run
// out, the destination leader's producer state (DescribeProducers) shows
// the writer's sequence past the batch's: it landed, and the partition goes
// on from after it without realigning. Before, it realigned on the held log
// end and appended the batch a second time, then went FAILED on the
// answer's offset (a "foreign write" that was its own batch).
func TestSixLostAnswersAboveTheHighWatermarkLandOnce(t *testing.T) {
	e, hold := newHoldEnv(t)
	epoch := holdMirrored(t, e, hold, "landonce", 1+engine.AppendRetries)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "landonce", 3, 100, "second")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return hold.Dropped() >= 1+engine.AppendRetries, fmt.Sprintf("%d of %d produce answers lost", hold.Dropped(), 1+engine.AppendRetries)
	})
	waitLanded(t, e, "landonce", 0)
	// The next append's answer goes through: the followers caught up.
	enginetest.Produce(t, cl, "landonce", 3, 100, "third")
	waitMirroringAt(t, e, "landonce", 0, 300)
	e.waitCaughtUp("landonce")
	e.assertIdentical("landonce")
	if h := hold.Held(); h >= 0 {
		t.Fatalf("high watermark still held at %d: no later append was acknowledged", h)
	}
	ps, _ := e.snapshotOf("landonce", 0)
	if ps.WriterEpoch != epoch {
		t.Fatalf("writer epoch %d, was %d: the partition realigned instead of taking the landing", ps.WriterEpoch, epoch)
	}
}

// TestRealignAfterLostAnswersAdoptsItsOwnBatch: every answer of an append
// of partition 0 is lost with the high watermark held before the batch,
// and the destination cannot say whether it landed (DescribeProducers
// fails), so the partition realigns on the held log end; the followers
// catch up while it fences its writer, and the log end it reads then is
// past the batch. That batch is kmirror's own: the alignment verifies it
// against the source and adopts it, and the partition mirrors on,
// identical, with no duplicate. Before, the fence took the moved log end
// for a foreign write and the partition went FAILED for good.
func TestRealignAfterLostAnswersAdoptsItsOwnBatch(t *testing.T) {
	e, hold := newHoldEnv(t)
	holdMirrored(t, e, hold, "adopt", 1+engine.AppendRetries)
	e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeProducers}, Topic: "adopt", Count: -1})
	var bumps atomic.Int64
	e.dst.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		if hold.Dropped() >= 1+engine.AppendRetries && hold.Held() >= 0 {
			bumps.Add(1)
			hold.Release() // the followers caught up during the epoch bump
		}
		return nil, nil, false
	})
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "adopt", 3, 100, "second")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return bumps.Load() > 0, fmt.Sprintf("%d of %d produce answers lost, no epoch bump after them yet", hold.Dropped(), 1+engine.AppendRetries)
	})
	enginetest.Produce(t, cl, "adopt", 3, 100, "third")
	waitMirroringAt(t, e, "adopt", 0, 300)
	e.waitCaughtUp("adopt")
	e.assertIdentical("adopt")
}

// waitLanded waits for the event of partition p of topic that a batch
// landed though its answers were lost, failing at once if the partition
// goes FAILED.
func waitLanded(t *testing.T, e *env, topic string, p int32) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev := <-e.eng.Events():
			if ev.Topic == topic && ev.Partition == p && strings.Contains(ev.Message, "landed though its answers were lost") {
				return
			}
		case <-tick.C:
			if ps, ok := e.snapshotOf(topic, p); ok && ps.State == partition.Failed {
				t.Fatalf("%s/%d FAILED (retryable %v): %s", topic, p, ps.Retryable, ps.Error)
			}
		case <-deadline.C:
			t.Fatalf("%s/%d: no event within 30s that a batch landed though its answers were lost", topic, p)
		}
	}
}

// waitMirroringAt waits until partition p of topic is MIRRORING with the
// destination at end, failing at once if it goes FAILED.
func waitMirroringAt(t *testing.T, e *env, topic string, p int32, end int64) {
	t.Helper()
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		ps, ok := e.snapshotOf(topic, p)
		if ok && ps.State == partition.Failed {
			t.Fatalf("%s/%d FAILED (retryable %v): %s", topic, p, ps.Retryable, ps.Error)
		}
		return ok && ps.State == partition.Mirroring && ps.DestLogEnd == end, fmt.Sprintf("%s/%d is %s at %d: %s", topic, p, ps.State, ps.DestLogEnd, ps.Error)
	})
}

// TestAppliedAppendAnsweredWithErrorIsResent: the destination applies an
// append and answers REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND,
// as a real broker does when followers are slow. The batch is resent with
// the same sequence and deduplicated: no realignment, identical result.
func TestAppliedAppendAnsweredWithErrorIsResent(t *testing.T) {
	for _, fault := range []*kerr.Error{kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend} {
		t.Run(fault.Message, func(t *testing.T) {
			e := newEnv(t)
			e.src.CreateTopic(t, "applied", 3, nil)
			cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
			enginetest.Produce(t, cl, "applied", 3, 100, "first")
			e.startMirror("applied")
			e.waitCaughtUp("applied")
			epochs := map[int32]int16{}
			for _, ps := range e.partitions() {
				epochs[ps.Partition] = ps.WriterEpoch
			}
			h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "applied", Err: fault, Count: 3})
			enginetest.Produce(t, cl, "applied", 3, 100, "second")
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				return h.Hits() >= 3, fmt.Sprintf("%d of 3 faults hit", h.Hits())
			})
			e.waitCaughtUp("applied")
			e.assertIdentical("applied")
			for _, ps := range e.partitions() {
				if ps.WriterEpoch != epochs[ps.Partition] {
					t.Fatalf("applied/%d: writer epoch %d, was %d: realigned instead of resending", ps.Partition, ps.WriterEpoch, epochs[ps.Partition])
				}
			}
		})
	}
}

// TestLostTxnAnswerAboveHWMIsResent: the lost answer is a mirrored
// transaction's batch. It is resent with its transactional producer's id,
// epoch and sequence and deduplicated; the transaction commits on the
// destination at the source's offsets.
func TestLostTxnAnswerAboveHWMIsResent(t *testing.T) {
	e, hold := newHoldEnv(t)
	holdMirrored(t, e, hold, "txheld", 1)
	tp := txnProducer(t, e.src, "app-held")
	inTxn(t, tp, "txheld", []int32{0, 1}, 20, "t-commit", true)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return hold.Dropped() >= 1, "no produce answer lost yet"
	})
	inTxn(t, tp, "txheld", []int32{0, 2}, 10, "t-abort", false)
	e.waitCaughtUp("txheld")
	e.assertIdentical("txheld")
	for p := range int32(3) {
		if s, d := readCommitted(t, e.src, "txheld", p), readCommitted(t, e.dst, "txheld", p); !slices.Equal(s, d) {
			t.Fatalf("txheld/%d: READ_COMMITTED records differ:\nsource %v\ndestination %v", p, s, d)
		}
	}
}

// TestStopDuringAResendKeepsTheBatchInTheLME: the partition's last batch
// lands on the destination but is answered REQUEST_TIMED_OUT, and the stop
// arrives while the runner waits to resend it. The stop must still learn
// where the batch landed: the STOPPED record's last mirrored offset is the
// destination's end - 1, not the batch before it (which a failback would
// then take the batch for a foreign write above, DIVERGED).
func TestStopDuringAResendKeepsTheBatchInTheLME(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "last", 1, map[string]string{
		"mirror.failed.retry.initial.backoff.ms": "2000",
		"mirror.failed.retry.max.backoff.ms":     "2000",
	})
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	enginetest.Produce(t, cl, "last", 1, 20, "first")
	e.waitCaughtUp("last")
	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "last", Err: kerr.RequestTimedOut, Count: 1})
	enginetest.Produce(t, cl, "last", 1, 10, "second")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return h.Hits() >= 1, "the fault was not hit yet"
	})
	if _, err := adm.Control(context.Background(), engine.CmdStop, "a-to-b", nil, false); err != nil {
		t.Fatal(err)
	}
	recs := waitPersisted(t, adm, "last", 1, partition.Stopped, "one")
	ends, err := enginetest.Ends(context.Background(), e.dstCl, "last")
	if err != nil {
		t.Fatal(err)
	}
	// 30: the stop's fence marker (the writer's epoch written) follows
	// the last batch.
	if ends[0] != 31 || recs[0].LastOffset != 29 {
		t.Fatalf("last/0 STOPPED with last mirrored offset %d, destination end %d (want 29 and 31, the stop's fence marker at 30)", recs[0].LastOffset, ends[0])
	}
	e.assertIdentical("last")
}

// TestCommandMidFetchAnswerLosesNothing: operator commands that leave a
// MIRRORING partition as it is (resume, recover) interrupt the runner
// while it appends one fetch answer's batches and waits for room in its
// pipeline (a slow destination). The partition goes on from the batch it
// had reached: it catches up, identical. Before, the fetch posted ahead
// from the answer's end stayed outstanding, the batches not yet appended
// were never fetched again, and the partition stalled MIRRORING with no
// error.
func TestCommandMidFetchAnswerLosesNothing(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "mid", 1, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	for i := range 40 {
		enginetest.Produce(t, cl, "mid", 1, 30, fmt.Sprintf("b%d", i))
	}
	slowDestinationSending(t, e, "mid", noOpCommands, 3)
	e.startMirror("mid")
	e.waitCaughtUp("mid")
	e.assertIdentical("mid")
}

// noOpCommands leave a MIRRORING partition as it is, but interrupt its
// runner.
var noOpCommands = []engine.CommandKind{engine.CmdResume, engine.CmdRecover}

// slowDestinationSending makes e's destination answer each Produce 20 ms
// late and, at the Produce requests numbered in at, sends the commands
// kinds for topic: they reach the runner while it waits for room in its
// pipeline.
func slowDestinationSending(t *testing.T, e *env, topic string, kinds []engine.CommandKind, at ...int64) {
	var produces atomic.Int64
	e.dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		if slices.Contains(at, produces.Add(1)) {
			for _, kind := range kinds {
				if err := e.eng.Control(context.Background(), engine.Command{Kind: kind, Mirror: "a-to-b", Topics: []string{topic}}); err != nil {
					t.Error(err)
				}
			}
		}
		e.dst.SleepControl(func() { <-time.After(20 * time.Millisecond) })
		return nil, nil, false
	})
}

// TestStopResendsUntilTheOutcomeIsKnown: partition 0's last batch lands on
// the destination but its answer is lost, with the high watermark held
// before it, and the stop arrives while the runner resends it; the
// answers of more resends than AppendRetries allows are lost too (twice
// over), then one goes through. The stop keeps resending the same bytes
// (the broker deduplicates them) until it learns where the batch landed:
// STOPPED with LME = destination end - 1 once the hold is over. Before, the
// stop's drain gave up after AppendRetries resends and recorded the LME of
// the batch before it (99), below what the destination then showed (200):
// a failback took the batch for a foreign write (DIVERGED, quarantined).
func TestStopResendsUntilTheOutcomeIsKnown(t *testing.T) {
	e, hold := newHoldEnv(t)
	holdMirrored(t, e, hold, "stophold", 2*engine.AppendRetries+3)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "stophold", 3, 100, "second")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		return hold.Dropped() >= 1, "no produce answer lost yet"
	})
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	ps := e.waitState("stophold", 0, partition.Stopped)
	lost := hold.Dropped()
	hold.Release()
	ends, err := enginetest.Ends(context.Background(), e.dstCl, "stophold")
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != 201 || ps.LastOffset != 199 {
		t.Fatalf("stophold/0 STOPPED with last mirrored offset %d, destination end %d once the hold is over (want 199 and 201, the stop's fence marker at 200; %d answers lost)", ps.LastOffset, ends[0], lost)
	}
	if lost != 2*engine.AppendRetries+3 {
		t.Fatalf("%d answers lost, want %d: the stop did not learn the outcome from a resend's answer", lost, 2*engine.AppendRetries+3)
	}
	e.assertIdentical("stophold")
}
