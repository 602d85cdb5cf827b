package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/internal/throttle"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// Deps is what a runner is given of its mirror and the engine: the
// mirror's settings, the clock, the owner gate, the sinks, the source and
// the destination, where its events go, the topic rebuilds and how it
// reports its start and exit. One per mirror, shared by its runners (a
// runner holds a pointer). The runner reaches nothing else.
type Deps struct {
	Mirror          string   // the mirror's name
	Instance        string   // this instance: the owner of the records a runner writes
	SourceBootstrap []string // for the message of a changed source cluster
	SourceID        string   // the source cluster id the mirror was created from
	DestID          string   // the destination cluster id, the failback's forward mirror's source

	FetchBytes      int32 // bytes asked per partition per fetch
	MaxInFlight     int   // batches in flight per partition
	RetryInitial    time.Duration
	RetryMax        time.Duration
	GapFill         bool // mirror.gap.policy=fill
	WriteGuard      bool // mirror.destination.write.guard=acl
	UncleanRecovery bool // mirror.unclean.leader.election.enable

	Now       func() time.Time
	SinceBase func(time.Time) time.Duration // since the engine started
	Jitter    func() float64                // full-jitter fraction in [0,1)
	Log       *slog.Logger

	Gate    Gate
	Sinks   *Sinks
	Bucket  *throttle.Bucket // the mirror's replication throttle
	Starter *Starter         // the runners starting at once (park.go)
	Exited  func()           // a runner's goroutine ends (the engine's wait group)

	Source   Source
	Dest     Dest
	Events   Events
	Rebuilds Rebuilds
	Peer     Peer
}

// Gate holds back appends, fencing and state writes while the instance
// may have lost its shards.
type Gate interface {
	Wait(ctx context.Context) error
	Allowed() bool
}

// Source is the mirror's source cluster as its runners see it.
type Source interface {
	Route(ctx context.Context, topic string, p int32, after time.Time) (Route, error)
	// Down is why the source is unreachable, nil while it answers.
	Down() *SourceUnreachableError
	ClusterID() string
	TopicID(topic string) [16]byte
	CheckTopicID(topic string, p int32, id [16]byte) error
	Offsets(ctx context.Context, topic string, p int32) (start, end int64, err error)
	OffsetForLeaderEpoch(ctx context.Context, req kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error)
	Fetcher(broker int32, topic string, p int32) *fetch.Fetcher[*Runner]
}

// Dest is the destination cluster as a runner sees it.
type Dest interface {
	Route(ctx context.Context, topic string, p int32, after time.Time) (Route, error)
	Offsets(ctx context.Context, topic string, p int32) (start, end int64, err error)
	InitProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error)
	Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
	DeleteRecords(ctx context.Context, topic string, p int32, offset int64) error
	WriterTimeout(ctx context.Context) (int32, error)
	TxnTimeout(ctx context.Context) (time.Duration, error)
	Client() *kgo.Client // for the transaction mapper
	GuardTopic(ctx context.Context, topic string, refresh bool) error
	// UnguardTopic makes a stopping topic writable: the WRITE grants held
	// back from it while mirrored, then the write guard's removal.
	UnguardTopic(ctx context.Context, topic string) error
	// RebuiltAs: the topic was recreated as id by the mirror's rebuild.
	RebuiltAs(topic string, id [16]byte) bool
}

// Events is where a runner's events and counts go.
type Events interface {
	Emit(level partition.Severity, topic string, p int32, msg string)
	EmitState(level partition.Severity, topic string, p int32, from, to partition.State, msg string)
	PartitionGone(topic string, p int32)
	Failed(cause partition.Cause)
	Realigned(cause partition.Cause)
	// Appended counts the times of a batch fetched at fetchedAt (zero:
	// a filler), issued at issuedAt and acknowledged at ackedAt.
	Appended(fetchedAt, issuedAt, ackedAt time.Time)
}

// Rebuilds are the mirror's topic rebuilds (the engine's rebuild steps),
// one at a time per topic.
type Rebuilds interface {
	// Lock holds the topic's rebuild lock until the returned func.
	Lock(ctx context.Context, topic string) (func(), error)
	// Record is the topic's rebuild record.
	Record(topic string) (store.RebuildRecord, bool)
	// Continue takes a recorded rebuild through its remaining steps.
	Continue(ctx context.Context, sink *StateSink, rec store.RebuildRecord, resumed bool) (store.RebuildRecord, error)
	// QuarantineAndRecreate plans a rebuild and takes it through every step.
	QuarantineAndRecreate(ctx context.Context, topic string, from map[int32]int64, sink *StateSink) (store.RebuildRecord, error)
	// Retain copies the destination partition's records [from, to) into
	// the topic's retained topic, count-checked, before alignment moves
	// the log start past them; it returns the retained topic's name and
	// the records copied.
	Retain(ctx context.Context, topic string, p int32, from, to int64) (string, int64, error)
	// Settle ends a recorded rebuild for a stop with the destination
	// alone: abandoned while nothing is deleted, recreated from the
	// record once the topic is (or may be) gone.
	Settle(ctx context.Context, sink *StateSink, rec store.RebuildRecord) (store.RebuildRecord, error)
}

// Peer is the source cluster's own __mirror_state, for a failback.
type Peer interface {
	Catalog(ctx context.Context) (*store.Catalog, error)
}

// Route is where one partition lives on one cluster.
type Route struct {
	Leader  int32
	Epoch   int32
	TopicID [16]byte
}
