package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// rebuild is the operator-approved remedy for a diverged destination: no
// client can truncate a partition's tail, so the destination-only records
// of every partition are copied to a quarantine topic (nothing is silently
// destroyed), the destination topic is deleted and recreated, and the
// partitions are mirrored again from the source. Every step is recorded
// first (the engine's rebuild steps, Deps.Rebuilds). It ends with the requesting partition aligned
// on the fresh topic.
func (r *Runner) rebuild(ctx context.Context) error {
	unlock, err := r.deps.Rebuilds.Lock(ctx, r.topic)
	if err != nil {
		return err
	}
	defer unlock()
	// An interrupted rebuild is finished before a new one is planned:
	// its quarantine already holds the destination-only records.
	if err := r.continueRecorded(ctx); err != nil {
		return err
	}
	err = r.align(ctx)
	if err == nil {
		return nil // another partition's rebuild already recreated the topic
	}
	if errors.Is(err, ErrSourceTopicRecreated) {
		// The destination topic holds the only copy of the old source
		// topic's records: it is never deleted for a namesake.
		return fmt.Errorf("rebuild of %s refused: %w", r.topic, err)
	}
	if !errors.Is(err, ErrDiverged) {
		return err
	}
	from := map[int32]int64{}
	var ule *ULEError
	var mm *MismatchError
	switch {
	case errors.As(err, &ule):
		from[r.partition] = ule.SourceEnd
	case errors.As(err, &mm):
		from[r.partition] = mm.At
	}
	rec, err := r.deps.Rebuilds.QuarantineAndRecreate(ctx, r.topic, from, r.persist)
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", r.topic, err)
	}
	r.rebuilt(rec)
	return r.align(ctx)
}

// rebuilt is the end of a rebuild for the runner that finished it.
func (r *Runner) rebuilt(rec store.RebuildRecord) {
	var n int64
	for _, rg := range rec.Ranges {
		n += rg.Copied
	}
	r.deps.Events.Emit(partition.SeverityWarn, r.topic, -1,
		fmt.Sprintf("rebuilt %s: %d destination-only records quarantined in %s; mirroring again from the source", r.topic, n, rec.Quarantine))
	// The recreated topic has no transaction of ours, also none that the
	// destination aborted: forget them, or the next alignment would
	// restore them and fail again.
	r.txm = nil
	r.stats.setTxns(false)
	if r.rare != nil {
		r.rare.restoredTxns = nil
	}
	r.openTxns = 0 // the next status write (at the transition out of alignment) records none
	r.stats.setOpenTxns(0)
}

// continueRecorded continues the topic's rebuild if one is recorded and
// unfinished. The caller holds the topic's rebuild lock.
func (r *Runner) continueRecorded(ctx context.Context) error {
	rec, ok := r.deps.Rebuilds.Record(r.topic)
	if !ok || rec.Step.Finished() {
		return nil
	}
	r.emit(partition.SeverityWarn, fmt.Sprintf("continuing the rebuild of %s recorded at step %s by %s (quarantine %s)", r.topic, rec.Step, rec.Owner, rec.Quarantine))
	rec, err := r.deps.Rebuilds.Continue(ctx, r.persist, rec, true)
	if errors.Is(err, ErrRebuildAbandoned) {
		return nil // nothing was deleted: alignment says what the topic holds
	}
	if err != nil {
		return fmt.Errorf("continue rebuild of %s: %w", r.topic, err)
	}
	r.rebuilt(rec)
	return nil
}

// settleRebuild ends, for a stop, a rebuild of the topic recorded and not
// finished (Rebuilds.Settle), and forgets a position of the deleted topic
// once it is recreated: a stop during a rebuild never reports STOPPED on a
// missing topic, nor an LME the recreated topic does not hold.
func (r *Runner) settleRebuild(ctx context.Context) error {
	rec, ok := r.deps.Rebuilds.Record(r.topic)
	if !ok {
		return nil
	}
	if !rec.Step.Finished() {
		unlock, err := r.deps.Rebuilds.Lock(ctx, r.topic)
		if err != nil {
			return err
		}
		defer unlock()
		if rec, ok = r.deps.Rebuilds.Record(r.topic); ok && !rec.Step.Finished() {
			r.emit(partition.SeverityWarn, fmt.Sprintf("stopping during the rebuild of %s (step %s): ending it before the stop", r.topic, rec.Step))
			if rec, err = r.deps.Rebuilds.Settle(ctx, r.persist, rec); err != nil {
				return fmt.Errorf("stop during the rebuild of %s: %w", r.topic, err)
			}
		}
	}
	if rec.Step != store.RebuildDone || r.mirrored < 0 {
		return nil
	}
	rt, err := r.deps.Dest.Route(ctx, r.topic, r.partition, r.deps.Now())
	if err != nil {
		return fmt.Errorf("stop after the rebuild of %s: %w", r.topic, err)
	}
	if !r.deps.Dest.RebuiltAs(r.topic, rt.TopicID) {
		return nil
	}
	_, end, err := r.deps.Dest.Offsets(ctx, r.topic, r.partition)
	if err != nil {
		return fmt.Errorf("stop after the rebuild of %s: %w", r.topic, err)
	}
	if end <= r.mirrored {
		// The LME names an offset of the deleted topic.
		r.dst = rt
		r.rebuilt(rec)
		r.forgetMirrored()
	}
	return nil
}

// resumeRebuild is continueRecorded for work other than a rebuild
// (alignment, ULE recovery): any runner of the topic finishes what a
// rebuild recorded before it aligns on the topic.
func (r *Runner) resumeRebuild(ctx context.Context) error {
	if rec, ok := r.deps.Rebuilds.Record(r.topic); !ok || rec.Step.Finished() {
		return nil
	}
	unlock, err := r.deps.Rebuilds.Lock(ctx, r.topic)
	if err != nil {
		return err
	}
	defer unlock()
	return r.continueRecorded(ctx)
}
