package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/internal/throttle"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
)

// MirrorConfig defines one mirror: where its source is and what it copies.
type MirrorConfig struct {
	Name            string
	SourceBootstrap []string
	SourceOpts      []kgo.Opt // security settings for the source
	Topics          []string  // source topic names to mirror

	NumFetchers           int            // fetchers per source broker (mirror.num.fetchers), default 1
	FetchMaxWait          time.Duration  // long-poll time of one fetch, default 100ms
	PartitionFetchBytes   int32          // bytes asked per partition per fetch (fetch.max.bytes), default 1 MiB
	FetchMinBytes         int32          // bytes a long-polled fetch waits for (fetch.min.bytes), default 1
	FetchResponseMaxBytes int32          // bytes of one fetch response (fetch.response.max.bytes), default 64 MiB
	RetryInitial          time.Duration  // first retry backoff, default 100ms
	RetryMax              time.Duration  // backoff cap, default 300s
	RetryAttempts         int            // retries before a FAILED partition waits for recover, default 20
	CheckInterval         time.Duration  // destination log-end check and rate period, default 1s
	CheckpointInterval    time.Duration  // last mirrored offsets written to __mirror_state at most this often (mirror.state.checkpoint.interval.ms), default 5s
	MaxInFlight           int            // batches in flight per partition (mirror.max.inflight, 1..5), default 5
	GapFill               bool           // mirror.gap.policy=fill: tombstones stand in for missing source offsets
	GroupSync             groupSync      // consumer-group offset sync; no interval: off
	UncleanRecovery       bool           // mirror.unclean.leader.election.enable: rebuild after a source unclean election
	ThrottleRate          int64          // mirror.replication.throttled.rate: bytes/s appended by the mirror; 0 unthrottled
	MetaSync              metaSyncConfig // topic discovery, config and ACL sync; no interval: off
	// WriteGuard (mirror.destination.write.guard=acl): while a topic is
	// mirrored a DENY WRITE ACL for User:* keeps every other principal
	// out of it; kmirror's own principal must be a destination super user
	// (see writeguard.go).
	WriteGuard bool
}

