package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/internal/backoff"
)

// A rebuild's steps. Each one is recorded (store.RebuildRecord, in
// __mirror_state through the runner's sink, in memory only for an ad-hoc
// mirror) before it is taken and once it is done, so a rebuild interrupted
// anywhere (the process killed, an error) is continued from its record by
// whichever runner of the topic works next, on this instance or a new
// owner, without asking the source again:
//
//	planned      the quarantine is created (the recorded name) and each
//	             range copied from where the quarantine's count says
//	quarantined  nothing is copied again; the topic is deleted (unless it
//	             was stopped, its source topic recreated, or the
//	             destination topic is another than the one quarantined:
//	             then the rebuild is abandoned, nothing deleted)
//	deleted      the topic is recreated from the recorded partition count
//	             and configs
//	recreated    done; the recreated topic's id tells every later owner
//	             that its LMEs name offsets of the deleted topic
//
// A step whose record cannot be written is not taken.

// errRebuildAbandoned is replica.ErrRebuildAbandoned.
var errRebuildAbandoned = replica.ErrRebuildAbandoned

// rebuildRecord returns the topic's rebuild record.
func (m *mirror) rebuildRecord(topic string) (store.RebuildRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.rebuildRecs[topic]
	return cloneRebuild(rec), ok
}

// restoreRebuild takes a new owner's rebuild record from __mirror_state,
// unless this instance has one of its own (newer: it wrote it).
func (m *mirror) restoreRebuild(rec store.RebuildRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rebuildRecs[rec.Topic]; ok {
		return
	}
	if m.rebuildRecs == nil {
		m.rebuildRecs = make(map[string]store.RebuildRecord)
	}
	m.rebuildRecs[rec.Topic] = cloneRebuild(rec)
}

// rebuiltAs reports whether the destination topic with id id was created
// by this mirror's rebuild: the LMEs taken before it name offsets it does
// not hold, and that is no loss. The record says so to a new owner too.
func (m *mirror) rebuiltAs(topic string, id [16]byte) bool {
	rec, ok := m.rebuildRecord(topic)
	return ok && id != ([16]byte{}) && rec.Step >= store.RebuildRecreated && rec.Step != store.RebuildAbandoned &&
		rec.DestTopicID == topicIDString(id)
}

