package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/txn"
)

// idleTxnProducer is how long a mapped producer with no open transaction
// stays in memory.
const idleTxnProducer = 10 * time.Minute

// markerTimeout bounds the wait for a mirrored transaction's marker.
const markerTimeout = 60 * time.Second

// mapper returns the partition's transaction mapper, creating it (and
// continuing the transactions of the partition record) on first use.
func (r *Runner) mapper(ctx context.Context) (*txn.Mapper, error) {
	if r.txm != nil {
		return r.txm, nil
	}
	m, err := r.newMapper(ctx)
	if err != nil {
		if m == nil {
			return nil, err
		}
		if err = r.forgetOwnAborts(ctx, m, err); err != nil {
			return nil, r.txnError(err)
		}
	}
	r.useMapper(m)
	return m, nil
}

// stopMapper is mapper for a stop, which must not wait on the source
// (DESIGN §5.1): the transactions the restore finds aborted on the
// destination are not compared with the source (forgetOwnAborts fetches
// the marker's offset there, which a stop with the source away retried for
// as long as the outage lasted). Whether such an abort was kmirror's own
// mirrored one, issued just before the engine died, or the coordinator's
// on its timeout, the transaction is aborted on the destination, which is
// all the stop needs: the mapper keeps the producer listed, aborted, so
// AbortAll skips it and the stop records where it began (StopAborted).
// kept is false then: the partition record keeps listing those producers,
// and the next alignment, which reads the source anyway, tells the two
// kinds of abort apart.
func (r *Runner) stopMapper(ctx context.Context) (m *txn.Mapper, kept bool, err error) {
	if r.txm != nil {
		return r.txm, true, nil
	}
	m, err = r.newMapper(ctx)
	if m == nil {
		return nil, false, err
	}
	if err == nil {
		r.useMapper(m)
		return m, true, nil
	}
	for _, e := range flatten(err) {
		if !errors.Is(e, txn.ErrAbortedByCoordinator) {
			return nil, false, r.txnError(err)
		}
	}
	return m, false, nil
}

// newMapper makes the partition's transaction mapper and continues the
// transactions of the partition record with it: m is nil when it could
// not be made (err says why), and err is otherwise Restore's.
func (r *Runner) newMapper(ctx context.Context) (*txn.Mapper, error) {
	timeout, err := r.deps.Dest.TxnTimeout(ctx)
	if err != nil {
		return nil, err
	}
	m := txn.New(txn.Config{
		Mirror: r.deps.Mirror, Topic: r.topic, Partition: r.partition, TopicID: r.dst.TopicID,
		Client: r.deps.Dest.Client(), TxnTimeout: timeout, Now: r.deps.Now, Jitter: r.deps.Jitter, Logger: r.deps.Log,
	})
	// Restoring, like every transaction request below, bumps or ends a
	// mapped producer: not for an instance the group may have replaced.
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return nil, err
	}
	return m, m.Restore(ctx, r.restoredTxns())
}

// useMapper makes m the partition's transaction mapper; the producers of
// the partition record are its own from then on.
func (r *Runner) useMapper(m *txn.Mapper) {
	r.txm = m
	r.stats.setTxns(true)
	if r.rare != nil {
		r.rare.restoredTxns = nil
	}
}

// forgetOwnAborts settles the transactions a restore found aborted on the
// destination: when the source holds the same producer's abort marker at
// that offset, the abort was kmirror's own mirrored one, issued just before
// the engine died and not yet recorded; the producer is forgotten and
// mirroring goes on. Any other abort is the destination's doing and stays
// an error.
func (r *Runner) forgetOwnAborts(ctx context.Context, m *txn.Mapper, err error) error {
	var rest []error
	for _, e := range flatten(err) {
		var ab *txn.AbortedByCoordinatorError
		if !errors.As(e, &ab) || ab.MarkerOffset < 0 {
			rest = append(rest, e)
			continue
		}
		h, b, ferr := r.sourceBatchAt(ctx, ab.MarkerOffset)
		if ferr != nil {
			return ferr
		}
		if h.BaseOffset == ab.MarkerOffset && h.IsControl() && h.ProducerID == ab.SourcePID {
			if commit, cerr := txn.ParseControl(b); cerr == nil && !commit {
				m.Forget(ab.SourcePID)
				r.emit(partition.SeverityInfo, fmt.Sprintf("mirrored abort at offset %d was already on the destination before the restart", ab.MarkerOffset))
				continue
			}
		}
		rest = append(rest, e)
	}
	return errors.Join(rest...)
}

