package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/internal/backoff"
)

// pollPolicy paces the wait for a marker: the first look comes almost at
// once (kfake and a healthy cluster write markers within milliseconds), later
// ones back off so a slow coordinator is not hammered.
var pollPolicy = backoff.Policy{Initial: 4 * time.Millisecond, Max: 200 * time.Millisecond}

// End mirrors one source control batch h (a commit or abort marker of source
// producer h.ProducerID at source offset markerOffset): it ends the mapped
// producer's destination transaction with the same outcome and waits until
// the marker has landed, i.e. the destination log end is markerOffset+1.
//
// The caller must have nothing in flight on the partition and the
// destination log end must be markerOffset: End checks it before EndTxn and
// returns a *MarkerError otherwise, as it does when the log end after EndTxn
// is anything but markerOffset+1. Real brokers write markers asynchronously
// after EndTxn returns, so End polls the log end, bounded by ctx (give it a
// deadline). A transaction the coordinator already aborted on its own is
// reported as *AbortedByCoordinatorError.
//
// End is safe to repeat: when the destination already holds a marker of the
// mapped producer with the same outcome at markerOffset and nothing after it
// (an earlier End that gave up waiting, an EndTxn whose answer was lost, or
// the coordinator's own abort of a transaction the source aborted too), End
// returns nil and writes nothing.
//
// A marker with no open mirrored transaction behind it (the source's data
// batches lie before the mirror's start, or the source transaction added
// the partition and never wrote to it) is still reproduced: End opens an
// empty transaction on the partition with AddPartitionsToTxn and ends it,
// which makes the coordinator write exactly one marker, as the source's did.
// Only a destination that cannot add a partition without a write (no client
// form of AddPartitionsToTxn) cannot do that; End then returns an error
// matching ErrLoneMarker and writes nothing, and the partition must fail.
func (m *Mapper) End(ctx context.Context, h batch.Header, commit bool, markerOffset int64) error {
	if !h.IsControl() {
		return fmt.Errorf("%s/%d end transaction at %d: %w", m.cfg.Topic, m.cfg.Partition, h.BaseOffset, ErrNotControl)
	}
	if err := m.resyncIfStale(ctx); err != nil {
		return err
	}
	p, err := m.producerFor(ctx, h.ProducerID)
	if err != nil {
		return err
	}
	if p.aborted != nil {
		return p.aborted
	}
	if p.Open {
		// The coordinator may have ended the transaction already: an EndTxn
		// of ours whose answer was lost, or an abort on its own (whose
		// marker also explains a wrong log end). An EndTxn abort would then
		// pass as a retry of that abort without writing a marker, so ask.
		d, err := m.describeTxn(ctx, p.TxnID)
		if err != nil {
			return err
		}
		if !d.ongoingFor(p) {
			if ok, err := m.landed(ctx, p, commit, markerOffset); err != nil || ok {
				if ok {
					// Consistent with the source, whoever wrote it. The
					// producer's epoch moved on: initialise it afresh
					// next time, which is safe now nothing is open.
					delete(m.producers, p.SourcePID)
				}
				return err
			}
			return m.abortedErr(ctx, p, stateMismatch(d, p))
		}
	} else {
		// A marker of this producer may still be on its way (an earlier End
		// gave up waiting for it): let it land, and if it is this very
		// marker, End is done; a second marker is never written.
		if _, err := m.settle(ctx, p.TxnID); err != nil {
			return err
		}
		if ok, err := m.landed(ctx, p, commit, markerOffset); err != nil || ok {
			return err
		}
	}
	end, err := m.logEnd(ctx)
	if err != nil {
		return err
	}
	if end != markerOffset {
		return &MarkerError{Topic: m.cfg.Topic, Partition: m.cfg.Partition, TxnID: p.TxnID, Expected: markerOffset, Actual: end}
	}
	if !p.Open {
		mode, err := m.joinMode(ctx)
		if err != nil {
			return err
		}
		if mode != addExplicit {
			return fmt.Errorf("%w: %s/%d marker of source producer %d at offset %d: the destination cannot open a transaction without data",
				ErrLoneMarker, m.cfg.Topic, m.cfg.Partition, h.ProducerID, markerOffset)
		}
		if err := m.begin(ctx, p); err != nil {
			return err
		}
	}
	return m.finish(ctx, p, commit, markerOffset)
}

// landed reports whether the marker End is asked for is already on the
// destination: the log end is markerOffset+1 and the batch at markerOffset
// is a control batch of p's producer id with the same outcome.
func (m *Mapper) landed(ctx context.Context, p *producer, commit bool, markerOffset int64) (bool, error) {
	end, err := m.logEnd(ctx)
	if err != nil || end != markerOffset+1 {
		return false, err
	}
	at, c, err := m.searchMarker(ctx, p.PID, markerOffset)
	if err != nil {
		return false, fmt.Errorf("check marker of %s at %d: %w", p.TxnID, markerOffset, err)
	}
	return at == markerOffset && c == commit, nil
}