func (c *MirrorConfig) defaults() error {
	if c.Name == "" {
		return fmt.Errorf("mirror: no name")
	}
	if len(c.SourceBootstrap) == 0 {
		return fmt.Errorf("mirror %s: no source bootstrap servers", c.Name)
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.NumFetchers <= 0 {
		c.NumFetchers = 1
	}
	if c.PartitionFetchBytes <= 0 {
		c.PartitionFetchBytes = 1 << 20
	}
	// Kafka's replica fetcher defaults, which the fetcher also applies to
	// zero limits; set here so that spelling them out changes nothing
	// (needsReopen compares configurations with their defaults applied).
	if c.FetchMinBytes <= 0 {
		c.FetchMinBytes = 1
	}
	if c.FetchResponseMaxBytes <= 0 {
		c.FetchResponseMaxBytes = 64 << 20
	}
	if c.MaxInFlight <= 0 || c.MaxInFlight > 5 {
		c.MaxInFlight = 5 // the broker deduplicates at most five batches per producer
	}
	if c.RetryAttempts == 0 || c.RetryAttempts < partition.NoRetries {
		c.RetryAttempts = 20
	}
	set(&c.FetchMaxWait, 100*time.Millisecond)
	set(&c.RetryInitial, 100*time.Millisecond)
	set(&c.RetryMax, 300*time.Second)
	set(&c.CheckInterval, time.Second)
	set(&c.CheckpointInterval, 5*time.Second)
	return nil
}

// SyncGroups turns on consumer-group offset sync every interval for groups
// matching include and not exclude (RE2, whole names).
func (c *MirrorConfig) SyncGroups(interval time.Duration, include, exclude []string) {
	c.GroupSync = groupSync{include: compileAll(include), exclude: compileAll(exclude), interval: interval}
}

// retryConfig is the state machine's retry settings of the mirror.
func (c *MirrorConfig) retryConfig() partition.Config {
	return partition.Config{InitialBackoff: c.RetryInitial, MaxBackoff: c.RetryMax, MaxAttempts: c.RetryAttempts}.WithDefaults()
}

// mirror runs the partitions of one mirror.
type mirror struct {
	e        *Engine
	cfg      MirrorConfig
	src      *cluster
	sourceID string
	srcMeta  *metaCache
	dstMeta  *metaCache // the engine's destination cache (cluster.leaders), shared by every mirror

	ctx      context.Context    // ends with the engine, or when the mirror is reopened (close)
	cancel   context.CancelFunc // ends ctx
	bg       sync.WaitGroup     // the mirror's own goroutines: watcher, syncs, fetchers
	mu       sync.Mutex
	fetchers map[fetch.Key]*fetch.Fetcher[*runner]
	topics   []string        // topics with runners, sorted; guarded by mu
	peer     peerState       // the source cluster's __mirror_state, for failback
	groups   []GroupSnapshot // last group offset sync; guarded by mu
	srcReach reach           // whether the source answers the watcher
	rebuilds rebuildLocks    // one topic rebuild at a time
	retained retainedTopics  // where alignment keeps what it moves the log start past
	// rebuildRecs are the topics' rebuild records: the last one written
	// (or, in a new owner, read from __mirror_state). Guarded by mu.
	rebuildRecs map[string]store.RebuildRecord
	// srcTopicIDs are the source topic ids the topics were mirrored
	// from (recorded in the partition records); guarded by mu.
	srcTopicIDs map[string][16]byte
	bucket      *throttle.Bucket // rate 0: unthrottled; --alter changes it live
	deps        *replica.Deps    // what its runners are given of it and the engine
	live        atomic.Pointer[liveSettings]
	guard       writeGuard // mirror.destination.write.guard=acl
	held        heldGrants // WRITE grants applied by a topic's stop

	shareSkip   string // why share groups were not synced, "" if they were; guarded by mu
	groupRounds int64  // group offset sync rounds run since the mirror started here; guarded by mu

	groupLast          time.Time   // end of the last group offset sync round without error; guarded by mu
	failures, realigns causeCounts // partitions gone FAILED, and realignments, by cause

	// topicCtx holds the runners of each topic, with the context that
	// ends them (removeTopic). One context per topic rather than per
	// runner: a context costs a few hundred bytes, and thousands of idle
	// partitions would each carry one.
	topicCtx map[string]*topicCancel // guarded by mu

	engineLat, produceLat latencyHist // of appended batches, see latency.go
}

// observeAppend counts the times of a batch whose acknowledgement arrived
// at ackedAt.
func (m *mirror) observeAppend(fetchedAt, issuedAt, ackedAt time.Time) {
	m.produceLat.observe(ackedAt.Sub(issuedAt))
	if !fetchedAt.IsZero() {
		m.engineLat.observe(issuedAt.Sub(fetchedAt))
	}
}

// latency returns the mirror's latency histograms.
func (m *mirror) latency() MirrorLatency {
	return MirrorLatency{Engine: m.engineLat.snapshot(), DestinationProduce: m.produceLat.snapshot()}
}

// topicCancel is replica.TopicCancel.
type topicCancel = replica.TopicCancel

// newTopicCancel returns the context of a topic's runners, which wakes
// them when it ends.
func (m *mirror) newTopicCancel() *topicCancel {
	tc := new(topicCancel)
	tc.Ctx, tc.Cancel = context.WithCancel(m.ctx)
	context.AfterFunc(tc.Ctx, func() {
		m.mu.Lock()
		rs := tc.Runners(nil)
		m.mu.Unlock()
		for _, r := range rs {
			r.ContextEnded()
		}
	})
	return tc
}

// runner returns the runner of a partition, nil if none.
func (m *mirror) runner(topic string, p int32) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runnerLocked(topic, p)
}

// runnerLocked is runner with m.mu held.
func (m *mirror) runnerLocked(topic string, p int32) *runner {
	tc, ok := m.topicCtx[topic]
	if !ok || p < 0 || int(p) >= len(tc.ByPartition) {
		return nil
	}
	return tc.ByPartition[p]
}

// runners returns the mirror's runners sorted by topic and partition.
func (m *mirror) runners() []*runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*runner
	for _, t := range m.topics {
		out = m.topicCtx[t].Runners(out)
	}
	return out
}

// runnerInit is replica.Init.
type runnerInit = replica.Init

// partitionSetup says how the runner of partition p starts.
type partitionSetup func(p int32) runnerInit

