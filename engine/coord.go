package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/engine/txn"
)

// GroupID is the consumer group every kmirror instance of a destination
// joins on __mirror_state: the shards assigned to an instance are the mirror
// topics it owns.
const GroupID = "kmirror-instances"

// coordinator makes an engine one of the instances that share the mirrors
// recorded in __mirror_state. One goroutine (loop) owns the catalog and the
// set of owned shards; a reader feeds it every record, the group member
// feeds it assignment changes.
type coordinator struct {
	e      *Engine
	w      *store.Writer
	sink   *stateSink // the runners' partition records, through w
	wcl    *kgo.Client
	reader *kgo.Client
	member *kgo.Client
	in     chan coordMsg

	mu  sync.Mutex
	pub *store.Catalog // a copy for Snapshot, replaced as the catalog changes

	// Owned by loop.
	cat        *store.Catalog
	owned      map[int32]bool
	sent       map[store.PartitionRef]partition.Desired
	recovered  map[store.TopicRef]time.Time
	failing    map[string]time.Time // mirrors that could not be opened, and when to try again
	discovered map[string]time.Time // last topic discovery per mirror
	replay     replayBarrier
	gateShut   bool // the gate closed for want of answers, and that was reported

	rejoin chan struct{} // the gate suspended: ask the group to assign again
	hb     heartbeats    // owned by loop
	shards atomic.Int32  // len(owned), published by loop for Snapshot
}

type coordMsg struct {
	records  []*kgo.Record
	assigned []int32
	revoked  []int32
	done     chan struct{} // closed once a revocation has stopped its runners
	ends     *listedEnds   // the ends of newly assigned shards
}

// sessionTimeout is the instances' group session: a member not heard from
// for that long loses its shards.
const sessionTimeout = 10 * time.Second

// Join makes the engine an instance of the mirrors recorded in the
// destination's __mirror_state: it creates the topic if needed, reads it,
// and joins the instances' consumer group; the topics of the shards the
// group assigns are mirrored here. Join returns once the engine is reading.
func (e *Engine) Join(ctx context.Context) error {
	if e.coord != nil {
		return errors.New("engine already joined")
	}
	// The name keys the instance's heartbeat record.
	if err := store.ValidateName(e.cfg.Instance); err != nil {
		return fmt.Errorf("instance name %q: %w", e.cfg.Instance, err)
	}
	if err := store.EnsureTopic(ctx, e.dst.adm); err != nil {
		return err
	}
	base := append([]kgo.Opt{kgo.SeedBrokers(e.cfg.Destination...), kgo.ClientID(e.cfg.Instance)}, e.cfg.DestinationOpts...)
	c := &coordinator{
		e: e, in: make(chan coordMsg, 64),
		cat: store.NewCatalog(), pub: store.NewCatalog(), owned: make(map[int32]bool),
		sent: make(map[store.PartitionRef]partition.Desired), recovered: make(map[store.TopicRef]time.Time),
		failing: make(map[string]time.Time), discovered: make(map[string]time.Time),
		replay: newReplayBarrier(), rejoin: make(chan struct{}, 1),
		hb: heartbeats{due: true, done: make(chan error, 1)},
	}
	var err error
	if c.wcl, err = kgo.NewClient(append(slices.Clone(base), store.WriterOpts()...)...); err != nil {
		return err
	}
	c.w = store.NewWriter(c.wcl)
	c.sink = replica.NewStateSink(c.w, c.e.gate.Lease)
	if c.reader, err = kgo.NewClient(append(slices.Clone(base),
		kgo.ConsumeTopics(store.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), noFetchSession)...); err != nil {
		c.wcl.Close()
		return err
	}
	// The member starts joining as it is created, and its first answers
	// already count.
	e.gate.arm(sessionTimeout)
	if c.member, err = kgo.NewClient(append(slices.Clone(base),
		kgo.ConsumerGroup(GroupID), kgo.ConsumeTopics(store.Topic), kgo.DisableAutoCommit(), noFetchSession,
		kgo.SessionTimeout(sessionTimeout), kgo.HeartbeatInterval(time.Second),
		kgo.WithHooks(gateHook{g: e.gate, suspended: c.suspended}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			// The group counts this instance in again: whatever the gap
			// before, the shards it now holds are its own.
			if e.gate.resume() {
				e.emit(LevelInfo, "", store.Topic, -1, "the instances' group assigned shards again: appending and writing "+store.Topic+" resume")
			}
			c.deliver(coordMsg{assigned: m[store.Topic]})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.revoke(m[store.Topic]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.revoke(m[store.Topic]) }),
	)...); err != nil {
		c.wcl.Close()
		c.reader.Close()
		return err
	}
	e.coord = c
	e.wg.Go(func() { c.read(e.ctx, c.reader, true) })
	e.wg.Go(func() { c.read(e.ctx, c.member, false) })
	e.wg.Go(func() { c.loop(e.ctx) })
	return nil
}

