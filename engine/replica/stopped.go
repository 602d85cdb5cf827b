package replica

import (
	"github.com/kmirror/kmirror/engine/partition"
)

// StopWanted reports whether the partition is stopping, stopped, or has a
// stop waiting in its inbox.
func (r *Runner) StopWanted() bool {
	r.in.mu.Lock()
	queued := r.in.stopQueued
	r.in.mu.Unlock()
	return queued || r.stats.StopWanted()
}

// noteCommand keeps the inbox's stopQueued in line with the operator
// events handed to the runner: only a start undoes a stop. r.in.mu is held.
func (in *inbox) noteCommand(ev partition.Event) {
	switch ev.(type) {
	case partition.Stop:
		in.stopQueued = true
	case partition.Start:
		in.stopQueued = false
	}
}

// StopWanted reports whether the last published status wants or has
// reached a stop.
func (s *Stats) StopWanted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desired == partition.DesiredStop || s.ps.State == partition.Stopping || s.ps.State == partition.Stopped
}
