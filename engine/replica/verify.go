package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/txn"
)

// Verification: the contract of alignment.
//
// The destination's log end proves nothing by itself: a foreign producer, a
// zombie owner, or a topic that held other data can leave records there at
// offsets that line up with the source's. So every entry into mirroring
// (first start, resume, restart, takeover, recover, failback, realign)
// verifies the destination against the source from the anchor, the last
// offset known to be mirrored (the LME: checkpointed in __mirror_state, or
// the forward mirror's in a failback):
//
//   - end == anchor+1: the batch holding the anchor is compared on both
//     sides;
//   - end > anchor+1: that batch and every batch above it are compared with
//     the source's batch at the same offsets, and the data batches above it
//     must carry the partition's writer identity (appends made after the
//     last checkpoint);
//   - end < anchor+1: the destination lost mirrored records: FAILED;
//   - no anchor and a non-empty destination: every batch is compared, with
//     progress events; identical is adopted, different is FAILED with the
//     first differing offset. Nothing is ever deleted here.
//
// Batches the source no longer has (below its log start) cannot be
// compared: the anchor's own batch and kmirror's fillers are accepted
// there, anything else is not. Comparison rules are batch.Same.

// anchor is the last offset known to be mirrored and its source epoch.
type anchor struct {
	offset int64 // -1: none
	epoch  int32
	start  int64 // verify's result: where the batches of epoch verified begin
}

// rawBatch is one batch of a fetch answer.
type rawBatch struct {
	h batch.Header
	b []byte
}

// verifyProgressEvery spaces the progress events of a long verification.
const verifyProgressEvery = 5 * time.Second

// verify checks the destination partition [dstStart, dstEnd) against the
// source from anchor a on (see the contract above). It returns the last
// offset it verified and that batch's source epoch, or a.offset and
// a.epoch when nothing above the anchor was verified.
func (r *Runner) verify(ctx context.Context, a anchor, dstStart, dstEnd, srcStart int64) (anchor, error) {
	from := dstStart
	if a.offset >= 0 {
		if dstEnd < a.offset+1 {
			return a, r.mismatch(a.offset+1, dstEnd, fmt.Errorf("%w: its log ends at %d, below the %d offsets already mirrored (an unclean leader election on the destination, or the topic deleted and recreated)", ErrDestinationLost, dstEnd, a.offset+1))
		}
		from = max(a.offset, dstStart)
	}
	if from >= dstEnd {
		return a, nil
	}
	adopting := a.offset < 0
	if adopting {
		r.emit(partition.SeverityInfo, fmt.Sprintf("the destination partition already holds offsets %d..%d: verifying them against the source before mirroring into it", dstStart, dstEnd-1))
	}
	v := verifier{r: r, a: a, srcStart: srcStart, dstEnd: dstEnd, adopting: adopting, last: a}
	lastReport := r.deps.Now()
	if adopting {
		// Only an adoption walks a whole log; the batches above an
		// anchor are the few appended after the last checkpoint.
		r.stats.StartWork(WorkAdoption, "", 0, dstEnd-from, lastReport)
		defer r.stats.EndWork(WorkAdoption)
	}
	for off := from; off < dstEnd; {
		dbs, err := r.destBatches(ctx, off)
		if err != nil {
			return a, err
		}
		before := off
		for _, d := range dbs {
			if d.h.BaseOffset >= dstEnd {
				break
			}
			if err := v.check(ctx, d); err != nil {
				return a, err
			}
			off = d.h.NextOffset()
		}
		if off == before {
			return a, fmt.Errorf("%w: verify %s/%d: the destination returned no batch at offset %d below its end %d", errRealign, r.topic, r.partition, off, dstEnd)
		}
		if adopting {
			r.stats.WorkDone(WorkAdoption, off-from)
		}
		if now := r.deps.Now(); adopting && now.Sub(lastReport) >= verifyProgressEvery {
			lastReport = now
			r.emit(partition.SeverityInfo, fmt.Sprintf("verifying the destination: offsets %d..%d of %d..%d identical to the source (%d%%)", from, off-1, from, dstEnd-1, 100*(off-from)/(dstEnd-from)))
		}
	}
	if adopting {
		r.emit(partition.SeverityInfo, fmt.Sprintf("adopted the destination's offsets %d..%d: %d batches identical to the source", from, dstEnd-1, v.compared))
	}
	return v.last, nil
}

