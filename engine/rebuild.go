package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/replica"
)

// rebuildLocks serialises topic rebuilds within a mirror: the first
// diverged partition rebuilds the whole topic (or continues its recorded
// rebuild), the others find it aligned.
type rebuildLocks struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

// lock takes the topic's rebuild lock, or gives up when ctx ends: a
// runner waiting for another partition's rebuild must still stop.
func (l *rebuildLocks) lock(ctx context.Context, topic string) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]chan struct{}{}
	}
	ch, ok := l.locks[topic]
	if !ok {
		ch = make(chan struct{}, 1)
		l.locks[topic] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the rebuild of %s: %w", topic, ctx.Err())
	}
}

// divergedRange returns where one partition's destination-only records
// begin, found by verification (firstDifference) from the partition's
// checkpoint on, and the destination's log start and end. The walk starts
// lower where the checkpoint cannot be trusted: a failback's forward LME
// and the transactions its stop aborted (identical on both sides up to the
// LME, but committed here where their marker lies past it), where the
// source's log of the last mirrored epoch now ends (an unclean election),
// and known, the point a partition's own alignment found (known >= 0).
// Below the source's log start nothing can be compared: what lies there is
// kept by the rebuild, never taken for the source's.
func (m *mirror) divergedRange(ctx context.Context, plan *rebuildPlan, topic string, p int32, known int64) (diverged, dstStart, dstEnd int64, err error) {
	srcStart, _, err := m.src.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, 0, err
	}
	dstStart, dstEnd, err = m.e.dst.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, 0, err
	}
	from := dstStart // no checkpoint: the whole log is verified
	if r := m.runner(topic, p); r != nil {
		if last, _, ok := r.Stats().LME(); ok {
			from = last // the batch holding the LME is compared too
		}
	}
	// Points known to have diverged, whatever the bytes say there.
	at := dstEnd
	if known >= 0 {
		at = known
	}
	if cat, err := m.peerCatalog(ctx); err == nil {
		if _, _, rec, ok := replica.ForwardRecord(cat, m.e.destID, topic, p); ok && rec != nil {
			from = min(from, rec.LastOffset+1)
			for _, o := range rec.StopAborted {
				at = min(at, o)
			}
		}
	}
	if end, ok, err := m.sourceEpochEnd(ctx, topic, p); err != nil {
		return 0, 0, 0, err
	} else if ok {
		at = min(at, end)
	}
	from = min(max(from, dstStart, srcStart), dstEnd)
	diff, err := firstDifference(ctx, m.src, m.e.dst, plan.srcMeta, plan.dstMeta, topic, p, from, dstEnd, srcStart)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("verify %s/%d from offset %d: %w", topic, p, from, err)
	}
	diverged = min(max(min(diff, at), dstStart), dstEnd)
	return diverged, dstStart, dstEnd, nil
}

// rebuildPlan is what a rebuild fetches before it writes anything.
type rebuildPlan struct {
	parts   int32 // the destination topic's, which the quarantine copies
	dstID   [16]byte
	srcMeta clusterMeta
	dstMeta clusterMeta
	srcCfgs kadm.ResourceConfigs
	srcID   [16]byte
	dstCfgs map[string]string     // the configs set on the destination topic itself
	dstRF   int16                 // the destination topic's replication factor
	ranges  map[int32]offsetRange // destination-only offsets of each partition
	kept    map[int32]offsetRange // what the destination holds below them
}

type offsetRange struct{ from, to int64 }

// topicNotFound says a side's metadata lacks topic, with the error the
// cluster gave for it, if any.
func topicNotFound(side, topic string, err error) error {
	if err != nil {
		return fmt.Errorf("%s topic %s: not found (%w)", side, topic, err)
	}
	return fmt.Errorf("%s topic %s: not found", side, topic)
}

// rebuildPlan asks both clusters everything the rebuild needs: the
// destination's partitions, the source topic (same id as mirrored) and its
// configs, and every partition's destination-only range. Any of them not
// answering fails the rebuild before anything is written.
func (m *mirror) rebuildPlan(ctx context.Context, topic string, from map[int32]int64) (rebuildPlan, error) {
	var plan rebuildPlan
	dmeta, err := m.e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return plan, fmt.Errorf("destination topic %s: %w", topic, err)
	}
	dtm, ok := dmeta.topics[topic]
	if !ok || dtm.err != nil || len(dtm.partitions) == 0 {
		return plan, topicNotFound("destination", topic, dtm.err)
	}
	plan.parts, plan.dstID, plan.dstMeta = int32(len(dtm.partitions)), dtm.id, dmeta
	if plan.srcMeta, err = m.src.metadata(ctx, []string{topic}); err != nil {
		return plan, fmt.Errorf("source topic %s: %w", topic, err)
	}
	tm, ok := plan.srcMeta.topics[topic]
	if !ok || tm.err != nil || len(tm.partitions) == 0 {
		return plan, topicNotFound("source", topic, tm.err)
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
	if plan.dstCfgs, plan.dstRF, err = m.destinationTopicSettings(ctx, topic); err != nil {
		return plan, err
	}
	plan.ranges = make(map[int32]offsetRange, plan.parts)
	plan.kept = make(map[int32]offsetRange, plan.parts)
	for p := range plan.parts {
		known := int64(-1)
		if f, ok := from[p]; ok {
			known = f
		}
		// Every partition is verified, not only the one that asked: any
		// of them can hold foreign records, or records of an epoch an
		// unclean election on the source truncated.
		at, start, end, err := m.divergedRange(ctx, &plan, topic, p, known)
		if err != nil {
			return plan, fmt.Errorf("diverged range of %s/%d: %w", topic, p, err)
		}
		plan.ranges[p] = offsetRange{from: at, to: end}
		plan.kept[p] = offsetRange{from: start, to: at}
	}
	return plan, nil
}

