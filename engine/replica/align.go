package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/engine/partition"
)

// align is LOG_ALIGNMENT: compare the destination log with the source log
// and decide where mirroring resumes. It writes nothing.
func (r *Runner) align(ctx context.Context) error {
	at := r.deps.Now()
	src, err := r.deps.Source.Route(ctx, r.topic, r.partition, at)
	if err != nil {
		return err
	}
	dst, err := r.deps.Dest.Route(ctx, r.topic, r.partition, at)
	if err != nil {
		return err
	}
	// The destination topic the LME was mirrored into: the last one
	// aligned on, or the one the partition record names.
	prevDst := r.dst.TopicID
	r.src, r.dst = src, dst
	r.stats.setTopicIDs(TopicIDString(src.TopicID), TopicIDString(dst.TopicID))
	if id := r.deps.Source.ClusterID(); id != r.deps.SourceID {
		return r.Failuref("%w: the source bootstrap %s now reaches cluster %s, but mirror %s was created against cluster %s",
			ErrSourceClusterChanged, strings.Join(r.deps.SourceBootstrap, ","), id, r.deps.Mirror, r.deps.SourceID)
	}
	if err := r.deps.Source.CheckTopicID(r.topic, r.partition, src.TopicID); err != nil {
		return err
	}
	srcStart, srcEnd, err := r.deps.Source.Offsets(ctx, r.topic, r.partition)
	if err != nil {
		return err
	}
	dstStart, dstEnd, err := r.deps.Dest.Offsets(ctx, r.topic, r.partition)
	if err != nil {
		return err
	}
	r.stats.SetSource(srcEnd, srcStart)
	r.stats.setDestEnd(dstEnd)
	a, err := r.anchor(ctx, dstEnd, prevDst)
	if err != nil {
		return err
	}
	if err := r.checkSourceEpoch(ctx, a, srcStart); err != nil {
		return err
	}
	v, err := r.verify(ctx, a, dstStart, dstEnd, srcStart)
	if err != nil {
		return r.abortedByDestination(err)
	}
	if v.offset > a.offset {
		r.verifiedTo(v.offset, v.epoch, v.start)
	}
	switch {
	case dstEnd > srcEnd:
		return r.mismatch(srcEnd, dstEnd, ErrDiverged)
	case dstEnd < srcStart:
		// The source log start may lie inside a batch: fill up to that
		// batch's base, copy it whole, then move the log start.
		base, err := r.batchBaseAt(ctx, srcStart)
		if err != nil {
			return err
		}
		if base < dstEnd {
			return r.mismatch(base, dstEnd, ErrDiverged)
		}
		if dstEnd > dstStart {
			r.emit(partition.SeverityWarn, fmt.Sprintf("source deleted offsets %d..%d before they were mirrored; the destination skips them with filler records", dstEnd, srcStart-1))
			// The log start moves past what the destination holds
			// (offsets the source had): keep it first.
			q, n, err := r.deps.Rebuilds.Retain(ctx, r.topic, r.partition, dstStart, dstEnd)
			if err != nil {
				return fmt.Errorf("keep offsets %d..%d before the destination log start moves to %d: %w", dstStart, dstEnd-1, srcStart, err)
			}
			r.emit(partition.SeverityWarn, fmt.Sprintf("the destination's offsets %d..%d (%d records) copied to %s: its log start moves to the source's, %d", dstStart, dstEnd-1, n, q, srcStart))
		}
		r.fillTo, r.deleteTo = base, srcStart
	default:
		r.fillTo, r.deleteTo = 0, 0
	}
	r.pos, r.acked = dstEnd, dstEnd
	r.sendGen++
	r.alignedAt = r.deps.SinceBase(at)
	r.dropFetch()
	if r.txm == nil && len(r.restoredTxns()) > 0 {
		// Continue the mirrored transactions of the previous owner now,
		// before anything is appended.
		if _, err := r.mapper(ctx); err != nil {
			return err
		}
	}
	if r.txm != nil {
		if err := r.txm.Resync(ctx); err != nil {
			return r.txnError(err)
		}
	}
	return nil
}

// abortedByDestination names a mismatch for what it is when the first
// destination record the source lacks was written by one of the partition's
// mirrored transactional producers: the abort marker its transaction
// coordinator wrote when the transaction timed out.
func (r *Runner) abortedByDestination(err error) error {
	var mm *MismatchError
	if !errors.As(err, &mm) {
		return err
	}
	for _, p := range r.openTxnProducers() {
		if p.PID == mm.ProducerID {
			return &TxnAbortedError{Topic: r.topic, Partition: r.partition, TxnID: p.TxnID, At: mm.At, Err: mm}
		}
	}
	return err
}