// verifier walks the destination's batches in order, keeping the source's
// batches of the last fetch answer.
type verifier struct {
	r        *Runner
	a        anchor
	srcStart int64
	dstEnd   int64
	adopting bool
	src      []rawBatch // the source's batches from the last fetch, in order
	compared int
	last     anchor // the last data batch verified
}

func (v *verifier) mismatch(d rawBatch, reason string) error {
	return &MismatchError{Topic: v.r.topic, Partition: v.r.partition, After: v.a.offset, At: d.h.BaseOffset, End: v.dstEnd,
		ProducerID: d.h.ProducerID, Reason: reason, Adopting: v.adopting}
}

// check verifies one destination batch.
func (v *verifier) check(ctx context.Context, d rawBatch) error {
	r := v.r
	ours := r.writer.ProducerID > 0 && d.h.ProducerID == r.writer.ProducerID
	if d.h.NextOffset() <= v.srcStart {
		// The source deleted these offsets: nothing to compare with.
		switch {
		case v.a.offset >= 0 && d.h.BaseOffset <= v.a.offset:
			return nil // at or below the anchor: mirrored before
		case ours:
			return nil // kmirror's fillers below the source's log start
		}
		return v.mismatch(d, fmt.Sprintf("the source no longer has offsets %d..%d to compare with (its log starts at %d)", d.h.BaseOffset, d.h.LastOffset(), v.srcStart))
	}
	s, ok, err := v.sourceAt(ctx, d.h.BaseOffset)
	if err != nil {
		return err
	}
	if !ok {
		return v.mismatch(d, fmt.Sprintf("the source has no record at offset %d", d.h.BaseOffset))
	}
	if s.h.BaseOffset > d.h.LastOffset() {
		// The source has a gap where the destination has a batch:
		// kmirror's gap fillers (mirror.gap.policy=fill) are the only
		// batches allowed there.
		if ours && r.deps.GapFill {
			return nil
		}
		return v.mismatch(d, fmt.Sprintf("the source has no record at offsets %d..%d", d.h.BaseOffset, d.h.LastOffset()))
	}
	if err := batch.Same(s.h, s.b, d.h, d.b); err != nil {
		return v.mismatch(d, err.Error())
	}
	// Above the anchor only kmirror appended: a plain data batch must
	// carry the partition's writer identity (a transaction's batches and
	// markers carry their mapped producers', compared by content above).
	if !v.adopting && d.h.BaseOffset > v.a.offset && !d.h.IsTransactional() && r.writer.ProducerID > 0 && !ours {
		return v.mismatch(d, fmt.Sprintf("identical records, but not appended by kmirror (its writer is producer id %d)", r.writer.ProducerID))
	}
	v.compared++
	if !s.h.IsControl() {
		start := v.last.start
		if s.h.LeaderEpoch != v.last.epoch || v.last.offset <= v.a.offset {
			start = s.h.BaseOffset
		}
		v.last = anchor{offset: s.h.LastOffset(), epoch: s.h.LeaderEpoch, start: start}
	}
	return nil
}

// sourceAt returns the source batch holding offset, or the first one after
// it when the source has a gap there; ok is false when the source has no
// batch at or after offset.
func (v *verifier) sourceAt(ctx context.Context, offset int64) (rawBatch, bool, error) {
	for i, s := range v.src {
		if s.h.NextOffset() > offset {
			v.src = v.src[i:]
			return s, true, nil
		}
	}
	bs, err := v.r.sourceBatches(ctx, max(offset, v.srcStart))
	if err != nil {
		return rawBatch{}, false, err
	}
	v.src = bs
	for i, s := range v.src {
		if s.h.NextOffset() > offset {
			v.src = v.src[i:]
			return s, true, nil
		}
	}
	return rawBatch{}, false, nil
}