// deliver hands a message to the loop unless the engine is closing.
func (c *coordinator) deliver(m coordMsg) bool {
	select {
	case c.in <- m:
		return true
	case <-c.e.ctx.Done():
		return false
	}
}

// revoke stops the runners of revoked shards before the group may hand
// them to another instance; writer-epoch fencing covers an instance that
// dies instead.
func (c *coordinator) revoke(shards []int32) {
	done := make(chan struct{})
	if c.deliver(coordMsg{revoked: shards, done: done}) {
		select {
		case <-done:
		case <-c.e.ctx.Done():
		}
	}
	// A state write a stopped runner gave up on may still be on its way:
	// let it land (or fail) before the next owner lists the shard's end,
	// or that owner would start from the record before it.
	ctx, cancel := context.WithTimeout(c.e.ctx, revokeFlushTimeout)
	_ = c.wcl.Flush(ctx)
	cancel()
}

// revokeFlushTimeout bounds how long a revocation waits for the state
// writes in flight; the group waits for the revocation.
const revokeFlushTimeout = 5 * time.Second

// read polls a client; the reader's records go to the loop, the group
// member's are only polled so its membership progresses.
func (c *coordinator) read(ctx context.Context, cl *kgo.Client, forward bool) {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			c.e.emit(LevelWarn, "", t, p, fmt.Sprintf("reading %s: %v", store.Topic, err))
		})
		if forward {
			if recs := fs.Records(); len(recs) > 0 && !c.deliver(coordMsg{records: recs}) {
				return
			}
		}
	}
}

// close writes the final heartbeat, leaves the group (releasing
// ownership) and closes the clients. The runners are stopped by the engine
// before.
func (c *coordinator) close() {
	c.writeStopped()
	c.member.Close()
	c.reader.Close()
	c.wcl.Close()
}

// loop owns the catalog and the owned shards and keeps the runners of this
// instance in line with them.
func (c *coordinator) loop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	hbt := time.NewTicker(c.e.cfg.HeartbeatInterval)
	defer hbt.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.in:
			c.handle(ctx, m)
		case <-hbt.C:
			c.hb.due = true
		case err := <-c.hb.done:
			c.heartbeatDone(err)
		case <-c.rejoin:
			// A member the group still counts gets its shards back
			// from a rejoin; one it removed is rejoining anyway.
			if _, suspended := c.e.gate.state(); suspended {
				c.member.ForceRebalance()
			}
		case <-t.C:
		}
		c.reportGate()
		c.reconcile(ctx)
		c.heartbeat(ctx)
	}
}

func (c *coordinator) handle(ctx context.Context, m coordMsg) {
	changed := false
	now := c.e.now()
	for _, r := range m.records {
		c.replay.read(r.Partition, r.Offset, now)
		if _, ok, err := c.cat.Apply(r.Key, r.Value); err != nil {
			c.e.emit(LevelError, "", store.Topic, r.Partition, fmt.Sprintf("skipped record %q at offset %d: %v", r.Key, r.Offset, err))
		} else if ok {
			changed = true
		}
	}
	if changed {
		cp := c.cat.Clone()
		c.mu.Lock()
		c.pub = cp
		c.mu.Unlock()
	}
	// An assigned shard is owned once replayed (promote), up to the end
	// it has now: its previous owner stopped writing it before the group
	// handed it over.
	var fresh []int32
	for _, s := range m.assigned {
		if !c.owned[s] {
			fresh = append(fresh, s)
		}
	}
	if len(fresh) > 0 {
		gen := c.replay.assign(fresh, now)
		c.e.wg.Go(func() { c.listEnds(ctx, gen, fresh) })
	}
	if m.ends != nil {
		c.replay.listed(*m.ends, now)
	}
	for _, s := range m.revoked {
		delete(c.owned, s)
		c.replay.revoke(s)
	}
	if len(m.assigned) > 0 || len(m.revoked) > 0 {
		c.e.emit(LevelInfo, "", store.Topic, -1, fmt.Sprintf("ownership: %d shards assigned, %d revoked; owning %d of %d", len(m.assigned), len(m.revoked), len(c.owned), store.Partitions))
	}
	if len(m.revoked) > 0 {
		c.release(ctx)
	}
	if m.done != nil {
		close(m.done)
	}
}

