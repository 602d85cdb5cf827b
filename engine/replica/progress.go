package replica

import (
	"time"
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

// StartWork publishes long work of kind on the partition, done of total
// already done, from now on.
func (s *Stats) StartWork(kind WorkKind, step string, done, total int64, now time.Time) {
	s.mu.Lock()
	s.work = &workProgress{kind: kind, step: step, done: done, total: total, before: done, started: now}
	s.mu.Unlock()
}

// WorkDone moves the published work of kind to done; done never goes
// back (a retried read does not undo what was verified or copied).
func (s *Stats) WorkDone(kind WorkKind, done int64) {
	s.mu.Lock()
	if w := s.work; w != nil && w.kind == kind {
		w.done = min(max(w.done, done), w.total)
	}
	s.mu.Unlock()
}

// EndWork clears the published work if it is of kind: another kind took
// its place meanwhile (a rebuild of the topic while the partition
// verified) and is not this caller's to clear.
func (s *Stats) EndWork(kind WorkKind) {
	s.mu.Lock()
	if s.work != nil && s.work.kind == kind {
		s.work = nil
	}
	s.mu.Unlock()
}

// Progress returns the published work as of now, nil when none runs.
func (s *Stats) Progress(now time.Time) *Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.work
	if w == nil {
		return nil
	}
	return &Progress{Kind: w.kind, Step: w.step, Done: w.done, Total: w.total, DoneBefore: w.before, StartedAt: w.started,
		ETA: ETA(w.done, w.total, w.before, w.started, now)}
}
