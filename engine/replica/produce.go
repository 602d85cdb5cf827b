package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/internal/backoff"
)

var zstdCodec = kgo.ZstdCompression()

// inflight is one appended batch whose Produce response is still awaited.
type inflight struct {
	call *Append // nil when the batch could not be sent: it is resent like a lost answer
	// b is the batch as sent, already rewritten for its writer identity:
	// an append whose outcome is unknown is resent byte for byte, so the
	// broker deduplicates it by producer id, epoch and sequence. For a
	// mirrored batch it is a slice of the fetch answer, which is kept
	// until the batch is acknowledged (popInflight clears the slot).
	b     []byte
	txnID *string       // the transactional id of a mirrored transaction's batch
	txn   *batch.Header // the source header of a mirrored transaction's batch
	base  int64         // where the batch must land
	next  int64         // the offset after it
	maxTs int64
	// broker is the destination broker the batch was last sent to.
	broker int32
	epoch  int32 // source leader epoch of the batch, -1 for a filler

	fetchedAt time.Time // when the fetch answer holding it arrived; zero for fillers and markers
	issuedAt  time.Time // when its Produce was first sent
}

// issue rewrites b for the partition's writer identity and sends it to the
// destination leader without waiting; it must land at base. Batches of one
// partition are issued in order on one connection, so the broker sees their
// sequences in order. A batch that could not be sent is in flight all the
// same: its completion resends it (complete).
func (r *Runner) issue(ctx context.Context, b []byte, base int64, count int32, epoch int32, maxTs int64) inflight {
	f := r.issueAs(ctx, r.writer, nil, b, base, count, epoch, maxTs)
	r.writer.BaseSequence = NextSequence(r.writer.BaseSequence, count)
	return f
}

// issueAs sends b with writer identity w; txnID is set for a mirrored
// transaction's data (the broker checks it against the producer id).
func (r *Runner) issueAs(ctx context.Context, w batch.Writer, txnID *string, b []byte, base int64, count int32, epoch int32, maxTs int64) inflight {
	batch.Transform(b, w)
	f := inflight{b: b, txnID: txnID, base: base, next: base + int64(count), epoch: epoch, maxTs: maxTs, issuedAt: time.Now()}
	// A batch sent while an earlier one of the partition is not would
	// reach the broker out of sequence; it waits for the earlier one's
	// resend instead.
	if n := len(r.inflight); n == 0 || r.inflight[n-1].call != nil {
		_ = r.sendBatch(ctx, &f)
	}
	return f
}

// sendBatch sends f's bytes to the destination leader and records where; on
// failure f is left unsent (call nil) and the cause is returned. The
// leader's sink puts the batch into a Produce request shared with other
// partitions' batches.
func (r *Runner) sendBatch(ctx context.Context, f *inflight) error {
	f.call, f.broker = nil, r.dst.Leader
	// An instance that may have lost its shards appends nothing; its
	// revocation ends ctx and the wait with it.
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return fmt.Errorf("append to %s/%d: %w", r.topic, r.partition, err)
	}
	f.call = &Append{Topic: r.topic, TopicID: r.dst.TopicID, Partition: r.partition, TxnID: f.txnID, Records: f.b, Gen: r.sendGen}
	r.deps.Sinks.Issue(r.dst.Leader, f.call)
	return nil
}

// completeOnce waits for one sent batch and checks where it landed;
// resent tells that f is a resend, whose DUPLICATE_SEQUENCE_NUMBER answer
// may mean that an earlier send landed.
func (r *Runner) completeOnce(ctx context.Context, f inflight, resent bool) error {
	if f.call == nil {
		return r.unknownOutcome(f.base, errNotSent)
	}
	p, err := f.call.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.unknownOutcome(f.base, err)
	}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		if p.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
		}
		// A broker answers DUPLICATE_SEQUENCE_NUMBER for a sequence
		// it holds but no longer caches: the batch landed, at an
		// offset it may not say. Only the expected offset, given back,
		// counts as landed; anything else goes to alignment.
		if !resent || !errors.Is(err, kerr.DuplicateSequenceNumber) || p.BaseOffset != f.base {
			return r.classifyProduceErr(f.base, err, f.txnID == nil)
		}
	}
	if p.BaseOffset != f.base {
		return r.foreignWrite(f.base, p.BaseOffset, "the offset a Produce answer gave")
	}
	return r.took(ctx, f, f.call.CompletedAt())
}

// took records f as landed at f.base, acknowledged at ackedAt.
func (r *Runner) took(ctx context.Context, f inflight, ackedAt time.Time) error {
	r.deps.Events.Appended(f.fetchedAt, f.issuedAt, ackedAt)
	r.acked = f.next
	r.landed(f.base, f.next, f.epoch, int64(len(f.b)), f.maxTs, f.epoch < 0)
	if r.st.State == partition.Mirroring && r.st.Attempt > 0 {
		r.step(ctx, partition.Progressed{Epoch: r.st.StateEpoch})
	}
	return r.maybeDelete(ctx)
}