// flatten lists the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			if _, isJoin := e.(interface{ Unwrap() []error }); isJoin {
				//nolint:errorlint // e itself, not its chain: an abort by the coordinator is a join kept whole
				if _, isAborted := e.(*txn.AbortedByCoordinatorError); !isAborted {
					out = append(out, flatten(e)...)
					continue
				}
			}
			out = append(out, e)
		}
		return out
	}
	return []error{err}
}

// sourceBatchAt fetches the source batch holding offset (or the first one
// after it); b is nil when the source has none.
func (r *Runner) sourceBatchAt(ctx context.Context, offset int64) (batch.Header, []byte, error) {
	bs, err := r.sourceBatches(ctx, offset)
	if err != nil || len(bs) == 0 {
		return batch.Header{}, nil, err
	}
	return bs[0].h, bs[0].b, nil
}

// issueTxn appends a data batch of a source transaction through the mapped
// destination transactional producer.
func (r *Runner) issueTxn(ctx context.Context, h batch.Header, b []byte) (inflight, error) {
	m, err := r.mapper(ctx)
	if err != nil {
		return inflight{}, err
	}
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return inflight{}, err
	}
	w, id, err := m.Writer(ctx, h)
	if err != nil {
		return inflight{}, r.txnError(err)
	}
	// A batch that could not be sent is resent by complete, which tells
	// the mapper (ProduceFailed) only if it never lands.
	f := r.issueAs(ctx, w, &id, b, h.BaseOffset, h.LastOffsetDelta+1, h.LeaderEpoch, h.MaxTimestamp)
	hc := h
	f.txn = &hc
	r.persistTxnsIfChanged(ctx)
	return f, nil
}

// appendControl reproduces a source commit or abort marker: the mapped
// producer ends its transaction the same way and the marker must land at the
// source marker's offset before anything else is appended.
func (r *Runner) appendControl(ctx context.Context, h batch.Header, b []byte) error {
	if err := r.drain(ctx); err != nil {
		return err
	}
	commit, err := txn.ParseControl(b)
	if err != nil {
		return r.Failuref("%w: control batch at %d: %w", ErrBadSourceBatch, h.BaseOffset, err)
	}
	m, err := r.mapper(ctx)
	if err != nil {
		return err
	}
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	if err := m.End(ectx, h, commit, h.BaseOffset); err != nil {
		if ectx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w: marker at %d did not land within %s", errRealign, h.BaseOffset, markerTimeout)
		}
		return r.txnError(err)
	}
	r.pos, r.acked = h.NextOffset(), h.NextOffset()
	r.landed(h.BaseOffset, r.pos, h.LeaderEpoch, int64(len(b)), h.MaxTimestamp, false)
	r.persistTxnsIfChanged(ctx)
	return r.maybeDelete(ctx)
}

// persistTxnsIfChanged rewrites the partition record when the set of open
// mirrored transactions changed, so a restart continues them.
func (r *Runner) persistTxnsIfChanged(ctx context.Context) {
	n := 0
	for _, p := range r.openTxnProducers() {
		if p.Open {
			n++
		}
	}
	r.stats.setOpenTxns(n)
	if int32(n) != r.openTxns {
		r.openTxns = int32(n)
		r.persistStatus(ctx, r.st)
	}
}

// txnError classifies a transaction mapper failure.
func (r *Runner) txnError(err error) error {
	switch {
	case errors.Is(err, txn.ErrAbortedByCoordinator):
		ta := &TxnAbortedError{Topic: r.topic, Partition: r.partition, At: -1, Err: err}
		var ab *txn.AbortedByCoordinatorError
		if errors.As(err, &ab) {
			ta.TxnID, ta.At = ab.TxnID, ab.MarkerOffset
		}
		return ta
	case errors.Is(err, txn.ErrMarkerMisplaced):
		return r.Failuref("%w: %w", ErrForeignWrite, err)
	case errors.Is(err, txn.ErrLoneMarker), errors.Is(err, txn.ErrUnsupported):
		return r.Failuref("%w: %w", ErrUnsupported, err)
	case errors.Is(err, txn.ErrBadControl):
		return r.Failuref("%w: %w", ErrBadSourceBatch, err)
	case errors.Is(err, errRealign):
		return err
	}
	return fmt.Errorf("%w: %w", errRealign, err)
}