// addTopic creates the destination topic if needed and starts a runner for
// every source partition of topic that has none yet. When the source cannot
// be reached and known lists the topic's partitions (from their records),
// runners start for those: stopping needs only the destination. ans, if
// not nil, is what the clusters said about the topics of this start, asked
// together (askTopics).
func (m *mirror) addTopic(ctx context.Context, topic string, setup partitionSetup, persist *stateSink, known []int32, ans *topicAnswers) error {
	m.setHeldSink(persist)
	var parts []int32
	var err error
	if rec, ok := m.rebuildRecord(topic); ok && rec.Step == store.RebuildDeleted {
		// A rebuild deleted the topic and did not recreate it: the
		// first runner recreates it from the record (resumeRebuild),
		// not this from the source, which may not answer, and whose
		// topic the rebuild's checks were not made for.
		for p := range rec.Partitions {
			parts = append(parts, p)
		}
	} else {
		parts, err = m.sourcePartitions(ctx, topic, ans)
	}
	if err != nil && (errors.Is(err, errTopicStopped) || m.topicStopped(topic)) {
		// A failed-over topic is the destination's: its runners only
		// hold STOPPED, for the partitions the destination has, whatever
		// became of the source topic.
		parts, err = m.destPartitions(ctx, topic)
	}
	if err != nil {
		if len(known) == 0 {
			return err
		}
		parts = known
	}
	m.srcMeta.addTopic(topic)
	m.dstMeta.addTopic(topic)
	for _, p := range parts {
		m.mu.Lock()
		if m.runnerLocked(topic, p) != nil {
			m.mu.Unlock()
			continue
		}
		init := setup(p)
		stats := replica.NewStats(m.cfg.Name, topic, p)
		r := replica.New(m.deps, topic, p, stats, persist, init)
		tc, ok := m.topicCtx[topic]
		if !ok {
			tc = m.newTopicCancel()
			if m.topicCtx == nil {
				m.topicCtx = make(map[string]*topicCancel)
			}
			m.topicCtx[topic] = tc
		}
		tc.Running.Add(1)
		if n := int(p) + 1; n > len(tc.ByPartition) {
			tc.ByPartition = append(tc.ByPartition, make([]*runner, n-len(tc.ByPartition))...)
		}
		tc.ByPartition[p] = r
		if !slices.Contains(m.topics, topic) {
			m.topics = append(m.topics, topic)
			slices.Sort(m.topics)
		}
		m.mu.Unlock()
		// The runner's goroutines are counted in the engine's and the
		// topic's wait groups from here until it exits (exit), across
		// the goroutines a parked runner is woken in (engine/replica/park.go).
		m.e.wg.Add(1)
		m.e.starter.Start(r, tc, init.Events)
	}
	return nil
}

// sourcePartitions checks the source topic, creates or corrects the
// destination topic and returns the partitions to mirror. ans, if not nil,
// holds what the clusters already said about it (askTopics).
func (m *mirror) sourcePartitions(ctx context.Context, topic string, ans *topicAnswers) ([]int32, error) {
	meta, err := ans.sourceMeta(ctx, m.src, topic)
	if err != nil {
		return nil, err
	}
	tm, err := m.topicOf(meta, "source topic", topic)
	if err != nil {
		return nil, err
	}
	if meta.clusterID != m.sourceID {
		return nil, fmt.Errorf("mirror %s: %w: the source bootstrap reaches cluster %s, the mirror was created against %s", m.cfg.Name, ErrSourceClusterChanged, meta.clusterID, m.sourceID)
	}
	// Creating, growing or reconfiguring a failed-over topic would undo
	// the failover: checked right before the writes.
	if m.topicStopped(topic) {
		return nil, errTopicStopped
	}
	// Nor is the destination topic of a source topic since recreated
	// shaped after the new one.
	if m.recreatedIn(meta, topic) {
		return nil, &PartitionError{Topic: topic, Partition: -1, Err: recreatedError(topic, m.sourceTopicID(topic), tm.id)}
	}
	if err := m.e.ensureTopics(ctx, m.src, meta, []string{topic}, ans); err != nil {
		return nil, fmt.Errorf("mirror %s: %w", m.cfg.Name, err)
	}
	return partitionNumbers(tm), nil
}

// errTopicStopped: the topic is failed over, the destination topic is not
// to be created, grown or reconfigured.
var errTopicStopped = errors.New("topic is stopped (failed over)")

// destPartitions returns the partitions of the destination topic.
func (m *mirror) destPartitions(ctx context.Context, topic string) ([]int32, error) {
	meta, err := m.e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return nil, err
	}
	tm, err := m.topicOf(meta, "stopped destination topic", topic)
	if err != nil {
		return nil, err
	}
	return partitionNumbers(tm), nil
}