// finish ends p's open transaction and waits for its marker at markerOffset.
func (m *Mapper) finish(ctx context.Context, p *producer, commit bool, markerOffset int64) error {
	pid, epoch, err := m.endTxn(ctx, p, commit)
	if err != nil {
		return m.classify(ctx, p, err)
	}
	p.Open, p.FirstOffset = false, -1
	if pid != p.PID || epoch != p.Epoch {
		// A new epoch (transaction version 2) starts its sequences at zero.
		p.PID, p.Epoch, p.NextSeq = pid, epoch, 0
	}
	p.lastUsed = m.cfg.Now()
	return m.waitMarker(ctx, p, markerOffset)
}

// waitMarker polls until the destination log end is markerOffset+1 and the
// coordinator has finished writing p's markers. A log end beyond that means
// something else landed too.
func (m *Mapper) waitMarker(ctx context.Context, p *producer, markerOffset int64) error {
	b := backoff.Backoff{Policy: pollPolicy}
	for {
		end, err := m.logEnd(ctx)
		if err != nil {
			return fmt.Errorf("wait for marker of %s at %d: %w", p.TxnID, markerOffset, err)
		}
		if end > markerOffset+1 {
			return &MarkerError{Topic: m.cfg.Topic, Partition: m.cfg.Partition, TxnID: p.TxnID, Expected: markerOffset + 1, Actual: end, Sent: true}
		}
		if end == markerOffset+1 {
			// The log end alone could be a foreign record while the marker
			// is still on its way; the coordinator leaves its prepare state
			// only once every marker is written.
			d, err := m.describeTxn(ctx, p.TxnID)
			if err != nil {
				return fmt.Errorf("wait for marker of %s at %d: %w", p.TxnID, markerOffset, err)
			}
			if !d.state.pending() {
				return nil
			}
		}
		if err := backoff.Sleep(ctx, b.Next(m.cfg.Jitter)); err != nil {
			return fmt.Errorf("wait for marker of %s at %d (destination log end %d): %w", p.TxnID, markerOffset, end, err)
		}
	}
}

// AbortAll aborts every open mirrored transaction of the partition and waits
// for each marker (one record each) before the next; it returns how many it
// aborted. Stop and failover use it so that no destination transaction is
// left hanging (pinning the last stable offset until its timeout). The caller
// must have nothing in flight. Transactions the coordinator had already
// aborted are skipped and reported in the returned error, after the others
// were aborted; any other failure stops at once.
func (m *Mapper) AbortAll(ctx context.Context) (aborted int, err error) {
	if err := m.resyncIfStale(ctx); err != nil && !errors.Is(err, ErrAbortedByCoordinator) {
		return 0, err
	}
	var errs []error
	for _, s := range m.Open() {
		p := m.producers[s.SourcePID]
		if p.aborted != nil {
			errs = append(errs, p.aborted)
			continue
		}
		end, err := m.logEnd(ctx)
		if err != nil {
			return aborted, errors.Join(append(errs, err)...)
		}
		d, err := m.describeTxn(ctx, p.TxnID)
		if err != nil {
			return aborted, errors.Join(append(errs, err)...)
		}
		if !d.ongoingFor(p) {
			errs = append(errs, m.abortedErr(ctx, p, stateMismatch(d, p)))
			continue
		}
		if err := m.finish(ctx, p, false, end); err != nil {
			if errors.Is(err, ErrAbortedByCoordinator) {
				errs = append(errs, err)
				continue
			}
			return aborted, errors.Join(append(errs, err)...)
		}
		aborted++
	}
	return aborted, errors.Join(errs...)
}

// classify turns the errors with which a broker refuses a mapped producer's
// transaction (an old epoch, a fenced producer, a transaction that is not
// open) into *AbortedByCoordinatorError when the coordinator confirms that
// the transaction kmirror holds open is gone; other errors pass through.
func (m *Mapper) classify(ctx context.Context, p *producer, err error) error {
	if !p.Open || !txnRefusal(err) {
		return err
	}
	d, derr := m.describeTxn(ctx, p.TxnID)
	if derr != nil {
		return errors.Join(err, derr)
	}
	if d.ongoingFor(p) {
		return err
	}
	return m.abortedErr(ctx, p, fmt.Errorf("%w (%w)", err, stateMismatch(d, p)))
}

// txnRefusal reports broker errors that mean the producer's transaction is
// not the one the coordinator holds.
func txnRefusal(err error) bool {
	for _, e := range []error{kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState,
		kerr.InvalidProducerIDMapping, kerr.TransactionAbortable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// stateMismatch describes a coordinator state that is not p's open
// transaction.
func stateMismatch(d txnDesc, p *producer) error {
	return fmt.Errorf("coordinator reports %s for producer %d epoch %d; kmirror holds producer %d epoch %d open",
		d.state, d.pid, d.epoch, p.PID, p.Epoch)
}

// abortedErr records that p's transaction was aborted by the coordinator and
// returns the sticky error. The producer stays listed as open, so persisted
// state keeps saying so and a restart reports the same failure.
func (m *Mapper) abortedErr(ctx context.Context, p *producer, cause error) *AbortedByCoordinatorError {
	at := int64(-1)
	if p.FirstOffset >= 0 {
		at = m.locateMarker(ctx, p.PID, p.FirstOffset)
	}
	p.aborted = &AbortedByCoordinatorError{
		Topic: m.cfg.Topic, Partition: m.cfg.Partition, TxnID: p.TxnID, SourcePID: p.SourcePID,
		MarkerOffset: at, Cause: cause,
	}
	return p.aborted
}