// abortOpen aborts every open mirrored transaction and waits for the
// markers (stop/failover). Transactions the destination already aborted
// are aborted all the same. It needs only the destination (stopMapper).
func (r *Runner) abortOpen(ctx context.Context) error {
	if r.txm == nil && len(r.restoredTxns()) == 0 {
		return nil
	}
	m, kept, err := r.stopMapper(ctx)
	if err != nil {
		return err
	}
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return err
	}
	// Where each open transaction began: A may have committed what B
	// now aborts, and a failback must know from where (StopAborted).
	open := m.Open()
	actx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	n, err := m.AbortAll(actx)
	var first []int64
	for _, p := range open {
		if p.FirstOffset < 0 || slices.Contains(first, p.FirstOffset) {
			continue
		}
		// A commit of ours whose answer the stop cut off is committed
		// on B as on A: nothing of it is lost.
		if committed, cerr := m.Committed(actx, p.PID, p.FirstOffset); cerr == nil && committed {
			continue
		}
		first = append(first, p.FirstOffset)
	}
	if len(first) > 0 {
		rare := r.rarely()
		rare.stopAborted = append(rare.stopAborted, first...)
		slices.Sort(rare.stopAborted)
		rare.stopAborted = slices.Compact(rare.stopAborted)
	}
	if !kept {
		// What the destination aborted before the stop stays in the
		// record as it was (stopMapper); what the stop aborted is closed.
		r.rarely().restoredTxns = m.Open()
	}
	if err != nil && !errors.Is(err, txn.ErrAbortedByCoordinator) {
		return fmt.Errorf("abort open mirrored transactions: %w", err)
	}
	if n > 0 {
		r.emit(partition.SeverityWarn, fmt.Sprintf("aborted %d open mirrored transactions", n))
	}
	r.persistTxnsIfChanged(ctx)
	return nil
}

// warnPausedTxns tells the operator, when the partition pauses with
// mirrored transactions open, when the destination will abort them: past
// that deadline the partition can only be rebuilt (TxnAbortedError).
func (r *Runner) warnPausedTxns(ctx context.Context) {
	if r.txm == nil || len(r.txm.Open()) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	at, n, err := r.txm.Deadline(dctx)
	when := "at " + at.Local().Format("15:04:05 MST")
	if at.IsZero() {
		when = fmt.Sprintf("once the destination's transaction.max.timeout.ms has passed since each began (the coordinator did not say when: %v)", err)
	}
	r.emit(partition.SeverityWarn, fmt.Sprintf(
		"paused with %d open mirrored transactions: they will be aborted by the destination %s unless resumed and ended by the source before then; after that the partition fails and needs --recover --rebuild",
		n, when))
}

// gapKey is the key of the tombstones that stand in for records missing
// from the source (mirror.gap.policy=fill).
var gapKey = []byte("__kmirror_gap")

// fillGap appends tombstones under gapKey for the offsets from the
// destination position up to to, which the source no longer holds.
func (r *Runner) fillGap(ctx context.Context, to, ts int64) error {
	if !r.deps.GapFill {
		return r.Failuref("%w: source offsets %d..%d are missing (compacted or deleted); set mirror.gap.policy=fill to mirror with tombstone fillers", ErrGap, r.pos, to-1)
	}
	// The tombstones stand for offsets the source says it has: a batch
	// beyond its high watermark would make kmirror write offsets the
	// source never held, as many as the header claims.
	if r.srcHWM >= 0 && to > r.srcHWM {
		return r.Failuref("%w: %s/%d: batch at offset %d is beyond the source's high watermark %d (a gap fill goes no further)", ErrBadSourceBatch, r.topic, r.partition, to, r.srcHWM)
	}
	for r.pos < to {
		n := min(to-r.pos, fillerRecords)
		recs := make([]batch.Record, n)
		for i := range recs {
			recs[i].Key = gapKey
		}
		b, err := batch.Build(zstdCodec, ts, r.writer, recs)
		if err != nil {
			return err
		}
		if err := r.makeRoom(ctx); err != nil {
			return err
		}
		r.inflight = append(r.inflight, r.issue(ctx, b, r.pos, int32(n), -1, 0))
		r.pos += n
	}
	return nil
}

