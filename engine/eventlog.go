package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/partition"
)

// logEvent writes ev as one log line at lvl. An attribute the event has no
// value for is left out, never written as a placeholder: a line about the
// whole instance carries no mirror="" topic="" partition=-1.
func logEvent(log *slog.Logger, lvl slog.Level, ev Event, extra ...slog.Attr) {
	ctx := context.Background()
	if !log.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 3+len(extra))
	if ev.Mirror != "" {
		attrs = append(attrs, slog.String(logging.Mirror, ev.Mirror))
	}
	if ev.Topic != "" {
		attrs = append(attrs, slog.String(logging.Topic, ev.Topic))
	}
	if ev.Partition >= 0 {
		attrs = append(attrs, slog.Int(logging.Partition, int(ev.Partition)))
	}
	log.LogAttrs(ctx, lvl, ev.Message, append(attrs, extra...)...)
}

// clusterAttr names the cluster ("source" or "destination") a line is about.
func clusterAttr(name string) slog.Attr { return slog.String(logging.Cluster, name) }

// slogLevel is an event level as a log level.
func slogLevel(l EventLevel) slog.Level {
	switch l {
	case LevelWarn:
		return slog.LevelWarn
	case LevelError:
		return slog.LevelError
	case LevelInfo:
	}
	return slog.LevelInfo
}

// transitionAttrs are the from and to attributes of a state change, none
// when the state stays (a retry announced while FAILED).
func transitionAttrs(from, to partition.State) []slog.Attr {
	if from == to {
		return nil
	}
	return []slog.Attr{slog.String(logging.From, from.String()), slog.String(logging.To, to.String())}
}

// bringUp reports whether from → to is a step of a partition coming up:
// into LOG_ALIGNMENT or EPOCH_FENCING, or from them into MIRRORING.
func bringUp(from, to partition.State) bool {
	switch to {
	case partition.LogAlignment, partition.EpochFencing:
		return true
	case partition.Mirroring:
		return from == partition.LogAlignment || from == partition.EpochFencing
	case partition.Unknown, partition.Pausing, partition.Paused, partition.Stopping, partition.Stopped,
		partition.Failed, partition.ULERecovery:
	}
	return false
}

// emitState records a partition's event from its state machine, from → to
// being the transition it reports (logState).
func (e *Engine) emitState(level EventLevel, mirror, topic string, p int32, from, to partition.State, msg string) {
	logState(e.log, &e.startups, e.events, Event{Time: e.now(), Level: level, Mirror: mirror, Topic: topic, Partition: p, Message: msg}, from, to)
}

// partitionGone tells the start-up summary that a partition's runner ended
// (its shard was revoked, its mirror closed) wherever it had got.
func (e *Engine) partitionGone(mirror, topic string, p int32) {
	if sum := summaryEvent(e.log, e.startups.gone(e.now(), mirror, topic, p)); sum != nil {
		e.events.push(*sum)
	}
}

// logState logs a partition's state event and queues it, from → to being
// the transition it reports. The routine steps of a partition coming up
// are logged at debug: starting a mirror of thousands of partitions would
// otherwise write three info lines each. One info line per mirror sums
// them up instead, once its partitions have got somewhere, and is queued
// after ev.
func logState(log *slog.Logger, s *startups, q *eventQueue, ev Event, from, to partition.State) {
	lvl := slogLevel(ev.Level)
	if ev.Level == LevelInfo && bringUp(from, to) {
		lvl = slog.LevelDebug
	}
	logEvent(log, lvl, ev, transitionAttrs(from, to)...)
	q.push(ev)
	if from == to {
		return
	}
	if sum := summaryEvent(log, s.transition(ev.Time, ev.Mirror, ev.Topic, ev.Partition, from, to)); sum != nil {
		q.push(*sum)
	}
}

// summaryEvent logs a start-up summary and returns its event; nil for none.
func summaryEvent(log *slog.Logger, s *startupSummary) *Event {
	if s == nil {
		return nil
	}
	ev := Event{Time: s.at, Level: LevelInfo, Mirror: s.mirror, Partition: -1, Message: s.message()}
	logEvent(log, slog.LevelInfo, ev, slog.Int(logging.Partitions, s.started), slog.Duration(logging.Elapsed, s.elapsed))
	return &ev
}

// startups follows the partitions of each mirror that are coming up, so a
// mirror's start is told in one line: once every partition that began
// coming up has reached MIRRORING or another state (or ended), and at
// least one is MIRRORING.
type startups struct {
	mu      sync.Mutex
	mirrors map[string]*startup
}

// startup is one mirror's partitions coming up.
type startup struct {
	began   time.Time
	pending map[partRef]struct{}
	reached map[partition.State]int
	started int
}

type partRef struct {
	topic string
	p     int32
}

// startupSummary is what a mirror's partitions reached.
type startupSummary struct {
	mirror  string
	at      time.Time // when the last partition got somewhere
	started int
	elapsed time.Duration
	reached map[partition.State]int
}

func (s *startupSummary) message() string {
	var parts []string
	for _, st := range partition.States {
		if n := s.reached[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if gone := s.started - sum(s.reached); gone > 0 {
		parts = append(parts, fmt.Sprintf("%d no longer run here", gone))
	}
	noun := "partitions"
	if s.started == 1 {
		noun = "partition"
	}
	return fmt.Sprintf("mirror %s: %d %s came up in %s: %s", s.mirror, s.started, noun, s.elapsed.Round(time.Millisecond), strings.Join(parts, ", "))
}

func sum(m map[partition.State]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// transition notes from → to of one partition; it returns the mirror's
// summary when this was the last of its partitions coming up.
func (s *startups) transition(now time.Time, mirror, topic string, p int32, from, to partition.State) *startupSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := partRef{topic, p}
	st := s.mirrors[mirror]
	if to == partition.LogAlignment || to == partition.EpochFencing {
		if st == nil {
			if s.mirrors == nil {
				s.mirrors = make(map[string]*startup)
			}
			st = &startup{began: now, pending: make(map[partRef]struct{}), reached: make(map[partition.State]int)}
			s.mirrors[mirror] = st
		}
		if _, ok := st.pending[key]; !ok {
			st.pending[key] = struct{}{}
			st.started++
		}
		return nil
	}
	if st == nil {
		return nil
	}
	if _, ok := st.pending[key]; !ok {
		return nil
	}
	delete(st.pending, key)
	st.reached[to]++
	return s.settle(now, mirror, st)
}

// gone forgets a partition that ended while coming up.
func (s *startups) gone(now time.Time, mirror, topic string, p int32) *startupSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mirrors[mirror]
	if st == nil {
		return nil
	}
	if _, ok := st.pending[partRef{topic, p}]; !ok {
		return nil
	}
	delete(st.pending, partRef{topic, p})
	return s.settle(now, mirror, st)
}

// settle ends a mirror's start once nothing is pending; s.mu is held. A
// start in which no partition reached MIRRORING (retries during an
// outage) is not summarised: each failure has its own line.
func (s *startups) settle(now time.Time, mirror string, st *startup) *startupSummary {
	if len(st.pending) > 0 {
		return nil
	}
	delete(s.mirrors, mirror)
	if st.reached[partition.Mirroring] == 0 {
		return nil
	}
	return &startupSummary{mirror: mirror, at: now, started: st.started, elapsed: now.Sub(st.began), reached: st.reached}
}
