package replica

import (
	"sync"
	"time"
	"unique"

	"github.com/kmirror/kmirror/engine/partition"
)

// Stats is what a runner publishes about its partition. The runner
// writes it; Snapshot and the mirror's ticker read it.
type Stats struct {
	mu      sync.Mutex
	desired partition.Desired // of the last published status, for topicStopped
	// txns: the runner keeps mirrored transactional producers.
	txns bool
	ps   published

	srcNewestTs  int64 // max timestamp of the newest source batch seen
	lastMirrorTs int64 // max timestamp of the newest batch appended

	rateBytes, rateBatch int64 // the counters at the last rate update; rateBytes -1 before it

	// checkpointed is the last mirrored offset the runner last put in a
	// partition record, -2 when a record must be written again (a
	// checkpoint write failed).
	checkpointed int64

	// work is the long work running on the partition, nil otherwise:
	// thousands of idle partitions each carry a Stats, so it is
	// allocated only while such work runs (progress.go).
	work *workProgress
}

// published is what a Stats keeps of its PartitionSnapshot, field for
// field under the same names: what the runner sets. Every mirrored
// partition keeps one, so it leaves out what Snapshot derives (the lag),
// what the engine fills in (the owner, the long work's progress, an
// observer's record rate), and holds the mirror's and the topic's names
// once per topic (names).
type published struct {
	names     unique.Handle[partitionNames]
	Partition int32

	State     partition.State
	PrevState partition.State
	Retryable bool
	Cause     partition.Cause
	Attempt   int
	NextRetry time.Time
	Error     string

	SourceLogStart int64
	SourceHWM      int64
	DestLogEnd     int64

	SourceEpoch  int32
	SourceLeader int32
	LastOffset   int64
	LastEpoch    int32
	WriterEpoch  int16
	OpenTxns     int
	Lineage      []EpochStart

	SourceTopicID string
	DestTopicID   string

	BytesPerSec   float64
	BatchesPerSec float64
	BytesCopied   int64
	BatchesCopied int64
	FillerBatches int64
}

// partitionNames are the names every partition of a topic shares.
type partitionNames struct{ mirror, topic string }

// NewStats is the stats of partition p of topic, mirrored by mirror,
// with nothing known yet.
func NewStats(mirror, topic string, p int32) *Stats {
	return &Stats{
		ps: published{
			names: unique.Make(partitionNames{mirror, topic}), Partition: p,
			SourceLogStart: -1, SourceHWM: -1, DestLogEnd: -1,
			SourceEpoch: -1, SourceLeader: -1, LastOffset: -1, LastEpoch: -1,
		},
		rateBytes:    -1,
		checkpointed: -1,
	}
}

// Snapshot returns a copy of what is published.
func (s *Stats) Snapshot() PartitionSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.ps
	n := p.names.Value()
	ps := PartitionSnapshot{
		Mirror: n.mirror, Topic: n.topic, Partition: p.Partition,
		State: p.State, PrevState: p.PrevState, Retryable: p.Retryable, Cause: p.Cause,
		Attempt: p.Attempt, NextRetry: p.NextRetry, Error: p.Error,
		SourceLogStart: p.SourceLogStart, SourceHWM: p.SourceHWM, DestLogEnd: p.DestLogEnd,
		SourceEpoch: p.SourceEpoch, SourceLeader: p.SourceLeader,
		LastOffset: p.LastOffset, LastEpoch: p.LastEpoch, WriterEpoch: p.WriterEpoch,
		OpenTxns: p.OpenTxns, Lineage: append([]EpochStart(nil), p.Lineage...),
		SourceTopicID: p.SourceTopicID, DestTopicID: p.DestTopicID,
		BytesPerSec: p.BytesPerSec, BatchesPerSec: p.BatchesPerSec,
		BytesCopied: p.BytesCopied, BatchesCopied: p.BatchesCopied, FillerBatches: p.FillerBatches,
	}
	if ps.SourceHWM >= 0 && ps.DestLogEnd >= 0 {
		ps.Lag = max(0, ps.SourceHWM-ps.DestLogEnd)
	}
	if ps.Lag > 0 && s.srcNewestTs > s.lastMirrorTs && s.lastMirrorTs > 0 {
		ps.LagTime = time.Duration(s.srcNewestTs-s.lastMirrorTs) * time.Millisecond
	}
	return ps
}

// setTopicIDs publishes the topic ids alignment found on both sides. Every
// partition of a topic names the same ids: they are kept once (unique),
// not once per partition.
func (s *Stats) setTopicIDs(src, dst string) {
	src, dst = unique.Make(src).Value(), unique.Make(dst).Value()
	s.mu.Lock()
	s.ps.SourceTopicID, s.ps.DestTopicID = src, dst
	s.mu.Unlock()
}