// topicOf is topic in meta. A topic the cluster does not know, or answered
// with an error for, is that error, naming the mirror and what (the role
// of the topic) and topic.
func (m *mirror) topicOf(meta clusterMeta, what, topic string) (topicMeta, error) {
	tm, err := meta.topic(topic)
	if err != nil {
		return topicMeta{}, fmt.Errorf("mirror %s: %s %s: %w", m.cfg.Name, what, topic, err)
	}
	return tm, nil
}

// topic is topic in the answer: UNKNOWN_TOPIC_OR_PARTITION when the
// cluster did not name it, the error it gave for it if any.
func (cm clusterMeta) topic(topic string) (topicMeta, error) {
	tm, ok := cm.topics[topic]
	switch {
	case !ok:
		return topicMeta{}, kerr.UnknownTopicOrPartition
	case tm.err != nil:
		return topicMeta{}, tm.err
	}
	return tm, nil
}

// partitionNumbers is 0 to the topic's partition count - 1.
func partitionNumbers(tm topicMeta) []int32 {
	parts := make([]int32, len(tm.partitions))
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}

// runnersOf returns the runners of one topic.
func (m *mirror) runnersOf(topic string) []*runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	tc, ok := m.topicCtx[topic]
	if !ok {
		return nil
	}
	return tc.Runners(nil)
}

// removeTopic stops the topic's runners and waits for them to finish
// (in-flight appends included), so a new owner can start cleanly.
func (m *mirror) removeTopic(topic string) {
	m.mu.Lock()
	m.topics = slices.DeleteFunc(m.topics, func(t string) bool { return t == topic })
	tc, ok := m.topicCtx[topic]
	delete(m.topicCtx, topic)
	m.mu.Unlock()
	if ok {
		tc.Cancel()
		tc.Running.Wait()
	}
}

// topicList returns the topics with runners.
func (m *mirror) topicList() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.topics)
}

// fetcherFor returns the fetcher that serves partition p of a topic led by
// broker, starting it on first use.
func (m *mirror) fetcherFor(broker int32, topic string, p int32) *fetch.Fetcher[*runner] {
	key := fetch.Key{Mirror: m.cfg.Name, Broker: broker, Index: replica.Slot(topic, p, m.cfg.NumFetchers)}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.fetchers[key]
	if !ok {
		f = fetch.New[*runner](fetch.Config{
			Key:     key,
			Source:  m.src.fetchSource(),
			Wire:    fetch.WireOptions(m.src.cl, fetch.ClientID(m.e.cfg.Instance, key.Index, m.cfg.Name)),
			MaxWait: int32(m.cfg.FetchMaxWait / time.Millisecond),
			Limits:  fetch.Limits{MinBytes: m.cfg.FetchMinBytes, MaxBytes: m.cfg.FetchResponseMaxBytes},
		})
		m.fetchers[key] = f
		m.spawn(func() { f.Run(m.ctx) })
	}
	return f
}

// roundTrips is the round trip measured to each source broker as of now,
// the shortest of its fetchers', by broker id; brokers with none measured
// lately are left out.
func (m *mirror) roundTrips(now time.Time) []BrokerRoundTrip {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []BrokerRoundTrip
	for key, f := range m.fetchers {
		d := f.RoundTrip(now)
		if d <= 0 {
			continue
		}
		i := slices.IndexFunc(out, func(b BrokerRoundTrip) bool { return b.Broker == key.Broker })
		switch {
		case i < 0:
			out = append(out, BrokerRoundTrip{Broker: key.Broker, RTT: d})
		case d < out[i].RTT:
			out[i].RTT = d
		}
	}
	slices.SortFunc(out, func(a, b BrokerRoundTrip) int { return cmp.Compare(a.Broker, b.Broker) })
	return out
}

// sourceRoute resolves a partition's source leader from metadata fetched no
// earlier than after.
func (m *mirror) sourceRoute(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	rt, err := m.srcMeta.route(ctx, topic, p, after)
	if err == nil {
		if r := m.runner(topic, p); r != nil {
			r.Stats().SetRoute(rt.Leader, rt.Epoch)
		}
	}
	return rt, err
}

func (m *mirror) destRoute(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return m.dstMeta.route(ctx, topic, p, after)
}

