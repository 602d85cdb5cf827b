package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kmirror/kmirror/engine/batch"
)

// Restore loads persisted producers (from Open) into a new Mapper after an
// engine restart, before the partition's runner reads the destination log
// end and appends again.
//
// A producer with an open transaction is continued with its persisted
// producer id and epoch, never re-initialised: InitProducerID on its
// transactional id would abort the open transaction and write a marker the
// source does not have. Its next sequence and first offset are re-read from
// the destination partition (DescribeProducers) and preferred over the
// persisted ones, which may be older than the last append. Producers without
// an open transaction are not loaded; they are recreated on demand.
//
// If the coordinator no longer holds a persisted transaction open (the engine
// was down longer than the transaction timeout), Restore returns
// *AbortedByCoordinatorError for it (joined with the others' errors), and
// Writer and End keep returning it for that source producer. If the
// transaction was committed (the coordinator says CompleteCommit, or its
// marker on the partition is a commit), the commit was kmirror's own, issued
// before the state was persisted again: that producer is simply closed. An
// abort of kmirror's own in that window cannot be told from the coordinator's
// by the destination alone; the error's MarkerOffset lets the caller compare
// with the source and Forget the producer when the source has the same abort
// marker there.
func (m *Mapper) Restore(ctx context.Context, ps []Producer) error {
	now := m.cfg.Now()
	for _, s := range ps {
		if !s.Open {
			continue
		}
		if want := TxnID(m.cfg.Mirror, m.cfg.Topic, m.cfg.Partition, s.SourcePID); s.TxnID != want {
			return fmt.Errorf("restore %s/%d: persisted producer %q does not belong here (want %q)", m.cfg.Topic, m.cfg.Partition, s.TxnID, want)
		}
		m.producers[s.SourcePID] = &producer{Producer: s, lastUsed: now}
	}
	return m.Resync(ctx)
}

// committed reports that p's transaction ended with a commit marker on the
// partition, which only kmirror's own EndTxn writes.
func (m *Mapper) committed(ctx context.Context, p *producer) bool {
	if p.FirstOffset < 0 {
		return false
	}
	at, commit, err := m.searchMarker(ctx, p.PID, p.FirstOffset)
	return err == nil && at >= 0 && commit
}

// Forget drops the producer mapped to sourcePID, with any sticky
// *AbortedByCoordinatorError. Use it only once the destination is known to
// agree with the source, e.g. the source holds an abort marker of sourcePID
// at the error's MarkerOffset (kmirror's own abort just before a crash).
func (m *Mapper) Forget(sourcePID int64) { delete(m.producers, sourcePID) }

// ProduceFailed tells the Mapper that the append of transactional batch h
// failed with err (a Produce error or a lost connection). The sequences it
// reserved may or may not have been used, so the Mapper resynchronises from
// the destination before its next Writer or End. When err shows the
// coordinator no longer holds the transaction (INVALID_PRODUCER_EPOCH,
// PRODUCER_FENCED, INVALID_TXN_STATE, ...) and the coordinator confirms it,
// ProduceFailed returns *AbortedByCoordinatorError; otherwise err itself.
func (m *Mapper) ProduceFailed(ctx context.Context, h batch.Header, err error) error {
	m.stale = true
	p := m.producers[h.ProducerID]
	if p == nil || p.aborted != nil {
		return err
	}
	return m.classify(ctx, p, err)
}

// Resync re-reads the state of every open mapped transaction from the
// destination: the coordinator must still hold it open, and the partition
// leader gives the next sequence and the transaction's first offset. Restore
// calls it, and Writer and End call it after ProduceFailed; the caller may
// call it after realigning for any other reason.
func (m *Mapper) Resync(ctx context.Context) error {
	m.stale = false
	var open []*producer
	for _, p := range m.producers {
		if p.Open && p.aborted == nil {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return nil
	}
	slices.SortFunc(open, func(a, b *producer) int { return cmp.Compare(a.SourcePID, b.SourcePID) })
	if _, err := m.joinMode(ctx); err != nil {
		m.stale = true
		return err
	}
	aps, err := m.describeProducers(ctx)
	if err != nil {
		m.stale = true
		return err
	}
	var errs []error
	for _, p := range open {
		d, err := m.settle(ctx, p.TxnID)
		if err != nil {
			m.stale = true
			return errors.Join(append(errs, err)...)
		}
		switch {
		case d.ongoingFor(p):
			m.applyPartitionState(p, aps)
		case d.state == stateCompleteCommit && d.pid == p.PID:
			delete(m.producers, p.SourcePID) // our own commit, already landed
		case m.committed(ctx, p):
			delete(m.producers, p.SourcePID) // the same, on a broker that says Empty
		default:
			errs = append(errs, m.abortedErr(ctx, p, stateMismatch(d, p)))
		}
	}
	return errors.Join(errs...)
}

func (m *Mapper) resyncIfStale(ctx context.Context) error {
	if !m.stale {
		return nil
	}
	return m.Resync(ctx)
}

// resyncOne reads the partition state of one adopted producer.
func (m *Mapper) resyncOne(ctx context.Context, p *producer, aps map[int64]activeProducer) error {
	if _, err := m.joinMode(ctx); err != nil {
		return err
	}
	if aps == nil {
		var err error
		if aps, err = m.describeProducers(ctx); err != nil {
			return err
		}
	}
	m.applyPartitionState(p, aps)
	return nil
}

// applyPartitionState takes p's next sequence and transaction start from
// the partition leader when it holds state for p's current epoch. Without
// such state p has written nothing in this epoch that the leader kept, and
// what kmirror holds stands.
func (m *Mapper) applyPartitionState(p *producer, aps map[int64]activeProducer) {
	ap, ok := aps[p.PID]
	if !ok || ap.epoch != p.Epoch {
		return
	}
	switch {
	case ap.txnStart < 0 && m.epochPerTxn:
		// The open transaction has no data here yet and began with a new
		// epoch: its sequences start at 0, whatever the partition still
		// remembers of the previous epoch's (kfake reports that one).
		p.NextSeq = 0
	case ap.lastSequence >= 0:
		p.NextSeq = nextSequence(ap.lastSequence, 1)
	default:
		p.NextSeq = 0
	}
	p.FirstOffset = ap.txnStart
	if p.FirstOffset < -1 {
		p.FirstOffset = -1
	}
}