// rebuildGapBatch rebuilds a compacted batch whose records do not fill its
// offset range: tombstones under gapKey take the missing offsets. These are
// the only batches kmirror ever recompresses; they are counted as fillers.
func (r *Runner) rebuildGapBatch(h batch.Header, b []byte) ([]byte, error) {
	if !r.deps.GapFill {
		return nil, r.Failuref("%w: batch at offset %d holds %d records for %d offsets (compacted); set mirror.gap.policy=fill to mirror with tombstone fillers", ErrGap, h.BaseOffset, h.RecordCount, h.LastOffsetDelta+1)
	}
	span := int64(h.LastOffsetDelta) + 1
	switch {
	case span > MaxGapBatchRecords || span <= 0:
		return nil, r.Failuref("%w: %s/%d: batch at offset %d claims %d offsets, more than the %d a rebuilt batch may cover", ErrBadSourceBatch, r.topic, r.partition, h.BaseOffset, span, MaxGapBatchRecords)
	case r.srcHWM >= 0 && h.NextOffset() > r.srcHWM:
		return nil, r.Failuref("%w: %s/%d: batch at offset %d ends at %d, beyond the source's high watermark %d", ErrBadSourceBatch, r.topic, r.partition, h.BaseOffset, h.NextOffset(), r.srcHWM)
	case h.RecordCount < 0 || int64(h.RecordCount) > span:
		return nil, r.Failuref("%w: %s/%d: batch at offset %d holds %d records for %d offsets", ErrBadSourceBatch, r.topic, r.partition, h.BaseOffset, h.RecordCount, span)
	}
	raw, err := decompressBounded(h.Codec(), b[batch.HeaderSize:], MaxGapBatchBytes)
	if errors.Is(err, errTooLarge) {
		return nil, r.Failuref("%w: %s/%d: batch at offset %d decompresses to more than %d bytes, the bound of a rebuilt batch", ErrBadSourceBatch, r.topic, r.partition, h.BaseOffset, MaxGapBatchBytes)
	}
	if err != nil {
		return nil, r.Failuref("%w: decompress batch at %d: %w", ErrBadSourceBatch, h.BaseOffset, err)
	}
	// Every record takes at least 7 bytes: a count beyond that is a lie,
	// and no allocation follows it.
	if int64(h.RecordCount)*7 > int64(len(raw)) {
		return nil, r.Failuref("%w: %s/%d: batch at offset %d claims %d records in %d bytes", ErrBadSourceBatch, r.topic, r.partition, h.BaseOffset, h.RecordCount, len(raw))
	}
	byDelta := make(map[int32]kmsg.Record, h.RecordCount)
	for i := int32(0); i < h.RecordCount; i++ {
		var rec kmsg.Record
		if err := rec.ReadFrom(raw); err != nil {
			return nil, r.Failuref("%w: record %d of batch at %d: %w", ErrBadSourceBatch, i, h.BaseOffset, err)
		}
		raw = raw[len(rec.AppendTo(nil)):]
		if rec.OffsetDelta < 0 || int64(rec.OffsetDelta) >= span {
			return nil, r.Failuref("%w: record %d of batch at %d has offset delta %d outside its %d offsets", ErrBadSourceBatch, i, h.BaseOffset, rec.OffsetDelta, span)
		}
		byDelta[rec.OffsetDelta] = rec
	}
	recs := make([]batch.Record, h.LastOffsetDelta+1)
	var ts int64
	for d := range recs {
		if rec, ok := byDelta[int32(d)]; ok {
			ts = rec.TimestampDelta64
			recs[d] = batch.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers, TimestampDelta: ts}
		} else {
			recs[d] = batch.Record{Key: bytes.Clone(gapKey), TimestampDelta: ts}
		}
	}
	nb, err := batch.Build(codecOf(h.Codec()), h.BaseTimestamp, batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		return nil, err
	}
	// Keep the source's transactional bit; Build wrote a plain batch. The
	// writer identity and the CRC are set when the batch is issued.
	nb[22] |= b[22] & batch.AttrTransactional
	r.stats.addFiller()
	return nb, nil
}

func codecOf(id int8) kgo.CompressionCodec {
	switch id {
	case 1:
		return kgo.GzipCompression()
	case 2:
		return kgo.SnappyCompression()
	case 3:
		return kgo.Lz4Compression()
	case 4:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}
