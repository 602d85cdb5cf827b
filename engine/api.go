// Package engine is kmirror's headless mirroring engine. It copies record
// batches from a source Kafka cluster to a destination cluster at identical
// offsets and publishes what it does as Snapshot values and Events. It imports
// no UI package: the console reads snapshots and sends Commands.
package engine

import (
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/replica"
)

// ClusterInfo names one Kafka cluster as the engine sees it.
type ClusterInfo struct {
	ID        string   // cluster id from Metadata
	Bootstrap []string // bootstrap servers
}

// A partition's published view is engine/replica's, whose runner writes
// it; these names keep it the engine's API.
type (
	// EpochStart is replica.EpochStart.
	EpochStart = replica.EpochStart
	// PartitionSnapshot is replica.PartitionSnapshot.
	PartitionSnapshot = replica.PartitionSnapshot
	// WorkKind is replica.WorkKind.
	WorkKind = replica.WorkKind
	// Progress is replica.Progress.
	Progress = replica.Progress
)

// The kinds of long work.
const (
	WorkAdoption    = replica.WorkAdoption
	WorkQuarantine  = replica.WorkQuarantine
	WorkRebuildStep = replica.WorkRebuildStep
	WorkRetain      = replica.WorkRetain
)

// ETA is replica.ETA.
func ETA(done, total, before int64, started, now time.Time) time.Duration {
	return replica.ETA(done, total, before, started, now)
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

	// SourceRoundTrips is the round trip measured to each source broker
	// in the last 10 to 20 s (the shortest of the fetches there that did
	// not long-poll; fetch.roundTrips), by broker id, the brokers with
	// none left out: their partitions are idle (long-polling) or fetch
	// elsewhere. Empty while the source is unreachable. A partition that
	// is behind grows its fetches with it (replica's sizeFetches).
	SourceRoundTrips []BrokerRoundTrip
}

// BrokerRoundTrip is the round trip measured to one broker.
type BrokerRoundTrip struct {
	Broker int32
	RTT    time.Duration
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