// SetStatus publishes the state machine's status.
func (s *Stats) SetStatus(st partition.Status) {
	s.mu.Lock()
	s.ps.State, s.ps.PrevState, s.ps.Attempt, s.ps.NextRetry = st.State, st.PrevState, st.Attempt, st.NextRetry
	s.ps.Error, s.ps.Retryable, s.ps.Cause = st.Error, st.Retryable, st.Cause
	s.desired = st.Desired
	s.mu.Unlock()
}

// errorText returns the published error.
func (s *Stats) errorText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.Error
}

// state returns the published state.
func (s *Stats) state() partition.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.State
}

// Active reports whether the partition is doing work that needs the
// source (aligning, fencing, mirroring, recovering).
func (s *Stats) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.ps.State {
	case partition.LogAlignment, partition.EpochFencing, partition.Mirroring, partition.ULERecovery:
		return true
	case partition.Unknown, partition.Pausing, partition.Paused, partition.Stopping, partition.Stopped, partition.Failed:
	}
	return false
}

// FailedFor reports whether the partition is FAILED, retryable, for cause.
func (s *Stats) FailedFor(cause partition.Cause) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.State == partition.Failed && s.ps.Retryable && s.ps.Cause == cause
}

// WaitsForRecover reports whether the partition is FAILED, non-retryable.
func (s *Stats) WaitsForRecover() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.State == partition.Failed && !s.ps.Retryable
}

// setRetrying publishes a transient failure MIRRORING retries on its own
// (a realignment, a fetch retry) and the attempt it is at, so the console
// and describe show a partition that is not making progress.
func (s *Stats) setRetrying(msg string, attempt int16) {
	s.mu.Lock()
	s.ps.Error, s.ps.Retryable, s.ps.Attempt = msg, true, int(attempt)
	s.mu.Unlock()
}

func (s *Stats) setError(msg string, retryable bool) {
	s.mu.Lock()
	s.ps.Error, s.ps.Retryable = msg, retryable
	s.mu.Unlock()
}

func (s *Stats) clearError() {
	s.mu.Lock()
	s.ps.Error, s.ps.Retryable, s.ps.Attempt = "", false, 0
	s.mu.Unlock()
}

// SetSource publishes the source high watermark and log start; -1 keeps
// what was known.
func (s *Stats) SetSource(hwm, logStart int64) {
	s.mu.Lock()
	if hwm >= 0 {
		s.ps.SourceHWM = hwm
	}
	if logStart >= 0 {
		s.ps.SourceLogStart = logStart
	}
	s.mu.Unlock()
}

// SetRoute publishes the source leader and its epoch.
func (s *Stats) SetRoute(leader, epoch int32) {
	s.mu.Lock()
	s.ps.SourceLeader, s.ps.SourceEpoch = leader, epoch
	s.mu.Unlock()
}

func (s *Stats) setSourceNewest(ts int64) {
	s.mu.Lock()
	s.srcNewestTs = max(s.srcNewestTs, ts)
	s.mu.Unlock()
}

func (s *Stats) setDestEnd(end int64) {
	s.mu.Lock()
	s.ps.DestLogEnd = end
	s.mu.Unlock()
}

func (s *Stats) setWriter(epoch int16) {
	s.mu.Lock()
	s.ps.WriterEpoch = epoch
	s.mu.Unlock()
}

// appended records one batch on the destination; epoch -1 marks a filler.
func (s *Stats) appended(base, end int64, epoch int32, bytes int64, maxTs int64, filler bool) {
	s.mu.Lock()
	s.ps.DestLogEnd = end
	s.ps.BytesCopied += bytes
	s.ps.BatchesCopied++
	if filler {
		s.ps.FillerBatches++
	} else {
		s.ps.LastOffset = end - 1
		s.ps.LastEpoch = epoch
		s.lastMirrorTs = max(s.lastMirrorTs, maxTs)
		s.srcNewestTs = max(s.srcNewestTs, maxTs)
		if n := len(s.ps.Lineage); n == 0 || s.ps.Lineage[n-1].Epoch < epoch {
			s.ps.Lineage = append(s.ps.Lineage, EpochStart{Epoch: epoch, StartOffset: base})
			if len(s.ps.Lineage) > maxLineage {
				s.ps.Lineage = s.ps.Lineage[len(s.ps.Lineage)-maxLineage:]
			}
		}
	}
	s.mu.Unlock()
}

// maxLineage bounds the epoch lineage kept per partition.
const maxLineage = 16