// release stops the runners of topics this instance no longer owns.
func (c *coordinator) release(context.Context) {
	ms := c.e.mirrorList()
	for _, m := range ms {
		for _, t := range m.topicList() {
			ref := store.TopicRef{Mirror: m.cfg.Name, Topic: t}
			if _, ok := c.cat.Topics[ref]; ok && c.owned[store.TopicShard(ref.Mirror, ref.Topic)] {
				continue
			}
			m.removeTopic(t)
			for p := range c.sent {
				if p.Mirror == ref.Mirror && p.Topic == ref.Topic {
					delete(c.sent, p)
				}
			}
		}
	}
}

// reconcile starts runners for owned topics and delivers desired states and
// recover requests to them.
func (c *coordinator) reconcile(ctx context.Context) {
	c.promote()
	c.release(ctx)
	c.applyDefs(ctx)
	c.discover(ctx)
	refs := make([]store.TopicRef, 0, len(c.cat.Topics))
	for ref := range c.cat.Topics {
		if c.owned[store.TopicShard(ref.Mirror, ref.Topic)] {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b store.TopicRef) int {
		if a.Mirror != b.Mirror {
			return compareStrings(a.Mirror, b.Mirror)
		}
		return compareStrings(a.Topic, b.Topic)
	})
	answers := c.askStarting(ctx, refs)
	for _, ref := range refs {
		t := c.cat.Topics[ref]
		def, ok := c.cat.Mirrors[ref.Mirror]
		if !ok {
			continue
		}
		m, err := c.mirror(ctx, def)
		if err != nil {
			continue
		}
		if len(m.runnersOf(ref.Topic)) == 0 {
			c.startTopic(ctx, m, t, answers[ref.Mirror])
			continue
		}
		// A stopped topic belongs to the destination now: a source
		// partition added after failover is not mirrored.
		if m.takeGrown(ref.Topic) && !m.topicStopped(ref.Topic) {
			before := len(m.runnersOf(ref.Topic))
			c.startTopic(ctx, m, t, nil)
			if after := len(m.runnersOf(ref.Topic)); after > before {
				c.e.emit(LevelInfo, ref.Mirror, ref.Topic, -1, fmt.Sprintf("source topic %s grew to %d partitions: mirroring the new ones", ref.Topic, after))
			}
		}
		for _, r := range m.runnersOf(ref.Topic) {
			pref := store.PartitionRef{Mirror: ref.Mirror, Topic: ref.Topic, Partition: r.Partition()}
			if c.sent[pref] != t.Desired {
				c.sent[pref] = t.Desired
				r.Send(desiredEvent(t.Desired))
			}
		}
		if t.RecoverAt.After(c.recovered[ref]) {
			c.recovered[ref] = t.RecoverAt
			for _, r := range m.runnersOf(ref.Topic) {
				rec, ok := c.cat.Partitions[store.PartitionRef{Mirror: ref.Mirror, Topic: ref.Topic, Partition: r.Partition()}]
				if ok && rec.State == partition.Failed && rec.UpdatedAt.Before(t.RecoverAt) {
					r.Send(partition.Recover{Rebuild: t.RebuildRequested})
				}
			}
		}
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// askStarting asks the clusters about the owned topics that have no
// runners yet, together for each mirror (askTopics): taking over a
// thousand topics costs a few requests, not four a topic.
func (c *coordinator) askStarting(ctx context.Context, refs []store.TopicRef) map[string]*topicAnswers {
	starting := map[string][]string{}
	mirrors := map[string]*mirror{}
	for _, ref := range refs {
		def, ok := c.cat.Mirrors[ref.Mirror]
		if !ok {
			continue
		}
		m, err := c.mirror(ctx, def)
		if err != nil || len(m.runnersOf(ref.Topic)) > 0 {
			continue
		}
		mirrors[ref.Mirror] = m
		starting[ref.Mirror] = append(starting[ref.Mirror], ref.Topic)
	}
	answers := make(map[string]*topicAnswers, len(starting))
	for name, topics := range starting {
		answers[name] = mirrors[name].askTopics(ctx, topics)
	}
	return answers
}

// startTopic starts the runners of a newly owned topic from their records;
// ans, if not nil, holds what the clusters said about it (askStarting).
func (c *coordinator) startTopic(ctx context.Context, m *mirror, t store.TopicDesired, ans *topicAnswers) {
	recs := c.cat.PartitionsOf(t.Mirror, t.Topic)
	setup := func(p int32) runnerInit {
		pref := store.PartitionRef{Mirror: t.Mirror, Topic: t.Topic, Partition: p}
		c.sent[pref] = t.Desired
		init := runnerInit{Status: partition.Status{Config: m.cfg.retryConfig()}, LastOffset: -1, LastEpoch: -1}
		if rec, ok := c.cat.Partitions[pref]; ok {
			init.Status = rec.Status(m.cfg.retryConfig())
			init.LastOffset, init.LastEpoch = rec.LastOffset, rec.LastEpoch
			if rec.WriterID > 0 {
				init.Writer = batch.Writer{ProducerID: rec.WriterID, ProducerEpoch: rec.WriterEpoch}
			}
			init.DestTopic = parseTopicID(rec.DestTopicID)
			for _, l := range rec.Lineage {
				init.Lineage = append(init.Lineage, EpochStart{Epoch: l.Epoch, StartOffset: l.Start})
			}
			if init.Status.State != partition.Unknown {
				init.Events = append(init.Events, partition.Restored{})
			}
			for _, p := range rec.Txns {
				init.Txns = append(init.Txns, txn.Producer{SourcePID: p.SourcePID, TxnID: p.TxnID, PID: p.PID, Epoch: p.Epoch, NextSeq: p.NextSeq, Open: p.Open, FirstOffset: p.FirstOffset})
			}
			init.StopAborted = slices.Clone(rec.StopAborted)
		}
		init.Events = append(init.Events, desiredEvent(t.Desired))
		return init
	}
	// With the source unreachable (or another cluster behind its
	// bootstrap) the partitions are known from their records: a stop needs
	// only the destination, and the others fail loudly in alignment.
	// Before the runners start (and addTopic looks at the destination
	// topic): a rebuild interrupted by the previous owner is theirs to
	// continue.
	if rb, ok := c.cat.Rebuilds[store.TopicRef{Mirror: t.Mirror, Topic: t.Topic}]; ok {
		m.restoreRebuild(rb)
	}
	if h, ok := c.cat.HeldACLs[store.TopicRef{Mirror: t.Mirror, Topic: t.Topic}]; ok {
		m.restoreHeld(h)
	}
	var known []int32
	for _, r := range recs {
		known = append(known, r.Partition)
		m.restoreSourceTopicID(t.Topic, r.SourceTopicID)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.addTopic(sctx, t.Topic, setup, c.sink, known, ans); err != nil {
		c.e.emit(LevelError, t.Mirror, t.Topic, -1, err.Error())
	}
}

// mirror returns the running mirror of def, opening it on first use.
func (c *coordinator) mirror(ctx context.Context, def store.MirrorDef) (*mirror, error) {
	c.e.mu.Lock()
	m, ok := c.e.mirrors[def.Name]
	c.e.mu.Unlock()
	if ok {
		return m, nil
	}
	if at, ok := c.failing[def.Name]; ok && c.e.now().Before(at) {
		return nil, errors.New("retry later")
	}
	cfg, err := mirrorConfig(def)
	if err == nil {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		m, err = c.e.openMirror(octx, cfg, def.SourceClusterID)
		cancel()
	}
	if err != nil {
		c.failing[def.Name] = c.e.now().Add(10 * time.Second)
		c.e.emit(LevelError, def.Name, "", -1, err.Error())
		return nil, err
	}
	delete(c.failing, def.Name)
	m.setLive(cfg, def)
	return m, nil
}

// mirrorConfig turns a persisted definition into the engine's settings.
func mirrorConfig(def store.MirrorDef) (MirrorConfig, error) {
	s, err := mirrorSettings(def)
	if err != nil {
		return MirrorConfig{}, err
	}
	sec, err := resolveSecrets(def.SourceConfig)
	if err != nil {
		return MirrorConfig{}, fmt.Errorf("mirror %s source: %w", def.Name, err)
	}
	opts, err := SecurityOpts(sec)
	if err != nil {
		return MirrorConfig{}, fmt.Errorf("mirror %s source: %w", def.Name, err)
	}
	cfg := MirrorConfig{
		Name: def.Name, SourceBootstrap: def.SourceBootstrap, SourceOpts: opts,
		NumFetchers: s.NumFetchers, RetryInitial: s.RetryInitialBackoff, RetryMax: s.RetryMaxBackoff,
		RetryAttempts: s.RetryMaxAttempts, MaxInFlight: s.MaxInflight, GapFill: s.GapPolicy == "fill",
		UncleanRecovery: s.UncleanLeaderElection, ThrottleRate: s.ThrottledRate,
		CheckpointInterval: s.CheckpointInterval, WriteGuard: s.WriteGuard == props.WriteGuardACL,
		PartitionFetchBytes: s.FetchMaxBytes, FetchMaxWait: s.FetchWaitMax,
		FetchMinBytes: s.FetchMinBytes, FetchResponseMaxBytes: s.FetchResponseMaxBytes,
	}
	if s.RetryMaxAttempts == 0 {
		cfg.RetryAttempts = partition.NoRetries
	}
	cfg.SyncGroups(s.MetadataRefresh, s.GroupsInclude, s.GroupsExclude)
	cfg.SyncMetadata(s.MetadataRefresh, s.TopicsExclude, s.TopicPropertiesExclude, s.ACLInclude)
	return cfg, cfg.defaults()
}

func desiredEvent(d partition.Desired) partition.Event {
	switch d {
	case partition.DesiredPause:
		return partition.Pause{}
	case partition.DesiredStop:
		return partition.Stop{}
	case partition.DesiredStart, partition.DesiredNone:
	}
	return partition.Start{}
}

// control records an operator command in __mirror_state, as the CLI does.
func (c *coordinator) control(ctx context.Context, cmd Command) error {
	c.mu.Lock()
	cat := c.pub
	c.mu.Unlock()
	_, err := SetDesired(ctx, c.w, cat, cmd, c.e.now())
	if err == nil {
		c.e.emit(LevelInfo, cmd.Mirror, fmt.Sprint(cmd.Topics), -1, "operator: "+cmd.Kind.String()+" recorded in "+store.Topic)
	}
	return err
}

// addRemote adds to a snapshot the partitions this instance does not run,
// from their records: the console shows the whole mirror.
func (c *coordinator) addRemote(s *Snapshot) {
	c.mu.Lock()
	cat := c.pub
	c.mu.Unlock()
	have := map[store.PartitionRef]bool{}
	for _, m := range s.Mirrors {
		for _, p := range m.Partitions {
			have[store.PartitionRef{Mirror: m.Name, Topic: p.Topic, Partition: p.Partition}] = true
		}
	}
	for _, name := range cat.MirrorNames() {
		i := slices.IndexFunc(s.Mirrors, func(m MirrorSnapshot) bool { return m.Name == name })
		if i < 0 {
			def := cat.Mirrors[name]
			s.Mirrors = append(s.Mirrors, MirrorSnapshot{Name: name, Source: ClusterInfo{ID: def.SourceClusterID, Bootstrap: def.SourceBootstrap}})
			i = len(s.Mirrors) - 1
		}
		for _, r := range cat.PartitionsOf(name, "") {
			if have[store.PartitionRef{Mirror: name, Topic: r.Topic, Partition: r.Partition}] {
				continue
			}
			errText := r.Error
			if r.Owner == c.e.cfg.Instance && r.State != partition.Stopped {
				// The record says this instance runs it, but it runs
				// nothing: its shard is no longer assigned here (the
				// instances' group was lost, as in a destination
				// outage). The record's state is the last one written.
				errText = "not running here: its shard is not assigned to this instance (yet, or any more: the instances' group was lost); the state shown is the last one recorded"
			}
			s.Mirrors[i].Partitions = append(s.Mirrors[i].Partitions, PartitionSnapshot{
				Mirror: name, Topic: r.Topic, Partition: r.Partition, Owner: r.Owner,
				State: r.State, PrevState: r.PrevState, Attempt: r.Attempt, NextRetry: r.NextRetry,
				Error: errText, Retryable: r.Retryable,
				SourceLogStart: -1, SourceHWM: -1, DestLogEnd: -1, SourceEpoch: -1, SourceLeader: -1,
				LastOffset: r.LastOffset, LastEpoch: r.LastEpoch, WriterEpoch: r.WriterEpoch,
				SourceTopicID: r.SourceTopicID, DestTopicID: r.DestTopicID,
			})
		}
		slices.SortFunc(s.Mirrors[i].Partitions, func(a, b PartitionSnapshot) int {
			if a.Topic != b.Topic {
				return compareStrings(a.Topic, b.Topic)
			}
			return int(a.Partition - b.Partition)
		})
	}
	slices.SortFunc(s.Mirrors, func(a, b MirrorSnapshot) int { return compareStrings(a.Name, b.Name) })
}
