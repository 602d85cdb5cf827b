package engine

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
	"github.com/kmirror/kmirror/engine/replica"
)

// replicaDeps is what a runner is given of its mirror and the engine: the
// mirror's settings, the clock, the owner gate, the sinks, the source and
// the destination, where its events go and how it reports its start and
// exit. One per mirror, shared by its runners (a runner holds a pointer:
// its size does not change). The runner reaches nothing else of package
// engine, except m for its rebuild and failback check (rebuild.go,
// rebuild_steps.go, failback.go), which stay with the mirror.
type replicaDeps struct {
	mirror          string   // the mirror's name
	instance        string   // this instance: the owner of the records a runner writes
	sourceBootstrap []string // for the message of a changed source cluster
	sourceID        string   // the source cluster id the mirror was created from

	fetchBytes   int32 // bytes asked per partition per fetch
	maxInFlight  int   // batches in flight per partition
	retryInitial time.Duration
	retryMax     time.Duration
	gapFill      bool // mirror.gap.policy=fill
	writeGuard   bool // mirror.destination.write.guard=acl
	unclean      bool // mirror.unclean.leader.election.enable

	now       func() time.Time
	sinceBase func(time.Time) time.Duration // since the engine started
	jitter    func() float64                // full-jitter fraction in [0,1)
	log       *slog.Logger

	gate    replicaGate
	sinks   *replica.Sinks
	bucket  *throttle.Bucket // the mirror's replication throttle
	starter *starter         // the runners starting at once (park.go)
	exited  func()           // a runner's goroutine ends (the engine's wait group)

	source replicaSource
	dest   replicaDest
	events replicaEvents

	m *mirror
}

// replicaGate holds back appends, fencing and state writes while the
// instance may have lost its shards (ownerGate).
type replicaGate interface {
	wait(ctx context.Context) error
	allowed() bool
}

// replicaSource is the mirror's source cluster as its runners see it.
type replicaSource interface {
	route(ctx context.Context, topic string, p int32, after time.Time) (route, error)
	// down is why the source is unreachable, nil while it answers.
	down() *SourceUnreachableError
	clusterID() string
	topicID(topic string) [16]byte
	checkTopicID(topic string, p int32, id [16]byte) error
	offsets(ctx context.Context, topic string, p int32) (start, end int64, err error)
	offsetForLeaderEpoch(ctx context.Context, req kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error)
	fetcher(broker int32, topic string, p int32) *fetch.Fetcher[*runner]
}

// replicaDest is the destination cluster as a runner sees it.
type replicaDest interface {
	route(ctx context.Context, topic string, p int32, after time.Time) (route, error)
	offsets(ctx context.Context, topic string, p int32) (start, end int64, err error)
	initProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error)
	request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)
	deleteRecords(ctx context.Context, topic string, p int32, offset int64) error
	writerTimeout(ctx context.Context) (int32, error)
	txnTimeout(ctx context.Context) (time.Duration, error)
	client() *kgo.Client // for the transaction mapper
	guardTopic(ctx context.Context, topic string, refresh bool) error
	unguardTopic(ctx context.Context, topic string) error
	// rebuiltAs: the topic was recreated as id by the mirror's rebuild.
	rebuiltAs(topic string, id [16]byte) bool
}

// replicaEvents is where a runner's events and counts go.
type replicaEvents interface {
	emit(level EventLevel, topic string, p int32, msg string)
	emitState(level EventLevel, topic string, p int32, from, to partition.State, msg string)
	partitionGone(topic string, p int32)
	failed(cause partition.Cause)
	realigned(cause partition.Cause)
	appended(f inflight, ackedAt time.Time)
}

// newReplicaDeps is m's dependency set for its runners.
func newReplicaDeps(m *mirror) *replicaDeps {
	e := m.e
	return &replicaDeps{
		mirror: m.cfg.Name, instance: e.cfg.Instance,
		sourceBootstrap: m.cfg.SourceBootstrap, sourceID: m.sourceID,
		fetchBytes: m.cfg.PartitionFetchBytes, maxInFlight: m.cfg.MaxInFlight,
		retryInitial: m.cfg.RetryInitial, retryMax: m.cfg.RetryMax,
		gapFill: m.cfg.GapFill, writeGuard: m.cfg.WriteGuard, unclean: m.cfg.UncleanRecovery,
		now: e.now, sinceBase: e.sinceBase, jitter: e.jitter, log: e.log,
		gate: e.gate, sinks: e.sinks, bucket: m.bucket, starter: &e.starter, exited: e.wg.Done,
		source: mirrorSource{m}, dest: mirrorDest{m}, events: mirrorEvents{m},
		m: m,
	}
}