// watch refreshes rates and checks destination log ends so a foreign write
// to an idle partition is noticed without waiting for the next source batch.
func (m *mirror) watch(ctx context.Context) {
	t := time.NewTicker(m.cfg.CheckInterval)
	defer t.Stop()
	var (
		rated   bool          // rates were updated before...
		rateAt  time.Duration // ...at this time (Engine.sinceBase)
		ckptAt  time.Duration // checkpoints were last requested at this time
		roundAt int           // the topic the next round of a large mirror's checks starts at
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.e.now()
		var dt time.Duration // since the last rate update: none before the first
		if at := m.e.sinceBase(now); rated {
			dt = at - rateAt
			rateAt = at
		} else {
			rated, rateAt = true, at
		}
		rs := m.runners()
		for _, r := range rs {
			r.Stats().UpdateRate(dt)
		}
		if at := m.e.sinceBase(now); at-ckptAt >= m.settings().checkpoint {
			ckptAt = at
			replica.RequestCheckpoints(rs)
		}
		topics, round := m.topicList(), rs
		if budget := int(watchBudget.Load()); len(rs) > budget {
			topics, round = watchRound(rs, (*runner).Topic, budget, &roundAt)
		}
		if len(topics) == 0 {
			continue
		}
		// The source's high watermarks, for the topics with a partition
		// not mirroring: a paused, failed or stopped partition fetches
		// nothing, and its lag must still tell the truth; a mirroring
		// one learns its high watermark from every fetch answer. With
		// none to list, an uncached Metadata request tells whether the
		// source answers.
		sctx, cancel := context.WithTimeout(ctx, m.cfg.CheckInterval*3)
		var srcEnds map[string]map[int32]int64
		var err error
		if listed := sourceListed(round); len(listed) > 0 {
			srcEnds, err = m.src.endOffsetsAged(sctx, watchLeadersMaxAge, listed...)
		} else {
			_, err = m.src.metadata(sctx, []string{})
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.sourceChecked(rs, now, err)
		if err != nil && ctx.Err() == nil {
			// The source does not answer (an outage): its offsets are
			// unknown, and the console must not show lag 0.
			for _, r := range rs {
				r.Stats().SourceUnknown()
			}
		}
		for _, r := range round {
			if end, ok := srcEnds[r.Topic()][r.Partition()]; ok && err == nil {
				r.Stats().SetSource(end, -1)
			}
		}
		ends, err := m.e.dst.endOffsetsAged(ctx, watchLeadersMaxAge, topics...)
		if err != nil {
			if ctx.Err() == nil {
				m.e.dstReach.failed(now, err)
			}
			continue
		}
		m.e.dstReach.ok(now)
		for _, r := range round {
			end, ok := ends[r.Topic()][r.Partition()]
			if !ok {
				continue
			}
			r.ObserveEnd(end, m.e.sinceBase(now))
		}
	}
}

// watchBudget is how many partitions the watcher lists the offsets of at
// one check. A larger mirror is checked in rounds, whole topics in turn,
// each check taking the next ones: at 100,000 partitions a partition's
// destination log end is looked at every fifth check, not at every one
// (listing and decoding 100,000 offsets a second was most of what an idle
// mirror cost). A foreign write is still found: later by the watcher, at
// once by the offset check of the next append or by alignment. (A
// variable for the tests.)
var watchBudget = func() *atomic.Int64 { var n atomic.Int64; n.Store(20_000); return &n }()

// watchRound returns the topics of the next round of checks over rs, and
// their elements: whole topics from the one at *at on (rs is grouped by
// topic), until budget elements are taken (one topic at least). It moves
// *at on past them, and back to the first topic after the last.
func watchRound[T any](rs []T, topic func(T) string, budget int, at *int) (topics []string, round []T) {
	type group struct{ from, to int }
	var groups []group
	for i := range rs {
		if i == 0 || topic(rs[i]) != topic(rs[i-1]) {
			groups = append(groups, group{i, i})
		}
		groups[len(groups)-1].to = i + 1
	}
	if len(groups) == 0 {
		return nil, nil
	}
	g := *at % len(groups)
	for n := 0; n < len(groups) && (n == 0 || len(round) < budget); n++ {
		gr := groups[(g+n)%len(groups)]
		topics = append(topics, topic(rs[gr.from]))
		round = append(round, rs[gr.from:gr.to]...)
		*at = (g + n + 1) % len(groups)
	}
	return topics, round
}

// watchLeadersMaxAge is how old the leaders the watcher lists offsets with
// may be: a partition whose leader moved is asked again on fresh metadata,
// so the watcher need not refresh the metadata of every topic each check
// (at a hundred thousand partitions, megabytes decoded every second).
const watchLeadersMaxAge = 30 * time.Second

// sourceListed returns the topics whose source log ends the watcher lists,
// those with a partition that needs them (needsSourceEnds).
func sourceListed(rs []*runner) []string {
	var out []string
	for _, r := range rs {
		if (len(out) == 0 || out[len(out)-1] != r.Topic()) && r.Stats().NeedsSourceEnds() {
			out = append(out, r.Topic())
		}
	}
	return out
}

// ensureTopics creates missing destination topics with the source's
// partition count and the settings byte-for-byte mirroring needs, and
// corrects those settings on existing topics that lack them. ans, if not
// nil, holds what the clusters already said about topics (askTopics).
func (e *Engine) ensureTopics(ctx context.Context, src *cluster, meta clusterMeta, topics []string, ans *topicAnswers) error {
	srcCfgs, err := ans.sourceConfigs(ctx, src, topics)
	if err != nil {
		return fmt.Errorf("describe source topic configs: %w", err)
	}
	dstMeta, err := ans.destMeta(ctx, e.dst, topics)
	if err != nil {
		return err
	}
	rf := int16(min(3, len(dstMeta.brokers)))
	for _, t := range topics {
		parts := len(meta.topics[t].partitions)
		want := topicCreateConfigs(srcCfgs, t)
		dt, exists := dstMeta.topics[t]
		if !exists || dt.err != nil {
			resp, err := e.dst.adm.CreateTopic(ctx, int32(parts), rf, want, t)
			if err == nil {
				err = resp.Err
			}
			if err == nil {
				e.emit(LevelInfo, "", t, -1, fmt.Sprintf("created destination topic %s with %d partitions", t, parts))
				continue
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("create destination topic %s: %w", t, err)
			}
			// Created since the destination answered (by someone
			// else, or while a start of many topics reached this
			// one): corrected like any existing topic.
			now, err := e.dst.metadata(ctx, []string{t})
			if err != nil {
				return err
			}
			if dt, err = now.topic(t); err != nil {
				return fmt.Errorf("destination topic %s: %w", t, err)
			}
		}
		if len(dt.partitions) < parts {
			lctx, cancel, err := e.gate.leased(ctx)
			var resp kadm.CreatePartitionsResponses
			if err == nil {
				resp, err = e.dst.adm.UpdatePartitions(lctx, parts, t)
			}
			cancel()
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("grow destination topic %s to %d partitions: %w", t, parts, err)
			}
		}
		if ans.destConfigured(t, want, mirroredConfigs) {
			continue
		}
		alter := make([]kadm.AlterConfig, 0, len(mirroredConfigs))
		for _, k := range mirroredConfigs {
			alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: want[k]})
		}
		lctx, cancel, err := e.gate.leased(ctx)
		var resp kadm.AlterConfigsResponses
		if err == nil {
			resp, err = e.dst.adm.AlterTopicConfigs(lctx, alter, t)
		}
		cancel()
		if err == nil {
			for _, r := range resp {
				err = r.Err
			}
		}
		if err != nil {
			return fmt.Errorf("set mirroring configs on destination topic %s: %w", t, err)
		}
	}
	return nil
}