// destBatches reads the destination's batches from offset (the batch
// holding offset first) up to its high watermark, with one raw Fetch to
// the partition's leader.
func (r *Runner) destBatches(ctx context.Context, offset int64) ([]rawBatch, error) {
	for {
		bs, partial, err := r.destFetch(ctx, offset)
		if err != nil || len(bs) > 0 || !partial || r.maxBytes >= maxFetchBytes {
			return bs, err
		}
		r.maxBytes = min(r.maxBytes*2, maxFetchBytes) // one batch is larger than asked for
	}
}

// destFetch is one raw Fetch of destBatches; partial reports an answer
// holding only part of a batch.
func (r *Runner) destFetch(ctx context.Context, offset int64) ([]rawBatch, bool, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = r.maxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = r.topic
	rt.TopicID = r.dst.TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = r.maxBytes
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := r.deps.Dest.Request(ctx, r.dst.Leader, req)
	if err != nil {
		return nil, false, fmt.Errorf("verify %s/%d: fetch from destination broker %d: %w", r.topic, r.partition, r.dst.Leader, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return nil, false, fmt.Errorf("verify %s/%d: destination fetch: %w", r.topic, r.partition, err)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return nil, false, fmt.Errorf("%w: verify %s/%d: malformed destination fetch answer", errRealign, r.topic, r.partition)
	}
	fp := fr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
		return nil, false, fmt.Errorf("verify %s/%d at %d: destination fetch: %w", r.topic, r.partition, offset, err)
	}
	bs, partialAt, err := splitFrom(fp.RecordBatches, offset)
	if err != nil {
		return nil, false, fmt.Errorf("verify %s/%d at %d: destination batch: %w", r.topic, r.partition, offset, err)
	}
	return bs, partialAt >= 0, nil
}

// sourceBatches fetches the source's batches from offset (the batch holding
// offset first) through the partition's fetcher.
func (r *Runner) sourceBatches(ctx context.Context, offset int64) ([]rawBatch, error) {
	r.dropFetch()
	// No LastFetchedEpoch: offset does not follow the last batch
	// appended, and the epoch of that batch would make a broker check a
	// divergence at the wrong place (and answer without records). The
	// answer is waited for even when the source has nothing there.
	r.postAs(ctx, offset, -1, true)
	defer r.dropFetch()
	for {
		var res fetch.Result
		if !r.takeResult(&res) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-r.wakeChan():
				r.woke()
			}
			continue
		}
		if res.Gen != r.gen {
			continue
		}
		if res.Err != nil {
			return nil, res.Err
		}
		bs, partialAt, err := splitFrom(res.Records, offset)
		if err != nil {
			return nil, r.Failuref("%w at %d: %w", ErrBadSourceBatch, offset, err)
		}
		if len(bs) == 0 && partialAt >= 0 && r.maxBytes < maxFetchBytes {
			// One batch is larger than asked for: ask again for more.
			r.maxBytes = min(r.maxBytes*2, maxFetchBytes)
			r.dropFetch()
			r.postAs(ctx, offset, -1, true)
			continue
		}
		return bs, nil
	}
}

// maxFetchBytes bounds how far a partition's fetch size grows to take one
// large batch.
const maxFetchBytes = 64 << 20

