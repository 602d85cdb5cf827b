package engine

import (
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/store"
)

// workProgress is the long work running on a partition. Whoever does the
// work writes it (the partition's runner verifying, the runner rebuilding
// the topic for every partition of it); Snapshot reads a copy.
type workProgress struct {
	kind        WorkKind
	step        string
	done, total int64
	before      int64 // done when the work started here: not part of the rate
	started     time.Time
}

// startWork publishes long work of kind on the partition, done of total
// already done, from now on.
func (s *partStats) startWork(kind WorkKind, step string, done, total int64, now time.Time) {
	s.mu.Lock()
	s.work = &workProgress{kind: kind, step: step, done: done, total: total, before: done, started: now}
	s.mu.Unlock()
}

// workDone moves the published work of kind to done; done never goes
// back (a retried read does not undo what was verified or copied).
func (s *partStats) workDone(kind WorkKind, done int64) {
	s.mu.Lock()
	if w := s.work; w != nil && w.kind == kind {
		w.done = min(max(w.done, done), w.total)
	}
	s.mu.Unlock()
}

// endWork clears the published work if it is of kind: another kind took
// its place meanwhile (a rebuild of the topic while the partition
// verified) and is not this caller's to clear.
func (s *partStats) endWork(kind WorkKind) {
	s.mu.Lock()
	if s.work != nil && s.work.kind == kind {
		s.work = nil
	}
	s.mu.Unlock()
}

// progress returns the published work as of now, nil when none runs.
func (s *partStats) progress(now time.Time) *Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.work
	if w == nil {
		return nil
	}
	return &Progress{Kind: w.kind, Step: w.step, Done: w.done, Total: w.total, DoneBefore: w.before, StartedAt: w.started,
		ETA: ETA(w.done, w.total, w.before, w.started, now)}
}

// recordedProgress is partition p's progress in the rebuild record rec as
// of now, for partitions another instance rebuilds (the observer): a
// record is written at each step and as each partition's copy is checked,
// so a copy shows 0 until checked, then complete. Nil when the record says
// no work runs.
func recordedProgress(rec *store.RebuildRecord, p int32, now time.Time) *Progress {
	var pr Progress
	switch rec.Step {
	case store.RebuildPlanned:
		i := slices.IndexFunc(rec.Ranges, func(rg store.RebuildRange) bool { return rg.Partition == p })
		if i < 0 || rec.Ranges[i].To <= rec.Ranges[i].From {
			return nil
		}
		rg := rec.Ranges[i]
		pr = Progress{Kind: WorkQuarantine, Step: rec.Quarantine, Total: rg.To - rg.From, StartedAt: rec.StartedAt}
		if rg.Checked {
			pr.Done = pr.Total
		}
	case store.RebuildQuarantined:
		pr = Progress{Kind: WorkRebuildStep, Step: "delete", Total: rebuildSteps, StartedAt: rec.UpdatedAt}
	case store.RebuildDeleted, store.RebuildRecreated:
		pr = Progress{Kind: WorkRebuildStep, Step: "recreate", Done: 1, DoneBefore: 1, Total: rebuildSteps, StartedAt: rec.UpdatedAt}
	case store.RebuildNone, store.RebuildDone, store.RebuildAbandoned:
		return nil
	}
	pr.ETA = ETA(pr.Done, pr.Total, pr.DoneBefore, pr.StartedAt, now)
	return &pr
}