// classifyProduceErr turns an error code of a Produce answer into what
// the runner does about it (FailureOf); own says the batch carried the
// partition's writer identity, not a mirrored transaction's.
func (r *Runner) classifyProduceErr(base int64, err error, own bool) error {
	switch FailureOf(err) {
	case FailFenced:
		if own && r.tc.Writer.Bumped(r.writer) {
			// Another partition of the topic bumped the epoch here
			// (TopicWriter): the partition takes the new one at its
			// alignment.
			return fmt.Errorf("%w: append %s/%d at %d: the topic's writer epoch moved on: %w", errRealign, r.topic, r.partition, base, err)
		}
		return r.Failuref("%w (writer epoch %d): is another kmirror instance mirroring this partition? %w", ErrFenced, r.writer.ProducerEpoch, err)
	case FailUnknown:
		return r.unknownOutcome(base, err)
	case FailWriter:
		return fmt.Errorf("%w: append %s/%d at %d: %w", errRealign, r.topic, r.partition, base, err)
	case FailFatal:
	}
	if r.deps.WriteGuard && errors.Is(err, kerr.TopicAuthorizationFailed) {
		// The guard's DENY applies to kmirror too unless its principal
		// bypasses ACLs.
		err = fmt.Errorf("%w (with mirror.destination.write.guard=acl kmirror's destination principal must be in the destination's super.users)", err)
	}
	return r.Failuref("append at %d: %w", base, err)
}

// unknownOutcome is the error of an append the broker may or may not have
// applied: complete resends it; once the resends are exhausted, it sends
// the partition to alignment like any errRealign.
func (r *Runner) unknownOutcome(base int64, err error) error {
	return fmt.Errorf("%w: %w: append %s/%d at %d: %w", errRealign, errUnknownOutcome, r.topic, r.partition, base, err)
}

// produceSync issues one batch and waits for it.
func (r *Runner) produceSync(ctx context.Context, b []byte, base int64, count int32) error {
	f := r.issue(ctx, b, base, count, -1, 0)
	return r.complete(ctx, &f) // alignment's: the next one reads where the log ends
}

// drain waits for every in-flight batch; the first failure is returned
// after all have been waited for, so nothing is left travelling unobserved.
// Batches are resent while their outcome is unknown (complete) until one
// fails for good; those behind it are only settled.
func (r *Runner) drain(ctx context.Context) error { return r.drainWith(ctx, AppendRetries) }

// settleAll waits for every in-flight batch without resending any: an
// alignment follows, which reads where the log ends anyway.
func (r *Runner) settleAll(ctx context.Context) error { return r.drainWith(ctx, 0) }

// drainUntilKnown is drain for a stop: a batch whose outcome is unknown is
// resent, the same bytes with the same producer id, epoch and sequence, for
// as long as it takes to learn it, not AppendRetries times. Whatever is
// recorded as the last mirrored offset after giving up may be below what
// lands: on a real broker a batch the leader appended while its followers
// lag lies above the high watermark, where neither ListOffsets nor a Fetch
// shows it, and it appears later. Bumping the writer epoch first and then
// reading the destination's end would not do: the bump fences what is
// still to arrive, not what the leader already holds, and the end read is
// the high watermark, still below it. A resend does learn it: the broker
// deduplicates it and, with acks=all, answers only once the original is
// replicated, with the offset it gave it; or, when a new leader lost the
// original, it appends the batch at its offset. Either way the answer
// says where the batch is. The stop waits on the destination only, which
// it needs anyway; the resends are announced as they go (resend).
func (r *Runner) drainUntilKnown(ctx context.Context) error {
	return r.drainWith(ctx, resendUntilKnown)
}

// resendUntilKnown is the resend limit of drainUntilKnown: none.
const resendUntilKnown = -1