// splitFrom returns the batches of records that end after offset.
func splitFrom(records []byte, offset int64) ([]rawBatch, int64, error) {
	var out []rawBatch
	partialAt, err := batch.Split(records, func(h batch.Header, b []byte) error {
		if h.NextOffset() > offset {
			out = append(out, rawBatch{h, b})
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopSplit) {
		return nil, partialAt, err
	}
	return out, partialAt, nil
}

// settleLME moves the LME of a partition this instance never aligned up to
// the destination's log end, over the batches appended after the last
// checkpoint that are the source's records as kmirror mirrored them: plain
// batches of its writer identity (now, or earlierWriter), a mirrored
// transaction's data (its mapped producer ids, txnPIDs, as the partition
// record listed them before the stop), and a commit marker of one of those
// producers (only kmirror's own EndTxn for a source commit writes one). It
// needs only the destination, so a stop with the source gone records the
// offset the destination really holds; their source epoch is not known
// there, so the LME's epoch is then unknown (-1).
//
// An abort marker of a mapped producer is never the LME by itself: the
// stop's own abort of an open transaction (abortOpen, just before) writes
// one, and so does the destination's coordinator when a transaction
// outlived its timeout; neither is a source record, and the destination
// alone cannot tell a mirrored source abort from them. A mirrored batch
// after such a marker moves the LME past it (it landed at the source's
// offset, so the marker was the source's). A batch kmirror did not write
// (a foreign producer's, transactional or not) ends the walk, loudly: the
// LME is the offset of the last source record on the destination (DESIGN
// §5.4, I3), never a marker kmirror wrote itself or a foreign batch.
func (r *Runner) settleLME(ctx context.Context, earlierWriter int64, txnPIDs []int64) {
	last := r.mirrored
	rt, err := r.deps.Dest.Route(ctx, r.topic, r.partition, r.deps.Now())
	if err == nil {
		r.dst = rt
	}
	start, end, err := r.deps.Dest.Offsets(ctx, r.topic, r.partition)
	if err != nil {
		r.emit(partition.SeverityWarn, "stopping: the destination log end is unknown, the recorded last mirrored offset is the last checkpoint's: "+err.Error())
		return
	}
	r.stats.setDestEnd(end)
	ours := last
	for off := max(last+1, start); off < end; {
		before := off
		bs, err := r.destBatches(ctx, off)
		if err != nil || len(bs) == 0 {
			r.emit(partition.SeverityWarn, fmt.Sprintf("stopping: could not read the destination above offset %d (%v): the recorded last mirrored offset is %d", ours, err, ours))
			break
		}
		for _, d := range bs {
			if d.h.BaseOffset >= end {
				break
			}
			kind := r.mirroredBatch(d, earlierWriter, txnPIDs)
			if kind == batchForeign {
				r.emit(partition.SeverityError, fmt.Sprintf("stopping: the destination holds records kmirror did not write after offset %d (first at offset %d, producer id %d); the recorded last mirrored offset is %d",
					ours, d.h.BaseOffset, d.h.ProducerID, ours))
				off = end
				break
			}
			if kind == batchMirrored {
				ours = d.h.LastOffset()
			}
			off = d.h.NextOffset()
		}
		if off == before {
			break
		}
	}
	if ours > last {
		r.verifiedTo(ours, -1, ours)
		r.emit(partition.SeverityInfo, fmt.Sprintf("stopping: last mirrored offset %d read from the destination (checkpoint %d)", ours, last))
	}
}

// settled is what settleLME makes of one destination batch above the
// checkpoint.
type settled int

const (
	batchMirrored settled = iota // a source record as kmirror mirrored it: the LME moves to its end
	batchMarker                  // an abort marker of kmirror's producers: maybe not the source's
	batchForeign                 // not written by kmirror
)

// mirroredBatch classifies d for settleLME.
func (r *Runner) mirroredBatch(d rawBatch, earlierWriter int64, txnPIDs []int64) settled {
	pid := d.h.ProducerID
	writer := pid > 0 && (pid == r.writer.ProducerID || pid == earlierWriter)
	mapped := pid > 0 && d.h.IsTransactional() && slices.Contains(txnPIDs, pid)
	switch {
	case d.h.IsControl() && mapped:
		if commit, err := txn.ParseControl(d.b); err == nil && commit {
			return batchMirrored
		}
		return batchMarker
	case d.h.IsControl() && writer:
		return batchMarker // a fence of the writer identity (an empty transaction aborted)
	case d.h.IsControl():
		return batchForeign
	case mapped, writer && !d.h.IsTransactional():
		return batchMirrored
	}
	return batchForeign
}