// mirroredConfigs are the destination topic configs byte-for-byte
// mirroring needs, set on a topic that exists already.
var mirroredConfigs = []string{"compression.type", "message.timestamp.type"}

// topicCreateConfigs are the configs a destination topic is created with:
// those byte-for-byte mirroring needs, and the source's size limit and
// cleanup policy.
func topicCreateConfigs(srcCfgs kadm.ResourceConfigs, t string) map[string]*string {
	want := map[string]*string{
		"compression.type":       kadm.StringPtr("producer"),
		"message.timestamp.type": kadm.StringPtr("CreateTime"),
	}
	if rc, err := srcCfgs.On(t, nil); err == nil {
		for _, c := range rc.Configs {
			switch c.Key {
			case "max.message.bytes", "cleanup.policy":
				if c.Value != nil {
					want[c.Key] = kadm.StringPtr(*c.Value)
				}
			}
		}
	}
	if mb, ok := want["max.message.bytes"]; ok {
		// Filler and mirrored batches must fit whatever the source accepted.
		if n, err := strconv.Atoi(*mb); err == nil && n < 1<<20 {
			want["max.message.bytes"] = kadm.StringPtr(strconv.Itoa(1 << 20))
		}
	}
	return want
}

// spawn runs one of the mirror's own goroutines: close waits for them.
func (m *mirror) spawn(f func()) {
	m.bg.Add(1)
	m.e.wg.Go(func() {
		defer m.bg.Done()
		f()
	})
}

// close ends a mirror whose runners were removed: its goroutines stop
// before its source client closes under them.
func (m *mirror) close() {
	m.cancel()
	m.bg.Wait()
	m.src.close()
}
