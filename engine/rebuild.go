package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/internal/backoff"
)

// rebuildLocks serialises topic rebuilds within a mirror: the first
// diverged partition rebuilds the whole topic, the others find it aligned.
type rebuildLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (l *rebuildLocks) lock(topic string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	mu, ok := l.locks[topic]
	if !ok {
		mu = &sync.Mutex{}
		l.locks[topic] = mu
	}
	return mu
}

// rebuild is the operator-approved remedy for a diverged destination: no
// client can truncate a partition's tail, so the destination-only records
// of every partition are copied to a quarantine topic (nothing is silently
// destroyed), the destination topic is deleted and recreated, and the
// partitions are mirrored again from the source. It ends with the
// requesting partition aligned on the fresh topic.
func (r *runner) rebuild(ctx context.Context) error {
	mu := r.m.rebuilds.lock(r.topic)
	mu.Lock()
	defer mu.Unlock()
	err := r.align(ctx)
	if err == nil {
		return nil // another partition's rebuild already recreated the topic
	}
	if errors.Is(err, ErrSourceTopicRecreated) {
		// The destination topic holds the only copy of the old source
		// topic's records: it is never deleted for a namesake.
		return fmt.Errorf("rebuild of %s refused: %w", r.topic, err)
	}
	if !errors.Is(err, ErrDiverged) {
		return err
	}
	from := map[int32]int64{}
	var ule *ULEError
	var mm *MismatchError
	switch {
	case errors.As(err, &ule):
		from[r.partition] = ule.SourceEnd
	case errors.As(err, &mm):
		from[r.partition] = mm.At
	}
	q, n, err := r.m.quarantineAndRecreate(ctx, r.topic, from)
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", r.topic, err)
	}
	r.m.e.emit(LevelWarn, r.m.cfg.Name, r.topic, -1,
		fmt.Sprintf("rebuilt %s: %d destination-only records quarantined in %s; mirroring again from the source", r.topic, n, q))
	// The recreated topic has no transaction of ours, also none that the
	// destination aborted: forget them, or the next alignment would
	// restore them and fail again.
	r.txm = nil
	if r.rare != nil {
		r.rare.restoredTxns = nil
	}
	r.openTxns = 0 // the next status write (at the transition out of alignment) records none
	r.stats.setOpenTxns(0)
	// The topic's partitions realign on an empty topic: their LMEs name
	// offsets of the deleted one.
	rt, err := r.m.destRoute(ctx, r.topic, r.partition, r.m.e.now())
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", r.topic, err)
	}
	r.m.markRebuilt(r.topic, rt.topicID)
	return r.align(ctx)
}

// markRebuilt records that this mirror's rebuild created the destination
// topic with id id.
func (m *mirror) markRebuilt(topic string, id [16]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rebuilt == nil {
		m.rebuilt = make(map[string][16]byte)
	}
	m.rebuilt[topic] = id
}

// rebuiltAs reports whether the destination topic with id id was created
// by this mirror's rebuild: the LMEs taken before it name offsets it does
// not hold, and that is no loss.
func (m *mirror) rebuiltAs(topic string, id [16]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.rebuilt[topic]
	return ok && got == id
}

// divergedRange returns the destination-only offsets [from, to) of one
// partition: past the forward mirror's LME in a failback, past the source's
// high watermark otherwise.
func (m *mirror) divergedRange(ctx context.Context, topic string, p int32) (from, to int64, err error) {
	_, srcEnd, err := m.src.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, err
	}
	_, dstEnd, err := m.e.dst.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, err
	}
	from = srcEnd
	if cat, err := m.peerCatalog(ctx); err == nil {
		if _, _, rec, ok := forwardRecord(cat, m.e.destID, topic, p); ok && rec != nil {
			from = min(from, rec.LastOffset+1)
		}
	}
	// What this mirror copied itself is not destination-only.
	if r := m.runner(topic, p); r != nil {
		from = max(from, r.stats.snapshot().LastOffset+1)
	}
	return min(from, dstEnd), dstEnd, nil
}