// saveRebuild records the rebuild's progress; the in-memory copy changes
// only once the record is durable, so it never runs ahead of what a next
// owner reads.
func (m *mirror) saveRebuild(ctx context.Context, sink *stateSink, rec *store.RebuildRecord) error {
	rec.Owner, rec.UpdatedAt = m.e.cfg.Instance, m.e.now().UTC()
	if sink != nil {
		// An instance the group may have replaced must not go on
		// with a destructive job the new owner may be doing too.
		if err := m.e.gate.Wait(ctx); err != nil {
			return fmt.Errorf("record rebuild of %s (%s): %w", rec.Topic, rec.Step, err)
		}
		if err := sink.PutRebuild(ctx, *rec); err != nil {
			return fmt.Errorf("record rebuild of %s (%s): %w", rec.Topic, rec.Step, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rebuildRecs == nil {
		m.rebuildRecs = make(map[string]store.RebuildRecord)
	}
	m.rebuildRecs[rec.Topic] = cloneRebuild(*rec)
	return nil
}

func cloneRebuild(rec store.RebuildRecord) store.RebuildRecord {
	rec.Configs = maps.Clone(rec.Configs)
	rec.Ranges = slices.Clone(rec.Ranges)
	return rec
}

// quarantineAndRecreate plans a rebuild, records the plan, and takes it
// through every step. Nothing is deleted unless, first, both clusters
// answered everything the recreate needs (partition count, configs) and
// every diverged partition's quarantine copy is complete and recorded.
// from gives partitions whose divergence point is already known.
func (m *mirror) quarantineAndRecreate(ctx context.Context, topic string, from map[int32]int64, sink *stateSink) (store.RebuildRecord, error) {
	plan, err := m.rebuildPlan(ctx, topic, from)
	if err != nil {
		return store.RebuildRecord{}, fmt.Errorf("nothing deleted: %w", err)
	}
	now := m.e.now().UTC()
	rec := store.RebuildRecord{
		Mirror: m.cfg.Name, Topic: topic, Step: store.RebuildPlanned,
		Quarantine:    fmt.Sprintf("%s.kmirror-quarantine-%s-%s", topic, now.Format("20060102T150405.000"), m.cfg.Name),
		Partitions:    int32(len(plan.srcMeta.topics[topic].partitions)),
		Configs:       map[string]string{},
		SourceTopicID: topicIDString(plan.srcID), ReplacedTopicID: topicIDString(plan.dstID),
		StartedAt: now,
	}
	// The rebuilt topic keeps the replaced one's own configs (its
	// retention, min.insync.replicas …) and replication factor; the
	// configs byte-for-byte mirroring needs win over them.
	create := topicCreateConfigs(plan.srcCfgs, topic)
	for k, v := range create {
		rec.Configs[k] = *v
	}
	for k, v := range plan.dstCfgs {
		rec.Configs[k] = v
	}
	for _, k := range []string{"compression.type", "message.timestamp.type"} {
		rec.Configs[k] = *create[k]
	}
	rec.ReplicationFactor = plan.dstRF
	for p := range plan.parts {
		rg := plan.ranges[p]
		rec.Ranges = append(rec.Ranges, store.RebuildRange{Partition: p, From: rg.from, To: max(rg.from, rg.to), Checked: rg.to <= rg.from})
		if k := plan.kept[p]; k.to > k.from {
			rec.Retained = strings.Replace(rec.Quarantine, ".kmirror-quarantine-", ".kmirror-retained-", 1)
		}
	}
	if rec.Retained != "" {
		for p := range plan.parts {
			k := plan.kept[p]
			rec.Kept = append(rec.Kept, store.RebuildRange{Partition: p, From: k.from, To: max(k.from, k.to), Checked: k.to <= k.from})
		}
	}
	if err := m.saveRebuild(ctx, sink, &rec); err != nil {
		return rec, fmt.Errorf("nothing deleted: %w", err)
	}
	return m.continueRebuild(ctx, sink, rec, false)
}

// continueRebuild takes a recorded rebuild from its step to the end.
// resumed says the record was found, not just planned: the quarantine may
// exist already, and hold part of the copy.
func (m *mirror) continueRebuild(ctx context.Context, sink *stateSink, rec store.RebuildRecord, resumed bool) (store.RebuildRecord, error) {
	defer m.rebuildStats(&rec, func(_ *store.RebuildRange, s *partStats) {
		s.EndWork(WorkQuarantine)
		s.EndWork(WorkRetain)
		s.EndWork(WorkRebuildStep)
	})
	for !rec.Step.Finished() {
		var err error
		switch rec.Step {
		case store.RebuildPlanned:
			err = m.rebuildQuarantine(ctx, sink, &rec, resumed)
		case store.RebuildQuarantined:
			err = m.rebuildDelete(ctx, sink, &rec)
		case store.RebuildDeleted:
			err = m.rebuildRecreate(ctx, sink, &rec)
		case store.RebuildRecreated:
			rec.Step = store.RebuildDone
			err = m.saveRebuild(ctx, sink, &rec)
		case store.RebuildNone, store.RebuildDone, store.RebuildAbandoned:
			err = fmt.Errorf("rebuild of %s at step %s cannot go on", rec.Topic, rec.Step)
		}
		if err != nil {
			return rec, err
		}
	}
	if rec.Step == store.RebuildAbandoned {
		return rec, fmt.Errorf("%w: %s", errRebuildAbandoned, rec.Note)
	}
	return rec, nil
}

// settleRebuild ends a recorded rebuild for a stop (failover), with the
// destination alone: a rebuild still copying is abandoned (the topic is
// untouched, the partial copies stay); from the quarantine on it goes on,
// where the delete step abandons it while the topic exists and a topic
// already deleted is recreated from the record. A stop never leaves the
// topic missing.
func (m *mirror) settleRebuild(ctx context.Context, sink *stateSink, rec store.RebuildRecord) (store.RebuildRecord, error) {
	if rec.Step == store.RebuildPlanned {
		rec.Step, rec.Note = store.RebuildAbandoned, "the topic was stopped (failed over) during the copy; nothing deleted, "+rec.Quarantine+" keeps its partial copy"
		if err := m.saveRebuild(ctx, sink, &rec); err != nil {
			return rec, err
		}
		m.e.emit(LevelWarn, m.cfg.Name, rec.Topic, -1, fmt.Sprintf("rebuild of %s abandoned: %s", rec.Topic, rec.Note))
		return rec, nil
	}
	rec, err := m.continueRebuild(ctx, sink, rec, true)
	if errors.Is(err, errRebuildAbandoned) {
		return rec, nil
	}
	return rec, err
}

// rebuildQuarantine creates the recorded quarantine topic (and retained
// topic), copies every range not yet count-checked from where the copy's
// count says, and records each partition checked, then the step
// quarantined.
func (m *mirror) rebuildQuarantine(ctx context.Context, sink *stateSink, rec *store.RebuildRecord, resumed bool) error {
	if err := faultAt(rebuildFaultPlanned); err != nil {
		return fmt.Errorf("nothing deleted: %w", err)
	}
	if err := m.createQuarantine(ctx, sink, rec, resumed); err != nil {
		return fmt.Errorf("nothing deleted: %w", err)
	}
	// What is kept first, the destination-only records last: the
	// quarantine's copy is the one a partition shows complete before the
	// delete.
	if rec.Retained != "" {
		if err := m.createRetained(ctx, sink, rec, resumed); err != nil {
			return fmt.Errorf("nothing deleted: %w", err)
		}
		if err := m.copyRanges(ctx, sink, rec, rec.Retained, rec.Kept, WorkRetain); err != nil {
			return err
		}
	}
	if err := m.copyRanges(ctx, sink, rec, rec.Quarantine, rec.Ranges, WorkQuarantine); err != nil {
		return err
	}
	rec.Step = store.RebuildQuarantined
	if err := m.saveRebuild(ctx, sink, rec); err != nil {
		return fmt.Errorf("nothing deleted: %w", err)
	}
	return nil
}

// copyRanges copies every range of ranges (rec.Ranges into the quarantine,
// or rec.Kept into the retained topic) not yet count-checked into topic q,
// from where q's count says, recording each partition checked.
func (m *mirror) copyRanges(ctx context.Context, sink *stateSink, rec *store.RebuildRecord, q string, ranges []store.RebuildRange, kind WorkKind) error {
	now := m.e.now()
	for _, rg := range ranges {
		s := m.partStats(rec.Topic, rg.Partition)
		if s == nil || rg.To <= rg.From {
			continue // not run here, or nothing to copy: no copy to show
		}
		size, done := rg.To-rg.From, int64(0)
		if rg.Checked {
			done = size // copied before this instance took the rebuild on
		}
		s.StartWork(kind, q, done, size, now)
	}
	for i := range ranges {
		rg := &ranges[i]
		if rg.Checked {
			continue
		}
		stats := m.partStats(rec.Topic, rg.Partition)
		// The quarantine partition holds only this copy's records (the
		// topic is ours, retention -1): its count is how far an
		// interrupted copy got.
		start, held, err := m.e.dst.offsets(ctx, q, rg.Partition)
		if err != nil {
			return fmt.Errorf("nothing deleted: count quarantine %s/%d: %w", q, rg.Partition, err)
		}
		if start != 0 || held > rg.To-rg.From {
			return fmt.Errorf("nothing deleted: quarantine %s/%d holds offsets %d..%d, more than the %d of %s/%d [%d, %d): not written by this rebuild alone",
				q, rg.Partition, start, held-1, rg.To-rg.From, rec.Topic, rg.Partition, rg.From, rg.To)
		}
		if held > 0 {
			m.e.emit(LevelWarn, m.cfg.Name, rec.Topic, rg.Partition,
				fmt.Sprintf("quarantine %s/%d holds %d records of an interrupted copy of [%d, %d): copying the rest after them", q, rg.Partition, held, rg.From, rg.To))
		}
		want, err := m.copyRange(ctx, rec.Topic, q, rg.Partition, rg.From, rg.To, held, func(done int64) {
			if stats != nil {
				stats.WorkDone(kind, done)
			}
		})
		if err != nil {
			return fmt.Errorf("nothing deleted: %w", err)
		}
		// The copy skips transaction markers, so the count to check is
		// what the quarantine partition holds against the range's data
		// records.
		_, end, err := m.e.dst.offsets(ctx, q, rg.Partition)
		if err != nil {
			return fmt.Errorf("nothing deleted: count quarantine %s/%d: %w", q, rg.Partition, err)
		}
		if end != want {
			return fmt.Errorf("nothing deleted: quarantine %s/%d holds %d records, %s/%d [%d, %d) has %d", q, rg.Partition, end, rec.Topic, rg.Partition, rg.From, rg.To, want)
		}
		rg.Copied, rg.Checked = end, true
		if err := m.saveRebuild(ctx, sink, rec); err != nil {
			return fmt.Errorf("nothing deleted: %w", err)
		}
		if stats != nil {
			stats.WorkDone(kind, rg.To-rg.From)
		}
	}
	return nil
}

// createQuarantine creates the quarantine topic the record names,
// <topic>.kmirror-quarantine-<time>-<mirror>: the name says where its
// records come from. It keeps its records until an operator deletes it
// (retention.ms=-1, no size limit, never compacted). A fresh rebuild whose
// name is taken moves on to -2, -3 … (recording the name first: copying
// into a topic someone else filled would mix their records in); a resumed
// one finds its own topic there.
func (m *mirror) createQuarantine(ctx context.Context, sink *stateSink, rec *store.RebuildRecord, resumed bool) error {
	return m.createKeeping(ctx, sink, rec, &rec.Quarantine, int32(len(rec.Ranges)), resumed)
}

// createRetained creates the retained topic the record names,
// <topic>.kmirror-retained-<time>-<mirror>, as createQuarantine does the
// quarantine.
func (m *mirror) createRetained(ctx context.Context, sink *stateSink, rec *store.RebuildRecord, resumed bool) error {
	return m.createKeeping(ctx, sink, rec, &rec.Retained, int32(len(rec.Kept)), resumed)
}

// createKeeping creates the topic *name of the record (nil: none), which
// keeps its records for ever, moving the recorded name on while it is
// taken.
func (m *mirror) createKeeping(ctx context.Context, sink *stateSink, rec *store.RebuildRecord, name *string, parts int32, resumed bool) error {
	keep := map[string]*string{"retention.ms": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1"), "cleanup.policy": kadm.StringPtr("delete")}
	base := *name
	for n := 1; ; n++ {
		resp, err := m.e.dst.adm.CreateTopic(ctx, parts, -1, keep, *name)
		if err == nil {
			err = resp.Err
		}
		if err == nil || resumed && errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || n == 100 {
			return fmt.Errorf("create topic %s: %w", *name, err)
		}
		*name = fmt.Sprintf("%s-%d", base, n+1)
		if rec == nil {
			continue // no record names it (alignment's retained topic)
		}
		if err := m.saveRebuild(ctx, sink, rec); err != nil {
			return err
		}
	}
}

// rebuildDelete deletes the destination topic the rebuild quarantined,
// after checking, right before, that nothing since made that wrong.
func (m *mirror) rebuildDelete(ctx context.Context, sink *stateSink, rec *store.RebuildRecord) error {
	// A stop may have landed, or the source topic been recreated, during
	// the copy (or while nobody ran the topic).
	abandon := ""
	if m.topicStopped(rec.Topic) {
		abandon = "the topic was stopped (failed over)"
	} else if err := m.checkSourceTopicID(rec.Topic, -1, parseTopicID(rec.SourceTopicID)); err != nil {
		abandon = err.Error()
	}
	meta, err := m.e.dst.metadata(ctx, []string{rec.Topic})
	if err != nil {
		return fmt.Errorf("nothing deleted: destination topic %s: %w", rec.Topic, err)
	}
	tm, exists := meta.topics[rec.Topic]
	gone := !exists || errors.Is(tm.err, kerr.UnknownTopicOrPartition)
	if !gone && tm.err != nil {
		return fmt.Errorf("nothing deleted: destination topic %s: %w", rec.Topic, tm.err)
	}
	if !gone && abandon == "" && rec.ReplacedTopicID != "" && topicIDString(tm.id) != rec.ReplacedTopicID {
		abandon = fmt.Sprintf("destination topic %s has topic id %s, not %s, whose records were quarantined: it was recreated meanwhile",
			rec.Topic, topicIDString(tm.id), rec.ReplacedTopicID)
	}
	if abandon != "" && !gone {
		rec.Step, rec.Note = store.RebuildAbandoned, abandon+"; nothing deleted, quarantine "+rec.Quarantine+" keeps its copy"
		if err := m.saveRebuild(ctx, sink, rec); err != nil {
			return fmt.Errorf("nothing deleted: %w", err)
		}
		m.e.emit(LevelError, m.cfg.Name, rec.Topic, -1, fmt.Sprintf("rebuild of %s abandoned: %s", rec.Topic, rec.Note))
		return nil
	}
	if err := faultAt(rebuildFaultQuarantined); err != nil {
		return fmt.Errorf("nothing deleted: %w", err)
	}
	m.rebuildStep(rec, "delete", 0)
	if !gone {
		dresp, err := m.e.dst.adm.DeleteTopics(ctx, rec.Topic)
		if err == nil {
			err = dresp.Error()
		}
		// Gone already: the delete landed before its answer did.
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete destination topic %s: %w", rec.Topic, err)
		}
	}
	rec.Step = store.RebuildDeleted
	return m.saveRebuild(ctx, sink, rec)
}

// rebuildRecreate creates the destination topic again from the record,
// retrying while the destination does not answer. A topic found there is
// taken as the recreated one (the create landed and its record did not):
// alignment verifies whatever it holds against the source.
func (m *mirror) rebuildRecreate(ctx context.Context, sink *stateSink, rec *store.RebuildRecord) error {
	if err := faultAt(rebuildFaultDeleted); err != nil {
		return fmt.Errorf("recreate destination topic %s: %w", rec.Topic, err)
	}
	m.rebuildStep(rec, "recreate", 1)
	b := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}}
	var id [16]byte
	var err error
	for {
		id, err = m.e.recreateTopic(ctx, rec.Topic, rec.Partitions, rec.ReplicationFactor, rec.Configs)
		if err == nil || ctx.Err() != nil || b.Attempt() >= 10 {
			break
		}
		if backoff.Sleep(ctx, b.Next(m.e.jitter)) != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("recreate destination topic %s (the rebuild record has what it needs; the next attempt creates it): %w", rec.Topic, err)
	}
	rec.Step, rec.DestTopicID = store.RebuildRecreated, topicIDString(id)
	return m.saveRebuild(ctx, sink, rec)
}

// recreateTopic creates a destination topic with parts partitions and
// configs, or returns the id of the one already there.
func (e *Engine) recreateTopic(ctx context.Context, topic string, parts int32, rf int16, configs map[string]string) ([16]byte, error) {
	meta, err := e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return [16]byte{}, err
	}
	if tm, ok := meta.topics[topic]; ok && tm.err == nil {
		return tm.id, nil
	}
	want := make(map[string]*string, len(configs))
	for k, v := range configs {
		want[k] = kadm.StringPtr(v)
	}
	if rf <= 0 || int(rf) > len(meta.brokers) {
		// A record of an earlier release, or fewer brokers now.
		rf = int16(min(3, len(meta.brokers)))
	}
	resp, err := e.dst.adm.CreateTopic(ctx, parts, rf, want, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return [16]byte{}, fmt.Errorf("create destination topic %s: %w", topic, err)
	}
	e.emit(LevelInfo, "", topic, -1, fmt.Sprintf("created destination topic %s with %d partitions", topic, parts))
	if resp.ID != ([16]byte{}) {
		return resp.ID, nil
	}
	meta, err = e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return [16]byte{}, err
	}
	return meta.topics[topic].id, nil
}

// rebuildSteps is how many steps follow a rebuild's quarantine in its
// published progress: the delete and the recreate.
const rebuildSteps = 2

// rebuildStep publishes the rebuild step starting on every partition of
// the topic run here, done of the rebuildSteps done.
func (m *mirror) rebuildStep(rec *store.RebuildRecord, step string, done int64) {
	now := m.e.now()
	m.rebuildStats(rec, func(_ *store.RebuildRange, s *partStats) {
		s.StartWork(WorkRebuildStep, step, done, rebuildSteps, now)
	})
}

// rebuildStats calls f with the stats of every partition of the rebuild
// that runs here: the rebuild publishes its progress on each of them,
// whichever partition's runner does it.
func (m *mirror) rebuildStats(rec *store.RebuildRecord, f func(rg *store.RebuildRange, s *partStats)) {
	for i := range rec.Ranges {
		if s := m.partStats(rec.Topic, rec.Ranges[i].Partition); s != nil {
			f(&rec.Ranges[i], s)
		}
	}
}

// partStats returns the stats of a partition run here, nil otherwise.
func (m *mirror) partStats(topic string, p int32) *partStats {
	if r := m.runner(topic, p); r != nil {
		return r.Stats()
	}
	return nil
}