// batchBaseAt returns the base offset of the source batch holding offset,
// or offset itself when the source has no record there yet.
func (r *Runner) batchBaseAt(ctx context.Context, offset int64) (int64, error) {
	h, b, err := r.sourceBatchAt(ctx, offset)
	if err != nil {
		return 0, err
	}
	if b == nil {
		return offset, nil
	}
	return min(offset, h.BaseOffset), nil
}

// anchor returns the last offset known to be mirrored into the destination
// partition: the partition's own LME, or in a failback the forward
// mirror's (checkFailback). A destination topic rebuilt by this mirror since
// the LME was taken (its rebuild record names the topic id, also for a new
// owner) holds none of it any more. One recreated by anyone else lost
// mirrored records: both ids are named. prevDst is the destination topic
// id the LME was mirrored into, zero when unknown.
func (r *Runner) anchor(ctx context.Context, dstEnd int64, prevDst [16]byte) (anchor, error) {
	fb, err := r.checkFailback(ctx, dstEnd)
	if err != nil {
		return anchor{}, err
	}
	last, epoch := r.mirrored, r.mirroredEpoch
	if last >= 0 && dstEnd < last+1 {
		switch {
		case r.deps.Dest.RebuiltAs(r.topic, r.dst.TopicID):
			r.forgetMirrored()
			last, epoch = -1, -1
		case prevDst != ([16]byte{}) && prevDst != r.dst.TopicID:
			return anchor{}, r.mismatch(last+1, dstEnd, fmt.Errorf("%w: destination topic %s has topic id %s, but offsets up to %d were mirrored into topic id %s: it was deleted and created again, not by a rebuild of mirror %s",
				ErrDestinationLost, r.topic, TopicIDString(r.dst.TopicID), last, TopicIDString(prevDst), r.deps.Mirror))
		}
	}
	if last < 0 || fb.offset > last {
		if fb.offset >= dstEnd {
			// In a failback the destination was the forward mirror's
			// source; missing what the forward mirror copied (it was
			// rebuilt, or lost records) is no loss: the source has
			// them. What it holds is compared from its last batch.
			return anchor{offset: dstEnd - 1, epoch: -1}, nil
		}
		return fb, nil
	}
	return anchor{offset: last, epoch: epoch}, nil
}

// checkSourceEpoch asks the source where the epoch of the last mirrored
// batch ends (OffsetForLeaderEpoch), at every alignment with an anchor, so
// an unclean election during a pause or a downtime is found. A source that ends it below what was
// mirrored lost those records in an unclean leader election, and may have
// written others at the same offsets since.
func (r *Runner) checkSourceEpoch(ctx context.Context, a anchor, srcStart int64) error {
	if a.offset < 0 || a.epoch < 0 || a.offset < srcStart {
		return nil
	}
	mirrored := a.offset + 1
	var req kadm.OffsetForLeaderEpochRequest
	req.Add(r.topic, r.partition, a.epoch)
	resp, err := r.deps.Source.OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		return fmt.Errorf("source offset for leader epoch %s/%d: %w", r.topic, r.partition, err)
	}
	o, ok := resp[r.topic][r.partition]
	if !ok || o.Err != nil || o.EndOffset < 0 {
		return nil // the source cannot say (epoch unknown to it): nothing to compare
	}
	if o.EndOffset < mirrored {
		return &ULEError{Topic: r.topic, Partition: r.partition, Epoch: a.epoch, SourceEnd: o.EndOffset, Mirrored: mirrored}
	}
	return nil
}

// fence is EPOCH_FENCING: acquire the partition's writer identity with a
// bumped epoch, so any older owner is fenced at the broker, then check that
// nobody wrote to the destination since alignment.
func (r *Runner) fence(ctx context.Context) error {
	if err := r.initWriter(ctx); err != nil {
		return err
	}
	// The guard goes on before the check: from then on nobody else writes.
	if err := r.deps.Dest.GuardTopic(ctx, r.topic, false); err != nil {
		return err
	}
	_, end, err := r.deps.Dest.Offsets(ctx, r.topic, r.partition)
	if err != nil {
		return err
	}
	switch {
	case end > r.pos:
		// Not yet a foreign write: on a broker whose high watermark
		// trails its log end, the end alignment read can be below a
		// batch of kmirror's own (an append whose answers were lost)
		// that the followers have copied since. Alignment again
		// verifies what lies there: kmirror's batches, identical to the
		// source's, are adopted; anything else fails there, with the
		// offsets.
		return fmt.Errorf("%w: %s/%d: the destination log end moved from %d to %d while the writer was fenced", errRealign, r.topic, r.partition, r.pos, end)
	case end < r.pos:
		return r.foreignWrite(r.pos, end, "its log end after the writer was fenced")
	}
	return nil
}