// quarantineAndRecreate copies every partition's destination-only records
// to a quarantine topic (same partition, keys, values, headers and
// timestamps), then deletes and recreates the topic. Nothing is deleted
// unless, first, both clusters answered everything the recreate needs
// (partition count, configs) and every diverged partition's quarantine
// copy is complete: a rebuild interrupted anywhere leaves the destination
// topic in place, or recreated from what was fetched before the delete.
// from gives partitions whose divergence point is already known.
func (m *mirror) quarantineAndRecreate(ctx context.Context, topic string, from map[int32]int64) (string, int, error) {
	plan, err := m.rebuildPlan(ctx, topic, from)
	if err != nil {
		return "", 0, fmt.Errorf("nothing deleted: %w", err)
	}
	q, err := m.createQuarantine(ctx, topic, plan.parts)
	if err != nil {
		return "", 0, fmt.Errorf("nothing deleted: %w", err)
	}
	total := 0
	for p, rg := range plan.ranges {
		if rg.to <= rg.from {
			continue
		}
		n, err := m.copyRange(ctx, topic, q, p, rg.from, rg.to)
		total += n
		if err != nil {
			return q, total, fmt.Errorf("nothing deleted: %w", err)
		}
		// The copy skips transaction markers, so the count to check is
		// what the quarantine partition holds against what was copied.
		_, end, err := m.e.dst.offsets(ctx, q, p)
		if err != nil {
			return q, total, fmt.Errorf("nothing deleted: count quarantine %s/%d: %w", q, p, err)
		}
		if end != int64(n) {
			return q, total, fmt.Errorf("nothing deleted: quarantine %s/%d holds %d records, %d were copied from %s/%d [%d, %d)", q, p, end, n, topic, p, rg.from, rg.to)
		}
	}
	// Checked right before the delete: a stop may have landed, or the
	// source topic been recreated, during the copy.
	if m.topicStopped(topic) {
		return q, total, fmt.Errorf("nothing deleted: %w", errTopicStopped)
	}
	if err := m.checkSourceTopicID(topic, -1, plan.srcID); err != nil {
		return q, total, fmt.Errorf("nothing deleted: %w", err)
	}
	dresp, err := m.e.dst.adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = dresp.Error()
	}
	if err != nil {
		return q, total, fmt.Errorf("delete destination topic %s: %w", topic, err)
	}
	// From here the destination lacks the topic until it is recreated:
	// recreate it from what was fetched before the delete, without asking
	// the source again, retrying while the destination does not answer.
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}}
	for {
		err = m.e.ensureTopicsWith(ctx, plan.srcCfgs, plan.srcMeta, []string{topic})
		if err == nil || ctx.Err() != nil || b.Attempt() >= 10 {
			break
		}
		if backoff.Sleep(ctx, b.Next(rand.Float64)) != nil {
			break
		}
	}
	if err != nil {
		return q, total, fmt.Errorf("recreate destination topic %s (alignment creates it again): %w", topic, err)
	}
	return q, total, nil
}

// rebuildPlan is what a rebuild fetches before it writes anything.
type rebuildPlan struct {
	parts   int32
	srcMeta clusterMeta
	srcCfgs kadm.ResourceConfigs
	srcID   [16]byte
	ranges  map[int32]offsetRange // destination-only offsets of each partition
}

type offsetRange struct{ from, to int64 }

// rebuildPlan asks both clusters everything the rebuild needs: the
// destination's partitions, the source topic (same id as mirrored) and its
// configs, and every partition's destination-only range. Any of them not
// answering fails the rebuild before anything is written.
func (m *mirror) rebuildPlan(ctx context.Context, topic string, from map[int32]int64) (rebuildPlan, error) {
	var plan rebuildPlan
	dparts, err := m.destPartitions(ctx, topic)
	if err != nil {
		return plan, err
	}
	plan.parts = int32(len(dparts))
	if plan.srcMeta, err = m.src.metadata(ctx, []string{topic}); err != nil {
		return plan, fmt.Errorf("source topic %s: %w", topic, err)
	}
	tm, ok := plan.srcMeta.topics[topic]
	if !ok || tm.err != nil || len(tm.partitions) == 0 {
		return plan, fmt.Errorf("source topic %s: not found (%v)", topic, tm.err)
	}
	if m.recreatedIn(plan.srcMeta, topic) {
		return plan, recreatedError(topic, m.sourceTopicID(topic), tm.id)
	}
	plan.srcID = tm.id
	if plan.srcCfgs, err = m.src.adm.DescribeTopicConfigs(ctx, topic); err != nil {
		return plan, fmt.Errorf("describe source topic %s configs: %w", topic, err)
	}
	if rc, err := plan.srcCfgs.On(topic, nil); err != nil || rc.Err != nil {
		return plan, fmt.Errorf("describe source topic %s configs: %w", topic, errors.Join(err, rc.Err))
	}
	plan.ranges = make(map[int32]offsetRange, plan.parts)
	for p := range plan.parts {
		start, to, err := m.divergedRange(ctx, topic, p)
		if err != nil {
			return plan, fmt.Errorf("diverged range of %s/%d: %w", topic, p, err)
		}
		// An unclean election on the source can hit any partition, not
		// only the one that asked for the rebuild: ask the source where
		// each partition's last mirrored epoch ends.
		if end, ok, err := m.sourceEpochEnd(ctx, topic, p); err != nil {
			return plan, err
		} else if ok {
			start = min(start, end)
		}
		if f, ok := from[p]; ok {
			start = f
		}
		plan.ranges[p] = offsetRange{from: start, to: to}
	}
	return plan, nil
}