// mirrorSource is a mirror's replicaSource.
type mirrorSource struct{ m *mirror }

func (s mirrorSource) route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return s.m.sourceRoute(ctx, topic, p, after)
}
func (s mirrorSource) down() *SourceUnreachableError { return s.m.sourceDown() }
func (s mirrorSource) clusterID() string             { return s.m.srcMeta.clusterID() }
func (s mirrorSource) topicID(topic string) [16]byte { return s.m.sourceTopicID(topic) }
func (s mirrorSource) checkTopicID(topic string, p int32, id [16]byte) error {
	return s.m.checkSourceTopicID(topic, p, id)
}
func (s mirrorSource) offsets(ctx context.Context, topic string, p int32) (int64, int64, error) {
	return s.m.src.offsets(ctx, topic, p)
}
func (s mirrorSource) offsetForLeaderEpoch(ctx context.Context, req kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error) {
	return s.m.src.adm.OffsetForLeaderEpoch(ctx, req)
}
func (s mirrorSource) fetcher(broker int32, topic string, p int32) *fetch.Fetcher[*runner] {
	return s.m.fetcherFor(broker, topic, p)
}

// mirrorDest is a mirror's replicaDest: the engine's destination.
type mirrorDest struct{ m *mirror }

func (d mirrorDest) route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return d.m.destRoute(ctx, topic, p, after)
}
func (d mirrorDest) offsets(ctx context.Context, topic string, p int32) (int64, int64, error) {
	return d.m.e.dst.offsets(ctx, topic, p)
}
func (d mirrorDest) initProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error) {
	return d.m.e.dst.initProducerID(ctx, txnID, timeoutMs, coord)
}
func (d mirrorDest) request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	return d.m.e.dst.cl.Broker(int(broker)).Request(ctx, req)
}
func (d mirrorDest) deleteRecords(ctx context.Context, topic string, p int32, offset int64) error {
	return d.m.e.deleteRecords(ctx, topic, p, offset)
}
func (d mirrorDest) writerTimeout(ctx context.Context) (int32, error) {
	return d.m.e.writerTimeout(ctx)
}
func (d mirrorDest) txnTimeout(ctx context.Context) (time.Duration, error) {
	return d.m.e.txnTimeout(ctx)
}
func (d mirrorDest) client() *kgo.Client { return d.m.e.dst.cl }
func (d mirrorDest) guardTopic(ctx context.Context, topic string, refresh bool) error {
	return d.m.guardTopic(ctx, topic, refresh)
}
func (d mirrorDest) unguardTopic(ctx context.Context, topic string) error {
	return d.m.unguardTopic(ctx, topic)
}
func (d mirrorDest) rebuiltAs(topic string, id [16]byte) bool { return d.m.rebuiltAs(topic, id) }

// mirrorEvents is a mirror's replicaEvents: the engine's events, the
// mirror's counts and latencies.
type mirrorEvents struct{ m *mirror }

func (ev mirrorEvents) emit(level EventLevel, topic string, p int32, msg string) {
	ev.m.e.emit(level, ev.m.cfg.Name, topic, p, msg)
}
func (ev mirrorEvents) emitState(level EventLevel, topic string, p int32, from, to partition.State, msg string) {
	ev.m.e.emitState(level, ev.m.cfg.Name, topic, p, from, to, msg)
}
func (ev mirrorEvents) partitionGone(topic string, p int32) {
	ev.m.e.partitionGone(ev.m.cfg.Name, topic, p)
}
func (ev mirrorEvents) failed(cause partition.Cause)    { ev.m.failures.add(cause) }
func (ev mirrorEvents) realigned(cause partition.Cause) { ev.m.realigns.add(cause) }
func (ev mirrorEvents) appended(f inflight, ackedAt time.Time) {
	ev.m.observeAppend(f, ackedAt)
}
