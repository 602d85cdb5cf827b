package replica

import (
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// EpochStart is one entry of a partition's source leader-epoch lineage: the
// first offset written in Epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// PartitionSnapshot is the published view of one mirrored partition.
type PartitionSnapshot struct {
	// The fields are in an order that leaves no padding between them:
	// every mirrored partition keeps one.
	Mirror    string
	Topic     string
	Owner     string // instance that owns the partition ("" when unowned)
	Partition int32

	State     partition.State
	PrevState partition.State // state before FAILED
	Retryable bool
	Cause     partition.Cause // why it is FAILED
	Attempt   int             // retry attempt while FAILED; the realignment or fetch retry while MIRRORING retries on its own
	NextRetry time.Time       // when a FAILED partition retries (zero: never)
	Error     string          // last error, "" when healthy

	SourceLogStart int64 // -1 when unknown
	SourceHWM      int64 // source high watermark, -1 when unknown
	DestLogEnd     int64 // destination log end offset, -1 when unknown
	Lag            int64 // SourceHWM - DestLogEnd, 0 when either is unknown
	LagTime        time.Duration
	// LagAtContact is, while the source does not answer, the lag in time
	// at its last answer: the least a failover now loses. LagTime then
	// grows from that answer; the most it loses is LagAtContact plus the
	// time since the answer. Zero while the source answers.
	LagAtContact time.Duration

	SourceEpoch  int32 // current source leader epoch, -1 when unknown
	SourceLeader int32 // source leader broker id, -1 when unknown
	LastOffset   int64 // last mirrored offset (LME offset), -1 when none
	LastEpoch    int32 // source epoch of the last mirrored batch, -1 when none
	WriterEpoch  int16
	OpenTxns     int
	Lineage      []EpochStart

	// SourceTopicID and DestTopicID are the topic ids on both sides
	// (Kafka's base64 form), "" unknown.
	SourceTopicID string
	DestTopicID   string

	BytesPerSec   float64
	BatchesPerSec float64
	// RecordsPerSec is the destination's growth in offsets per second
	// between two looks: all an observer, which copies nothing, can tell
	// of the rate (an instance leaves it 0 and fills the byte rates).
	RecordsPerSec float64
	BytesCopied   int64 // bytes appended since the partition was started here
	BatchesCopied int64
	FillerBatches int64 // batches appended only to keep offsets aligned

	// Progress is the long work running on the partition (an adoption's
	// verification, a rebuild), nil when none: catching up is not long
	// work here, Lag and the rates already say how it goes.
	Progress *Progress
}

// WorkKind is a kind of long work a partition reports progress of.
type WorkKind int8

const (
	// WorkAdoption: verifying an existing destination partition against
	// the source, batch by batch, before mirroring into it; Done and
	// Total count offsets.
	WorkAdoption WorkKind = iota + 1
	// WorkQuarantine: a rebuild copying the partition's destination-only
	// records to the quarantine topic; Done and Total count offsets of
	// the destination range.
	WorkQuarantine
	// WorkRebuildStep: a rebuild deleting or recreating the destination
	// topic after its quarantine; Done and Total count those steps.
	WorkRebuildStep
	// WorkRetain: a rebuild copying what the partition's destination holds
	// below its destination-only records (what the source no longer has,
	// and the mirrored records the rebuilt topic gets again) to the
	// retained topic; Done and Total count offsets of that range.
	WorkRetain
)

// String returns the kind's short name.
func (k WorkKind) String() string {
	switch k {
	case WorkAdoption:
		return "verify"
	case WorkQuarantine:
		return "quarantine"
	case WorkRebuildStep:
		return "rebuild"
	case WorkRetain:
		return "retain"
	}
	return "work"
}

// Unit names what Done and Total count.
func (k WorkKind) Unit() string {
	if k == WorkRebuildStep {
		return "steps"
	}
	return "offsets"
}

// Progress is how far one piece of long work got.
type Progress struct {
	Kind WorkKind
	// Step says what the work does now, for WorkRebuildStep ("delete",
	// "recreate"); the quarantine topic for WorkQuarantine, the retained
	// topic for WorkRetain.
	Step        string
	Done, Total int64
	// DoneBefore is what was done already when this instance took the
	// work on (a rebuild continued from its record): not part of the
	// rate.
	DoneBefore int64
	StartedAt  time.Time
	// ETA is how long the rest takes at the rate so far, -1 while that
	// rate is unknown (nothing done yet).
	ETA time.Duration
}

// Fraction returns Done/Total in [0, 1]; work of nothing is complete.
func (p *Progress) Fraction() float64 {
	if p.Total <= 0 {
		return 1
	}
	return min(max(float64(p.Done)/float64(p.Total), 0), 1)
}

// ETA estimates how long the rest of a piece of work takes at the rate
// seen since it started: done of total, of which before was done already
// at started (not done at this rate). -1 while no rate is known.
func ETA(done, total, before int64, started, now time.Time) time.Duration {
	if done >= total {
		return 0
	}
	elapsed := now.Sub(started)
	if done <= before || elapsed <= 0 || started.IsZero() {
		return -1
	}
	perOffset := float64(elapsed) / float64(done-before)
	return time.Duration(perOffset * float64(total-done))
}