// drainWith drains, resending a batch whose outcome is unknown up to
// retries times (resendUntilKnown: without limit).
func (r *Runner) drainWith(ctx context.Context, retries int) error {
	var first error
	for len(r.inflight) > 0 {
		f := r.popInflight()
		var err error
		if retries != 0 && first == nil {
			err = r.completeWith(ctx, &f, retries)
		} else {
			err = r.settle(ctx, f)
		}
		if cutShort(ctx, err) {
			// An operator event or the engine's end: what is not
			// settled stays in the pipeline for whoever settles it
			// next (completeHeld).
			r.unpop(f)
			return err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	r.inflight = r.inflight[:0]
	return first
}

var errStopSplit = errors.New("stop")

// maybeDelete moves the destination log start to the source's once the
// destination holds that offset.
func (r *Runner) maybeDelete(ctx context.Context) error {
	if r.deleteTo <= 0 || r.acked < r.deleteTo {
		return nil
	}
	if err := r.deps.Dest.DeleteRecords(ctx, r.topic, r.partition, r.deleteTo); err != nil {
		return err
	}
	r.emit(partition.SeverityInfo, fmt.Sprintf("destination log start moved to the source's, %d", r.deleteTo))
	r.deleteTo = 0
	return nil
}

// fillerRecords bounds one filler batch. Empty records compress to almost
// nothing, so one zstd batch covers a large span of offsets.
const fillerRecords = 50_000

// fill appends batches of empty records until the destination log end is
// to, so the first mirrored batch lands at the source's own offset; the
// fillers are then deleted (maybeDelete). They are counted and shown, never
// silent.
func (r *Runner) fill(ctx context.Context, to int64) error {
	recs := make([]batch.Record, min(to-r.pos, fillerRecords))
	for r.pos < to {
		n := min(to-r.pos, fillerRecords)
		b, err := batch.Build(zstdCodec, r.deps.Now().UnixMilli(), r.writer, recs[:n])
		if err != nil {
			return err
		}
		if err := r.produceSync(ctx, b, r.pos, int32(n)); err != nil {
			return err
		}
		r.pos += n
	}
	r.fillTo = 0
	return nil
}

// stopInitRetries and stopInitPolicy bound the retries of the epoch bump a
// stop ends with: five attempts, the ceilings of their waits twice the
// fixed 100ms, 200ms, 400ms and 800ms they replaced.
const stopInitRetries = 4

var stopInitPolicy = backoff.Policy{Initial: 200 * time.Millisecond, Max: 1600 * time.Millisecond}

// stop is STOPPING: no more fetches, the writer epoch bumped so no zombie
// append can land, then STOPPED. It needs only the destination.
//
// The epoch is bumped only if this instance has not bumped its topic's
// (TopicWriter) yet, as when it took the topic over while the source was
// away and nothing aligned: once it has, every earlier owner holds an
// older epoch, and another bump would fence only this instance, which
// appends nothing more. (A real broker learns a new epoch on a partition
// only from an append with it, so a bump nobody appends with fences
// nothing there; a bump per partition was a stop's whole time at scale.)
func (r *Runner) stop(ctx context.Context) error {
	r.dropFetch()
	// The topic's fence round waits for this partition's drain.
	drained := r.tc.Writer.stopBegins()
	defer drained()
	if err := r.settleRebuild(ctx); err != nil {
		return err
	}
	// Every batch that may still land is in the LME the stop records.
	if err := r.drainUntilKnown(ctx); err != nil && !isTransient(err) {
		r.emit(partition.SeverityWarn, "stopping: "+err.Error())
	}
	// The producer ids batches above the last checkpoint may carry: the
	// recorded writer, before the first stop attempt took its topic's
	// identity (a different id after an id per partition, or when the
	// broker expired it), and the mirrored transactions' mapped producers
	// as the record listed them, before the aborts below close them.
	var before int64
	var txnPIDs []int64
	if r.alignedAt == 0 {
		rare := r.rarely()
		if rare.stopEarlierWriter == 0 {
			rare.stopEarlierWriter = r.writer.ProducerID
		}
		for _, p := range r.openTxnProducers() {
			if !slices.Contains(rare.stopTxnPIDs, p.PID) {
				rare.stopTxnPIDs = append(rare.stopTxnPIDs, p.PID)
			}
		}
		before, txnPIDs = rare.stopEarlierWriter, rare.stopTxnPIDs
	}
	if err := r.abortOpen(ctx); err != nil {
		return err
	}
	b := backoff.Backoff{Policy: stopInitPolicy}
	for !r.fenced {
		// Only the epoch bump: a foreign write is reported by the next
		// alignment, and a stop of thousands of partitions must not read
		// every partition's log end.
		err := r.initWriter(ctx)
		if err == nil {
			break
		}
		if b.Attempt() >= stopInitRetries {
			return err
		}
		if !r.wait(ctx, b.Next(r.deps.Jitter)) {
			return ctx.Err()
		}
	}
	// The epoch reaches the partition's leader with a write (fence.go).
	if err := r.writeEpoch(ctx, drained); err != nil {
		return err
	}
	if r.alignedAt == 0 {
		// This instance never aligned the partition (it took it over,
		// or started, while the source was away): its LME is the last
		// checkpoint, and the destination may hold appends made after
		// it. The STOPPED record must name the real one.
		r.settleLME(ctx, before, txnPIDs)
	}
	// Last, once nothing of the mirror can land any more: the topic is
	// reported writable (STOPPED) only after its guard is gone.
	return r.deps.Dest.UnguardTopic(ctx, r.topic)
}