// sourceEpochEnd returns where the source's log of the partition's last
// mirrored epoch ends, when that is below what was mirrored (an unclean
// election truncated it): ok false when nothing was lost there.
func (m *mirror) sourceEpochEnd(ctx context.Context, topic string, p int32) (int64, bool, error) {
	r := m.runner(topic, p)
	if r == nil {
		return 0, false, nil
	}
	last, epoch, _ := r.stats.lme()
	if last < 0 || epoch < 0 {
		return 0, false, nil
	}
	var req kadm.OffsetForLeaderEpochRequest
	req.Add(topic, p, epoch)
	resp, err := m.src.adm.OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		return 0, false, fmt.Errorf("source offset for leader epoch %s/%d: %w", topic, p, err)
	}
	o, ok := resp[topic][p]
	if !ok || o.Err != nil || o.EndOffset < 0 || o.EndOffset >= last+1 {
		return 0, false, nil
	}
	return o.EndOffset, true, nil
}

// createQuarantine creates a fresh quarantine topic for topic,
// <topic>.kmirror-quarantine-<time>-<mirror>: the name says where its
// records come from. -2, -3 … are appended while the name is taken
// (copying into a topic an interrupted attempt already filled would
// quarantine its records twice). It keeps its records until an operator
// deletes it (retention.ms=-1, no size limit, never compacted).
func (m *mirror) createQuarantine(ctx context.Context, topic string, parts int32) (string, error) {
	base := fmt.Sprintf("%s.kmirror-quarantine-%s-%s", topic, m.e.now().UTC().Format("20060102T150405.000"), m.cfg.Name)
	keep := map[string]*string{"retention.ms": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1"), "cleanup.policy": kadm.StringPtr("delete")}
	for n := 1; ; n++ {
		q := base
		if n > 1 {
			q = fmt.Sprintf("%s-%d", base, n)
		}
		resp, err := m.e.dst.adm.CreateTopic(ctx, parts, -1, keep, q)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return q, nil
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || n == 100 {
			return "", fmt.Errorf("create quarantine topic %s: %w", q, err)
		}
	}
}

// copyRange copies records [from, to) of one destination partition into
// the same partition of the quarantine topic.
func (m *mirror) copyRange(ctx context.Context, topic, q string, p int32, from, to int64) (int, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(m.e.cfg.Destination...), kgo.ClientID(m.e.cfg.Instance + "-quarantine")}, m.e.cfg.DestinationOpts...)
	// Control records are kept so the read knows it reached the end even
	// when the range closes with a transaction marker; they are not copied.
	cons, err := kgo.NewClient(append(base, kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}))...)
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n := 0
	for {
		fs := cons.PollFetches(cctx)
		if err := fs.Err(); err != nil {
			return n, fmt.Errorf("read %s/%d for quarantine: %w", topic, p, err)
		}
		var batch []*kgo.Record
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Offset < to && !r.Attrs.IsControl() {
				batch = append(batch, &kgo.Record{Topic: q, Partition: p, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
			}
		})
		if len(batch) > 0 {
			if err := prod.ProduceSync(cctx, batch...).FirstErr(); err != nil {
				return n, fmt.Errorf("write quarantine %s/%d: %w", q, p, err)
			}
			n += len(batch)
		}
		if last >= to-1 {
			return n, nil
		}
	}
}
