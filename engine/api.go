// Package engine is kmirror's headless mirroring engine. It copies record
// batches from a source Kafka cluster to a destination cluster at identical
// offsets and publishes what it does as Snapshot values and Events. It imports
// no UI package: the console reads snapshots and sends Commands.
package engine

import (
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// ClusterInfo names one Kafka cluster as the engine sees it.
type ClusterInfo struct {
	ID        string   // cluster id from Metadata
	Bootstrap []string // bootstrap servers
}

// EpochStart is one entry of a partition's source leader-epoch lineage: the
// first offset written in Epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// PartitionSnapshot is the published view of one mirrored partition.
type PartitionSnapshot struct {
	Mirror    string
	Topic     string
	Partition int32
	Owner     string // instance that owns the partition ("" when unowned)

	State     partition.State
	PrevState partition.State // state before FAILED
	Attempt   int             // retry attempt while FAILED; the realignment or fetch retry while MIRRORING retries on its own
	NextRetry time.Time       // when a FAILED partition retries (zero: never)
	Error     string          // last error, "" when healthy
	Retryable bool
	Cause     partition.Cause // why it is FAILED

	SourceLogStart int64 // -1 when unknown
	SourceHWM      int64 // source high watermark, -1 when unknown
	DestLogEnd     int64 // destination log end offset, -1 when unknown
	Lag            int64 // SourceHWM - DestLogEnd, 0 when either is unknown
	LagTime        time.Duration

	SourceEpoch  int32 // current source leader epoch, -1 when unknown
	SourceLeader int32 // source leader broker id, -1 when unknown
	LastOffset   int64 // last mirrored offset (LME offset), -1 when none
	LastEpoch    int32 // source epoch of the last mirrored batch, -1 when none
	Lineage      []EpochStart
	WriterEpoch  int16
	OpenTxns     int

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
	// "recreate"); the quarantine topic for WorkQuarantine.
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

// MirrorSnapshot is the published view of one mirror.
type MirrorSnapshot struct {
	Name       string
	Source     ClusterInfo
	Partitions []PartitionSnapshot // sorted by topic, then partition
	Groups     []GroupSnapshot     // consumer- and share-group offset sync, by group
	Meta       MetaSyncStatus      // topic discovery, config and ACL sync

	// ShareGroupsSkipped says why share groups are not synced (a cluster
	// without KIP-932 share groups), "" when they are or group sync is off.
	ShareGroupsSkipped string

	// GroupSyncRounds counts the consumer- and share-group offset sync
	// rounds run since the mirror started here.
	GroupSyncRounds int64
	// GroupSyncLast is when the last group offset sync round ended without
	// error (zero: none yet, or group sync is off).
	GroupSyncLast time.Time

	// Failures counts the partitions that went FAILED, Realignments the
	// realignments of MIRRORING partitions after an append or fetch
	// error, by cause, since the mirror started here.
	Failures, Realignments map[partition.Cause]int64

	// Latency is how long appended batches spent in the engine and in the
	// destination's Produce, since the mirror started here.
	Latency MirrorLatency

	// SourceReach is whether the source answers this instance's checks.
	// While it does not, its partitions' lag in records is unknown and
	// their lag in time grows from the last answer.
	SourceReach Reachability
}

// Snapshot is a consistent, immutable copy of the engine's state. The UI polls
// it; it is never mutated after being returned.
type Snapshot struct {
	Taken       time.Time
	Instance    string
	Destination ClusterInfo
	DestReach   Reachability     // whether the destination answers the mirrors' checks
	Mirrors     []MirrorSnapshot // sorted by name
	// Member is the instance's standing in the instances' group; zero for
	// an engine that did not Join and for an observer.
	Member Membership

	// Observer is set when an Observer took the snapshot: it runs no
	// partition (Instance is ""), every partition shown is some
	// instance's, and what follows is judged from their heartbeats.
	Observer bool
	// Unowned is the partitions, not STOPPED, that no live instance owns:
	// nothing mirrors them and a command recorded for them waits.
	Unowned Unowned
	// Lost are the instances that stopped heartbeating while recorded as
	// the owners of partitions no live instance has taken over.
	Lost []LostInstance
}

// Unowned counts partitions without a live owner.
type Unowned struct {
	Partitions int
	// Since is the last heartbeat of the newest of their lost owners: how
	// long they have gone unmirrored at least. Zero when none is known
	// (partitions no instance ever ran).
	Since time.Time
}

// LostInstance is an instance whose heartbeat is stale or missing.
type LostInstance struct {
	ID            string
	LastHeartbeat time.Time // zero when none was ever read
	Partitions    int       // the partitions it is still recorded as owning
}

// EventLevel says how loud an event is. It is the state machine's
// partition.Severity, so an Emit action becomes an event at its own level.
type EventLevel = partition.Severity

const (
	LevelInfo  = partition.SeverityInfo
	LevelWarn  = partition.SeverityWarn
	LevelError = partition.SeverityError
)

// Event is something that happened and must be told: a state change, an
// error, an operator action. Events are delivered in order.
type Event struct {
	Time      time.Time
	Level     EventLevel
	Mirror    string
	Topic     string // "" when the event is about the whole mirror
	Partition int32  // -1 when the event is about a whole topic or mirror
	Message   string
}

// CommandKind is an operator action.
type CommandKind int8

const (
	CmdPause CommandKind = iota
	CmdResume
	CmdRecover
	CmdStop
)

// String returns the CLI flag name of the action.
func (k CommandKind) String() string {
	switch k {
	case CmdPause:
		return "pause"
	case CmdResume:
		return "resume"
	case CmdRecover:
		return "recover"
	case CmdStop:
		return "stop"
	}
	return "unknown"
}

// Command is an operator action on topics of one mirror. Empty Topics means
// every topic of the mirror.
type Command struct {
	Kind    CommandKind
	Mirror  string
	Topics  []string
	Rebuild bool // with CmdRecover: rebuild diverged topics (destructive)
}
