package replica

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// StateSink writes the partition records of a coordinator's runners to
// __mirror_state. A runner writes its transitions with put and its
// checkpoints with putAsync from its own goroutine, through one client, so
// its records land in the order it wrote them: a checkpoint never lands
// after the transition that followed it.
type StateSink struct {
	w *store.Writer
	// lease bounds a write by the instance's right to write (the owner
	// gate's Lease): a record not on the wire when it lapses is dropped.
	lease func(context.Context) (context.Context, context.CancelFunc)
}

// stateWriteTimeout bounds one synchronous partition record write.
const stateWriteTimeout = 15 * time.Second

func (s *StateSink) put(ctx context.Context, rec store.PartitionRecord) error {
	ctx, cancel := s.leased(ctx)
	defer cancel()
	return s.w.PutPartition(ctx, rec)
}

// PutRebuild writes a rebuild record.
func (s *StateSink) PutRebuild(ctx context.Context, rec store.RebuildRecord) error {
	ctx, cancel := s.leased(ctx)
	defer cancel()
	return s.w.PutRebuild(ctx, rec)
}

// PutHeldACLs writes the WRITE grants held back from a topic.
func (s *StateSink) PutHeldACLs(ctx context.Context, rec store.HeldACLs) error {
	ctx, cancel := s.leased(ctx)
	defer cancel()
	return s.w.PutHeldACLs(ctx, rec)
}

func (s *StateSink) putAsync(rec store.PartitionRecord, done func(error)) {
	ctx, cancel := s.leased(context.Background())
	s.w.PutPartitionAsync(ctx, rec, func(err error) {
		cancel()
		done(err)
	})
}

// leased bounds one write by stateWriteTimeout and the instance's lease.
func (s *StateSink) leased(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, stateWriteTimeout)
	if s.lease == nil {
		return ctx, cancel
	}
	lctx, lcancel := s.lease(ctx)
	return lctx, func() { lcancel(); cancel() }
}

// Checkpoints. The last mirrored offset (LME) and its source epoch are what
// describe, failover, failback and the next owner's alignment rely on, so
// they are written while MIRRORING, not only at state transitions: every
// mirror.state.checkpoint.interval.ms the mirror's watcher asks each
// partition whose LME moved since its last record for a new one
// (requestCheckpoint); the runner writes it without waiting (checkpoint),
// and writes the last one synchronously when it exits (a clean close or a
// revoked shard). Idle partitions write nothing.

// requestCheckpoint asks the runner to write its record at its next look
// into the inbox.
func (r *Runner) requestCheckpoint() {
	r.in.mu.Lock()
	r.in.checkpoint = !r.in.exited
	r.in.mu.Unlock()
	r.poke()
}

// takeCheckpoint reports whether a checkpoint was requested, clearing the
// request.
func (r *Runner) takeCheckpoint() bool {
	r.in.mu.Lock()
	due := r.in.checkpoint
	r.in.checkpoint = false
	r.in.mu.Unlock()
	return due
}

// checkpoint writes the partition's record with its current LME without
// waiting for the write. A failed write is reported and retried at the
// next request.
func (r *Runner) checkpoint() {
	// An instance that may have lost its shards writes no record: it
	// would contradict the new owner's.
	if r.persist == nil || !r.stats.checkpointDue() || !r.deps.Gate.Allowed() {
		return
	}
	rec := r.record(r.liveStatus())
	r.persist.putAsync(rec, func(err error) {
		if err != nil {
			r.stats.checkpointLost()
			r.emit(partition.SeverityWarn, "checkpoint of the last mirrored offset: "+err.Error())
		}
	})
}

// finalCheckpointTimeout bounds the last checkpoint of an exiting runner.
const finalCheckpointTimeout = 5 * time.Second

// finalCheckpoint writes the record of an exiting runner whose LME moved
// since its last record, and waits for the write (bounded): the next owner
// starts from it.
func (r *Runner) finalCheckpoint() {
	if r.persist == nil || !r.stats.checkpointDue() || !r.deps.Gate.Allowed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), finalCheckpointTimeout)
	defer cancel()
	if err := r.persist.put(ctx, r.record(r.st)); err != nil {
		r.emit(partition.SeverityWarn, "last checkpoint before exiting: "+err.Error())
	}
}

// RequestCheckpoints asks every runner of rs whose LME moved since
// its last record for a checkpoint.
func RequestCheckpoints(rs []*Runner) {
	for _, r := range rs {
		if r.persist != nil && r.stats.checkpointDue() {
			r.requestCheckpoint()
		}
	}
}

// retrying publishes a retry MIRRORING makes on its own (a realignment, a
// fetch retried) in the snapshot and, without waiting, in the partition's
// record: --describe then shows the attempt and its cause like a FAILED
// partition's, though the state is still MIRRORING. The next checkpoint
// after progress writes the record without them.
func (r *Runner) retrying(msg string) {
	r.stats.setRetrying(msg, r.attempt)
	if r.persist == nil || !r.deps.Gate.Allowed() {
		return
	}
	r.persist.putAsync(r.record(r.liveStatus()), func(err error) {
		if err != nil {
			r.stats.checkpointLost()
		}
	})
}

// liveStatus is the status a record written while MIRRORING carries: the
// state machine's, with the retry MIRRORING is making on its own, if any.
func (r *Runner) liveStatus() partition.Status {
	st := r.st
	if st.State == partition.Mirroring && r.attempt > 0 {
		st.Attempt, st.Error, st.Retryable = int(r.attempt), r.stats.errorText(), true
	}
	return st
}