// UpdateRate recomputes bytes/s and batches/s from the counters, dt after
// the last update (the watcher updates every partition at once, so the
// time of the last update is the mirror's, not kept here).
func (s *Stats) UpdateRate(dt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rateBytes >= 0 {
		if dt := dt.Seconds(); dt > 0 {
			s.ps.BytesPerSec = float64(s.ps.BytesCopied-s.rateBytes) / dt
			s.ps.BatchesPerSec = float64(s.ps.BatchesCopied-s.rateBatch) / dt
		}
	}
	s.rateBytes, s.rateBatch = s.ps.BytesCopied, s.ps.BatchesCopied
}

func (s *Stats) setOpenTxns(n int) {
	s.mu.Lock()
	s.ps.OpenTxns = n
	s.mu.Unlock()
}

func (s *Stats) addFiller() {
	s.mu.Lock()
	s.ps.FillerBatches++
	s.mu.Unlock()
}

// checkpointing returns the epoch lineage for a partition record that
// checkpoints the last mirrored offset last (the runner's), and notes it
// as checkpointed.
func (s *Stats) checkpointing(last int64) []EpochStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpointed = last
	return append([]EpochStart(nil), s.ps.Lineage...)
}

// LME returns the last mirrored offset and its source epoch as published,
// for others than the partition's runner (which keeps its own, position).
func (s *Stats) LME() (int64, int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.LastOffset, s.ps.LastEpoch, s.ps.LastOffset >= 0
}

// verified moves the last mirrored offset up to last, of source epoch
// epoch, whose first batch verified starts at epochStart: alignment found the destination's batches up to it identical to
// the source's (appended after the last checkpoint).
func (s *Stats) verified(last int64, epoch int32, epochStart int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last <= s.ps.LastOffset {
		return
	}
	s.ps.LastOffset, s.ps.LastEpoch = last, epoch
	if n := len(s.ps.Lineage); n == 0 || s.ps.Lineage[n-1].Epoch < epoch {
		s.ps.Lineage = append(s.ps.Lineage, EpochStart{Epoch: epoch, StartOffset: epochStart})
		if len(s.ps.Lineage) > maxLineage {
			s.ps.Lineage = s.ps.Lineage[len(s.ps.Lineage)-maxLineage:]
		}
	}
}

// checkpointDue reports whether the last mirrored offset moved since the
// runner last wrote it to __mirror_state.
func (s *Stats) checkpointDue() bool {
	s.mu.Lock()
	due := s.ps.LastOffset != s.checkpointed
	s.mu.Unlock()
	return due
}

// checkpointLost asks for the next checkpoint to be written even if the
// last mirrored offset does not move (the write of the last one failed).
func (s *Stats) checkpointLost() {
	s.mu.Lock()
	s.checkpointed = -2
	s.mu.Unlock()
}

// restore sets the last mirrored offset and epoch persisted by an earlier
// owner; -1 means none.
func (s *Stats) restore(lastOffset int64, lastEpoch int32, lineage []EpochStart) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lastOffset >= 0 {
		s.ps.LastOffset, s.ps.LastEpoch = lastOffset, lastEpoch
		s.ps.Lineage = append([]EpochStart(nil), lineage...)
	}
	s.checkpointed = s.ps.LastOffset
}

// forgetPosition clears the last mirrored offset, epoch and lineage: the
// destination topic was rebuilt by kmirror and holds none of them any more.
func (s *Stats) forgetPosition() {
	s.mu.Lock()
	s.ps.LastOffset, s.ps.LastEpoch, s.ps.Lineage = -1, -1, nil
	s.mu.Unlock()
}

// endWanted takes a destination log end read by the watcher. Outside
// MIRRORING it is also the published end: nobody else refreshes it there.
// It reports whether the runner must look at it (observeEnd): not a
// MIRRORING partition whose log ends where its own acknowledged appends
// do (nothing foreign, nothing lost) and which keeps no mirrored
// transactional producers (the check also releases the idle ones), so
// thousands of idle partitions are not woken every check.
func (s *Stats) endWanted(end int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps.State != partition.Mirroring {
		s.ps.DestLogEnd = end
	} else if end == s.ps.DestLogEnd && !s.txns {
		return false
	}
	return true
}

// setTxns publishes whether the runner keeps mirrored transactional
// producers.
func (s *Stats) setTxns(keeps bool) {
	s.mu.Lock()
	s.txns = keeps
	s.mu.Unlock()
}

// NeedsSourceEnds reports whether the source's log end of the partition
// must be listed for its lag: it is not MIRRORING without trouble, where
// every fetch answer (the fetch session's too) brings the high watermark.
func (s *Stats) NeedsSourceEnds() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps.State != partition.Mirroring || s.ps.Error != ""
}

// SourceUnknown marks the source's offsets unknown (unreachable source).
func (s *Stats) SourceUnknown() {
	s.mu.Lock()
	s.ps.SourceHWM, s.ps.SourceLogStart = -1, -1
	s.mu.Unlock()
}