// destinationTopicSettings returns what the rebuilt topic must keep of the
// destination topic: the configs set on the topic itself (its retention,
// min.insync.replicas, cleanup policy and whatever else the operator or
// the config sync set there, not the broker's defaults) and its
// replication factor.
func (m *mirror) destinationTopicSettings(ctx context.Context, topic string) (map[string]string, int16, error) {
	rcs, err := m.e.dst.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, 0, fmt.Errorf("describe destination topic %s configs: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("describe destination topic %s configs: %w", topic, err)
	}
	cfgs := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil && !c.Sensitive {
			cfgs[c.Key] = *c.Value
		}
	}
	tds, err := m.e.dst.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, 0, fmt.Errorf("describe destination topic %s: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		return nil, 0, topicNotFound("destination", topic, td.Err)
	}
	rf := int16(0)
	for _, pd := range td.Partitions {
		rf = max(rf, int16(len(pd.Replicas)))
	}
	return cfgs, rf, nil
}

// sourceEpochEnd returns where the source's log of the partition's last
// mirrored epoch ends, when that is below what was mirrored (an unclean
// election truncated it): ok false when nothing was lost there.
func (m *mirror) sourceEpochEnd(ctx context.Context, topic string, p int32) (int64, bool, error) {
	r := m.runner(topic, p)
	if r == nil {
		return 0, false, nil
	}
	last, epoch, _ := r.Stats().LME()
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

// quarantineChunk is the most records one quarantine write carries.
var quarantineChunk = func() *atomic.Int64 { var n atomic.Int64; n.Store(1000); return &n }()

// Points where a test can interrupt a rebuild (export_test.go).
const (
	rebuildFaultPlanned     = "planned"     // the plan recorded, before the quarantine is created
	rebuildFaultCopy        = "copy"        // before each quarantine write
	rebuildFaultQuarantined = "quarantined" // before the delete
	rebuildFaultDeleted     = "deleted"     // after the delete, before the recreate
)

// rebuildFault is the test's interruption of a rebuild: a non-nil error
// returned at a point fails the rebuild there. Nil in production.
var rebuildFault atomic.Pointer[func(point string) error]

func faultAt(point string) error {
	if f := rebuildFault.Load(); f != nil {
		return (*f)(point)
	}
	return nil
}

// copyRange copies the data records [from, to) of one destination
// partition into the same partition of the quarantine topic, but for the
// first skip of them (an interrupted copy left those there already). It
// returns how many data records the range holds: what the quarantine
// partition must hold once the copy is complete. progress is told the
// offsets of the range behind the copy as it goes.
func (m *mirror) copyRange(ctx context.Context, topic, q string, p int32, from, to, skip int64, progress func(done int64)) (int64, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(m.e.cfg.Destination...), kgo.ClientID(m.e.cfg.Instance + "-quarantine")}, m.e.cfg.DestinationOpts...)
	// Control records are kept so the read knows it reached the end even
	// when the range closes with a transaction marker; they are not copied.
	cons, err := kgo.NewClient(append(base, kgo.KeepControlRecords(), noFetchSession,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}))...)
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	// One request at a time: what lands is always a prefix of the range,
	// so the quarantine's count says where an interrupted copy goes on.
	prod, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxProduceRequestsInflightPerBroker(1))...)
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var seen int64
	for {
		fs := cons.PollFetches(cctx)
		if err := fs.Err(); err != nil {
			return seen, fmt.Errorf("read %s/%d for quarantine: %w", topic, p, err)
		}
		var batch []*kgo.Record
		var at []int64 // the destination offset of each record of batch
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Offset < to && !r.Attrs.IsControl() {
				if seen++; seen > skip {
					batch = append(batch, &kgo.Record{Topic: q, Partition: p, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
					at = append(at, r.Offset)
				}
			}
		})
		// In chunks: a request stays small whatever one fetch brought,
		// and an interrupted copy leaves a prefix.
		for len(batch) > 0 {
			if err := faultAt(rebuildFaultCopy); err != nil {
				return seen, fmt.Errorf("write quarantine %s/%d: %w", q, p, err)
			}
			n := min(len(batch), int(quarantineChunk.Load()))
			if err := prod.ProduceSync(cctx, batch[:n]...).FirstErr(); err != nil {
				return seen, fmt.Errorf("write quarantine %s/%d: %w", q, p, err)
			}
			progress(at[n-1] + 1 - from)
			batch, at = batch[n:], at[n:]
		}
		if last >= 0 {
			// Past what was written: records skipped (copied by an
			// interrupted copy) and markers.
			progress(min(last+1, to) - from)
		}
		if last >= to-1 {
			return seen, nil
		}
	}
}
