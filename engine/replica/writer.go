package replica

import (
	"context"
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/engine/batch"
)

// TopicWriter is the writer identity (DESIGN §3.3) every partition of one
// topic appends with while this instance owns the topic: the producer id
// and epoch of the topic's transactional id (writerID). Ownership moves a
// topic's partitions together (their records share a shard), so the one
// epoch bump this instance makes when it first fences a partition of the
// topic fences every earlier owner of each of them. An id per partition
// cost an InitProducerID per partition at every start and a transactional
// id per partition on the destination's coordinator.
//
// Each partition numbers its own sequences (a broker keeps them per
// partition). A partition that fences again after appending with the
// identity (alignment after a failed append: its sequence may no longer
// be the broker's) bumps the epoch again; the topic's other partitions
// take the new epoch, with sequences from 0, at their next alignment. A
// broker that checks the coordinator's epoch on every append (the
// in-memory one) sends them there at once with INVALID_PRODUCER_EPOCH
// (Bumped); a real broker learns an epoch on a partition only from an
// append with it and takes their appends with the old one until then.
type TopicWriter struct {
	mu    sync.Mutex
	w     batch.Writer // ProducerID 0: this instance has not bumped the identity yet
	coord int32        // the writer id's transaction coordinator plus one, 0 unknown
	// unsure: the last bump failed, and the coordinator may have made it
	// all the same (a lost answer, a timeout): w may be behind, so the
	// next fence bumps, and a refused epoch is taken for this instance's
	// own bump until one succeeds.
	unsure bool
	// The stop's fence rounds (fence.go): next gathers the partitions
	// of the round to come, fencing is set while a partition runs them.
	next    *fenceRound
	fencing bool
	// draining counts the partitions in a stop that have not reached
	// its fence: a round waits for them (their last appends still go
	// with the epoch the round ends), changed is closed at each change.
	draining int
	changed  chan struct{}
}

// fence returns the identity a partition appends with next. had is the
// partition's identity so far and used whether it appended with it since
// taking it from this TopicWriter. It bumps the epoch (bump sends the
// InitProducerID, with the coordinator to ask, -1 unknown, which it may
// set) when this instance has not yet, and when the partition used the
// current one; a partition that has not, or whose identity another
// partition's bump already replaced, takes the current one.
func (t *TopicWriter) fence(had batch.Writer, used bool, bump func(coord *int32) (batch.Writer, error)) (batch.Writer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w.ProducerID != 0 && !t.unsure && !(used && sameWriter(had, t.w)) {
		return t.w, nil
	}
	coord := t.coord - 1
	w, err := bump(&coord)
	t.coord = coord + 1
	if err != nil {
		t.unsure = t.w.ProducerID != 0
		return batch.Writer{}, err
	}
	t.w, t.unsure = batch.Writer{ProducerID: w.ProducerID, ProducerEpoch: w.ProducerEpoch}, false
	return t.w, nil
}

// Bumped reports whether this instance moved the identity past w (another
// partition's bump), or may have (unsure): an append with w refused for
// its epoch then calls for alignment, not for the verdict that another
// owner fenced it.
func (t *TopicWriter) Bumped(w batch.Writer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w.ProducerID != 0 && (t.unsure || !sameWriter(w, t.w))
}

// sameWriter reports whether a and b are one producer id and epoch.
func sameWriter(a, b batch.Writer) bool {
	return a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch
}

// writerID is the transactional id whose producer id and epoch the
// partitions of topic append with. It is stable so a new owner bumps the
// old owner's epoch.
func writerID(mirror, topic string) string {
	return fmt.Sprintf("kmirror/%s/%s", mirror, topic)
}

// initWriter gives the partition its topic's writer identity (TopicWriter):
// with a bumped epoch when this instance has not bumped it yet, or when
// the partition appended with the current one (a sequence past 0 may no
// longer be the broker's, whatever sent the partition to alignment).
func (r *Runner) initWriter(ctx context.Context) error {
	txnID := writerID(r.deps.Mirror, r.topic)
	used := r.fenced && r.writer.BaseSequence != 0
	w, err := r.tc.Writer.fence(r.writer, used, func(coord *int32) (batch.Writer, error) {
		timeout, err := r.deps.Dest.WriterTimeout(ctx)
		if err != nil {
			return batch.Writer{}, err
		}
		resp, err := r.deps.Dest.InitProducerID(ctx, txnID, timeout, coord)
		if err != nil {
			return batch.Writer{}, err
		}
		return batch.Writer{ProducerID: resp.ProducerID, ProducerEpoch: resp.ProducerEpoch}, nil
	})
	if err != nil {
		return fmt.Errorf("init writer %s: %w", txnID, err)
	}
	if !r.fenced || !sameWriter(w, r.writer) {
		r.writer = w // sequences from 0: a new epoch, or one this partition has not appended with
	}
	r.fenced = true
	r.stats.setWriter(w.ProducerEpoch)
	return nil
}
