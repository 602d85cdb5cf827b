package engine

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
)

// A partition's runner is engine/replica's; the mirror builds its runners
// with newReplicaDeps and drives them through replica.Runner's methods.
type (
	runner    = replica.Runner
	partStats = replica.Stats
	route     = replica.Route
	stateSink = replica.StateSink
)

// newReplicaDeps is m's dependency set for its runners.
func newReplicaDeps(m *mirror) *replica.Deps {
	e := m.e
	return &replica.Deps{
		Mirror: m.cfg.Name, Instance: e.cfg.Instance,
		SourceBootstrap: m.cfg.SourceBootstrap, SourceID: m.sourceID, DestID: e.destID,
		FetchBytes: m.cfg.PartitionFetchBytes, MaxInFlight: m.cfg.MaxInFlight,
		RetryInitial: m.cfg.RetryInitial, RetryMax: m.cfg.RetryMax,
		GapFill: m.cfg.GapFill, WriteGuard: m.cfg.WriteGuard, UncleanRecovery: m.cfg.UncleanRecovery,
		Now: e.now, SinceBase: e.sinceBase, Jitter: e.jitter, Log: e.log,
		Gate: e.gate, Sinks: e.sinks, Bucket: m.bucket, Starter: &e.starter, Exited: e.wg.Done,
		Source: mirrorSource{m}, Dest: mirrorDest{m}, Events: mirrorEvents{m},
		Rebuilds: mirrorRebuilds{m}, Peer: mirrorPeer{m},
	}
}

// mirrorSource is a mirror's replica.Source.
type mirrorSource struct{ m *mirror }

func (s mirrorSource) Route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return s.m.sourceRoute(ctx, topic, p, after)
}
func (s mirrorSource) Down() *SourceUnreachableError { return s.m.sourceDown() }
func (s mirrorSource) ClusterID() string             { return s.m.srcMeta.clusterID() }
func (s mirrorSource) TopicID(topic string) [16]byte { return s.m.sourceTopicID(topic) }
func (s mirrorSource) CheckTopicID(topic string, p int32, id [16]byte) error {
	return s.m.checkSourceTopicID(topic, p, id)
}
func (s mirrorSource) Offsets(ctx context.Context, topic string, p int32) (int64, int64, error) {
	return s.m.src.offsets(ctx, topic, p)
}
func (s mirrorSource) OffsetForLeaderEpoch(ctx context.Context, req kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error) {
	return s.m.src.adm.OffsetForLeaderEpoch(ctx, req)
}
func (s mirrorSource) Fetcher(broker int32, topic string, p int32) *fetch.Fetcher[*runner] {
	return s.m.fetcherFor(broker, topic, p)
}

// mirrorDest is a mirror's replica.Dest: the engine's destination.
type mirrorDest struct{ m *mirror }

func (d mirrorDest) Route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return d.m.destRoute(ctx, topic, p, after)
}
func (d mirrorDest) Offsets(ctx context.Context, topic string, p int32) (int64, int64, error) {
	return d.m.e.dst.offsets(ctx, topic, p)
}
func (d mirrorDest) InitProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error) {
	return d.m.e.dst.initProducerID(ctx, txnID, timeoutMs, coord)
}
func (d mirrorDest) Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	return d.m.e.dst.cl.Broker(int(broker)).Request(ctx, req)
}
func (d mirrorDest) DeleteRecords(ctx context.Context, topic string, p int32, offset int64) error {
	return d.m.e.deleteRecords(ctx, topic, p, offset)
}
func (d mirrorDest) WriterTimeout(ctx context.Context) (int32, error) {
	return d.m.e.writerTimeout(ctx)
}
func (d mirrorDest) TxnTimeout(ctx context.Context) (time.Duration, error) {
	return d.m.e.txnTimeout(ctx)
}
func (d mirrorDest) Client() *kgo.Client { return d.m.e.dst.cl }
func (d mirrorDest) GuardTopic(ctx context.Context, topic string, refresh bool) error {
	return d.m.guardTopic(ctx, topic, refresh)
}
func (d mirrorDest) UnguardTopic(ctx context.Context, topic string) error {
	return d.m.releaseTopic(ctx, topic)
}
func (d mirrorDest) RebuiltAs(topic string, id [16]byte) bool { return d.m.rebuiltAs(topic, id) }

// mirrorEvents is a mirror's replica.Events: the engine's events, the
// mirror's counts and latencies.
type mirrorEvents struct{ m *mirror }

func (ev mirrorEvents) Emit(level EventLevel, topic string, p int32, msg string) {
	ev.m.e.emit(level, ev.m.cfg.Name, topic, p, msg)
}
func (ev mirrorEvents) EmitState(level EventLevel, topic string, p int32, from, to partition.State, msg string) {
	ev.m.e.emitState(level, ev.m.cfg.Name, topic, p, from, to, msg)
}
func (ev mirrorEvents) PartitionGone(topic string, p int32) {
	ev.m.e.partitionGone(ev.m.cfg.Name, topic, p)
}
func (ev mirrorEvents) Failed(cause partition.Cause)    { ev.m.failures.add(cause) }
func (ev mirrorEvents) Realigned(cause partition.Cause) { ev.m.realigns.add(cause) }
func (ev mirrorEvents) Appended(fetchedAt, issuedAt, ackedAt time.Time) {
	ev.m.observeAppend(fetchedAt, issuedAt, ackedAt)
}

// mirrorRebuilds is a mirror's replica.Rebuilds (rebuild.go, rebuild_steps.go).
type mirrorRebuilds struct{ m *mirror }

func (b mirrorRebuilds) Lock(ctx context.Context, topic string) (func(), error) {
	return b.m.rebuilds.lock(ctx, topic)
}
func (b mirrorRebuilds) Record(topic string) (store.RebuildRecord, bool) {
	return b.m.rebuildRecord(topic)
}
func (b mirrorRebuilds) Continue(ctx context.Context, sink *stateSink, rec store.RebuildRecord, resumed bool) (store.RebuildRecord, error) {
	return b.m.continueRebuild(ctx, sink, rec, resumed)
}
func (b mirrorRebuilds) QuarantineAndRecreate(ctx context.Context, topic string, from map[int32]int64, sink *stateSink) (store.RebuildRecord, error) {
	return b.m.quarantineAndRecreate(ctx, topic, from, sink)
}

func (b mirrorRebuilds) Retain(ctx context.Context, topic string, p int32, from, to int64) (string, int64, error) {
	return b.m.retain(ctx, topic, p, from, to)
}
func (b mirrorRebuilds) Settle(ctx context.Context, sink *stateSink, rec store.RebuildRecord) (store.RebuildRecord, error) {
	return b.m.settleRebuild(ctx, sink, rec)
}

// mirrorPeer is a mirror's replica.Peer (failback.go).
type mirrorPeer struct{ m *mirror }

func (p mirrorPeer) Catalog(ctx context.Context) (*store.Catalog, error) { return p.m.peerCatalog(ctx) }
