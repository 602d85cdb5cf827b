package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// observeState is what the observer's loop owns: the catalog and what it
// remembers of earlier looks (for rates, lag in time and reachability).
type observeState struct {
	cat      *store.Catalog
	consumed map[int32]int64 // next offset to read, by shard
	target   map[int32]int64 // the shards' ends when the observer started; nil until listed
	caughtUp bool

	destID   string
	dstReach reach
	sources  map[string]*observedSource // by mirror
	parts    map[store.PartitionRef]*observedPart
	lost     map[string]bool // instances told lost, so it is told once
}

func newObserveState() *observeState {
	return &observeState{cat: store.NewCatalog(), consumed: map[int32]int64{},
		sources: map[string]*observedSource{}, parts: map[store.PartitionRef]*observedPart{}, lost: map[string]bool{}}
}

// observedSource is the observer's own client to a mirror's source.
type observedSource struct {
	def   string // the definition it was made from, to notice a change
	c     *cluster
	err   error // the client could not be made (bad settings)
	id    string
	reach reach
}

// observedPart remembers one partition across looks.
type observedPart struct {
	srcEnd, dstEnd int64 // last known ends, -1 unknown
	dstAt          time.Time
	rate           float64
	hist           []hwmSample // source ends seen, oldest first, one per change
}

type hwmSample struct {
	at  time.Time
	end int64
}

// maxHistory bounds the source ends remembered per partition: enough for
// a lag in time over minutes of a busy partition, a few KiB each.
const maxHistory = 64

// look is one round of polls: what each cluster answered.
type look struct {
	dstErr  error
	dstID   string
	dstEnds map[string]map[int32]int64
	target  map[int32]int64 // __mirror_state ends, when asked
	noState bool            // the destination has no __mirror_state
	src     map[string]*sourceLook
}

type sourceLook struct {
	err  error
	ends map[string]map[int32]int64
	meta clusterMeta
}

// poll asks every cluster at once, each bounded by the poll timeout, so a
// source that does not answer delays nothing but its own mirror's numbers.
func (o *Observer) poll(ctx context.Context, st *observeState) look {
	pctx, cancel := context.WithTimeout(ctx, o.cfg.PollTimeout)
	defer cancel()
	lk := look{src: map[string]*sourceLook{}}
	var all []string
	var wg sync.WaitGroup
	for _, name := range st.cat.MirrorNames() {
		topics := topicNames(st.cat, name)
		all = append(all, topics...)
		src := o.sourceFor(st, name)
		sl := &sourceLook{err: src.err}
		lk.src[name] = sl
		if src.c == nil || len(topics) == 0 {
			continue
		}
		wg.Go(func() {
			sl.ends, sl.err = src.c.endOffsets(pctx, topics...)
			if sl.err == nil {
				sl.meta, _ = src.c.leaders.get(pctx, time.Time{})
			}
		})
	}
	slices.Sort(all)
	all = slices.Compact(all)
	wg.Go(func() {
		meta, err := o.dst.metadata(pctx, []string{})
		if err != nil {
			lk.dstErr = err
			return
		}
		lk.dstID = meta.clusterID
		if !st.caughtUp && st.target == nil {
			lk.target, lk.noState, lk.dstErr = o.stateEnds(pctx)
			if lk.dstErr != nil {
				return
			}
		}
		if len(all) > 0 {
			lk.dstEnds, lk.dstErr = o.dst.endOffsets(pctx, all...)
		}
	})
	wg.Wait()
	return lk
}

// stateEnds lists the end of every non-empty shard of __mirror_state: the
// observer has read the state once it has consumed up to them.
func (o *Observer) stateEnds(ctx context.Context) (map[int32]int64, bool, error) {
	ends, err := o.dst.adm.ListEndOffsets(ctx, store.Topic)
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list %s ends: %w", store.Topic, err)
	}
	starts, err := o.dst.adm.ListStartOffsets(ctx, store.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, false, fmt.Errorf("list %s starts: %w", store.Topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := starts.Lookup(store.Topic, e.Partition); ok && e.Offset > s.Offset {
			want[e.Partition] = e.Offset
		}
	})
	return want, false, nil
}

// sourceFor returns the observer's client to a mirror's source, made anew
// when the definition changed (a new bootstrap or settings).
func (o *Observer) sourceFor(st *observeState, mirror string) *observedSource {
	def := st.cat.Mirrors[mirror]
	fp := fmt.Sprint(def.SourceBootstrap, def.SourceConfig)
	src := st.sources[mirror]
	if src != nil && src.def == fp {
		return src
	}
	if src != nil && src.c != nil {
		src.c.close()
	}
	src = &observedSource{def: fp}
	c, err := sourceClient(def, kgo.WithLogger(logging.KgoRaw(o.log.With(logging.Cluster, "source", logging.Mirror, mirror))))
	src.c, src.err = c, err
	st.sources[mirror] = src
	return src
}

func topicNames(cat *store.Catalog, mirror string) []string {
	var out []string
	for _, t := range cat.TopicsOf(mirror) {
		out = append(out, t.Topic)
	}
	return out
}

// refresh looks at the clusters and builds a snapshot; ok is false while
// the observer has not read __mirror_state to its end and the destination
// answers (the catalog is still being replayed).
func (o *Observer) refresh(ctx context.Context, st *observeState) (Snapshot, bool) {
	lk := o.poll(ctx, st)
	o.drain(st) // records that arrived while polling
	now := o.now()
	o.noteDest(st, lk, now)
	if lk.target != nil || lk.noState {
		st.target = lk.target
		if lk.noState {
			st.target = map[int32]int64{}
		}
	}
	if !st.caughtUp && st.target != nil {
		st.caughtUp = true
		for p, end := range st.target {
			if st.consumed[p] < end {
				st.caughtUp = false
			}
		}
	}
	if !st.caughtUp && lk.dstErr == nil {
		return Snapshot{}, false
	}
	snap := Snapshot{Taken: now, Observer: true, Destination: ClusterInfo{ID: st.destID, Bootstrap: o.cfg.Destination}, DestReach: st.dstReach.state()}
	for _, name := range st.cat.MirrorNames() {
		snap.Mirrors = append(snap.Mirrors, o.mirrorSnapshot(st, name, lk, now))
	}
	o.forget(st)
	if st.caughtUp {
		o.judgeOwners(st, &snap, now)
	}
	return snap, true
}

// noteDest records the destination's answer and tells of a change.
func (o *Observer) noteDest(st *observeState, lk look, now time.Time) {
	if lk.dstErr == nil {
		st.destID = cmp.Or(lk.dstID, st.destID)
		if wasDown, downFor := st.dstReach.ok(now); wasDown {
			o.emit(LevelInfo, "", "", -1, fmt.Sprintf("destination cluster %s answers again after %s",
				strings.Join(o.cfg.Destination, ","), downFor.Round(time.Second)), clusterAttr("destination"))
		}
		return
	}
	if st.dstReach.failed(now, lk.dstErr) {
		o.emit(LevelError, "", "", -1, fmt.Sprintf("destination cluster %s does not answer this console: %v",
			strings.Join(o.cfg.Destination, ","), lk.dstErr), clusterAttr("destination"))
	}
}

// mirrorSnapshot builds one mirror: every partition of its started topics
// with a record, and those the source has that no instance recorded yet.
func (o *Observer) mirrorSnapshot(st *observeState, name string, lk look, now time.Time) MirrorSnapshot {
	cat := st.cat
	def := cat.Mirrors[name]
	src := o.sourceFor(st, name)
	sl := lk.src[name]
	if sl == nil { // the mirror was created while the clusters were polled
		sl = &sourceLook{}
	}
	if sl.err == nil && sl.ends != nil {
		src.id = cmp.Or(sl.meta.clusterID, src.id)
		if wasDown, downFor := src.reach.ok(now); wasDown {
			o.emit(LevelInfo, name, "", -1, fmt.Sprintf("source cluster %s answers this console again after %s",
				strings.Join(def.SourceBootstrap, ","), downFor.Round(time.Second)), clusterAttr("source"))
		}
	} else if sl.err != nil && src.reach.failed(now, sl.err) {
		o.emit(LevelError, name, "", -1, fmt.Sprintf("source cluster %s does not answer this console: %v",
			strings.Join(def.SourceBootstrap, ","), sl.err), clusterAttr("source"))
	}
	ms := MirrorSnapshot{Name: name, Source: ClusterInfo{ID: cmp.Or(src.id, def.SourceClusterID), Bootstrap: def.SourceBootstrap}}
	ms.SourceReach = sourceReachOf(src.reach.state(), cat, name, now)
	for _, t := range cat.TopicsOf(name) {
		seen := map[int32]bool{}
		for _, r := range cat.PartitionsOf(name, t.Topic) {
			seen[r.Partition] = true
			ms.Partitions = append(ms.Partitions, o.partitionSnapshot(st, name, t.Topic, r.Partition, &r, sl, lk.dstEnds, now))
		}
		for _, p := range slices.Sorted(maps.Keys(sl.ends[t.Topic])) {
			if !seen[p] {
				ms.Partitions = append(ms.Partitions, o.partitionSnapshot(st, name, t.Topic, p, nil, sl, lk.dstEnds, now))
			}
		}
	}
	slices.SortFunc(ms.Partitions, func(a, b PartitionSnapshot) int {
		return cmp.Or(compareStrings(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if ms.SourceReach.Down {
		outage(ms.Partitions, ms.SourceReach, now)
	}
	return ms
}

// sourceReachOf joins the observer's own look at a source with what the
// live instances' heartbeats say of it: an outage either sees is shown
// (the instances are the ones that must reach it; the console must to
// know the lag), and the error says who sees it.
func sourceReachOf(own Reachability, cat *store.Catalog, mirror string, now time.Time) Reachability {
	out := own
	if own.Down {
		out.Error = "this console: " + own.Error
	}
	for _, id := range slices.Sorted(maps.Keys(cat.Instances)) {
		h := cat.Instances[id]
		if !h.Live(now, HeartbeatMisses) {
			continue
		}
		for _, m := range h.Mirrors {
			if m.Name != mirror {
				continue
			}
			switch m.Source.State {
			case store.ReachReachable:
				if m.Source.At.After(out.LastOK) {
					out.LastOK = m.Source.At
				}
			case store.ReachUnreachable:
				msg := fmt.Sprintf("instance %s: %s", id, m.Source.Error)
				if !out.Down || m.Source.At.Before(out.DownSince) {
					out.DownSince = m.Source.At
				}
				if out.Down {
					msg = out.Error + "; " + msg
				}
				out.Down, out.Error = true, msg
			case store.ReachUnknown:
			}
		}
	}
	return out
}

// partitionSnapshot builds one partition from its record (nil when none
// is written yet) and the ends listed this round, falling back to the last
// known ends while a cluster has missed fewer checks than make it down.
func (o *Observer) partitionSnapshot(st *observeState, mirror, topic string, p int32, r *store.PartitionRecord, sl *sourceLook, dstEnds map[string]map[int32]int64, now time.Time) PartitionSnapshot {
	ref := store.PartitionRef{Mirror: mirror, Topic: topic, Partition: p}
	op := st.parts[ref]
	if op == nil {
		op = &observedPart{srcEnd: -1, dstEnd: -1}
		st.parts[ref] = op
	}
	var recorded string
	ps := PartitionSnapshot{Mirror: mirror, Topic: topic, Partition: p, State: partition.Unknown,
		SourceLogStart: -1, SourceHWM: -1, DestLogEnd: -1, SourceEpoch: -1, SourceLeader: -1, LastOffset: -1, LastEpoch: -1}
	if r != nil {
		recorded = r.Owner
		ps.State, ps.PrevState, ps.Attempt, ps.NextRetry = r.State, r.PrevState, r.Attempt, r.NextRetry
		ps.Error, ps.Retryable, ps.Cause = r.Error, r.Retryable, r.Cause
		ps.LastOffset, ps.LastEpoch, ps.WriterEpoch = r.LastOffset, r.LastEpoch, r.WriterEpoch
		ps.SourceTopicID, ps.DestTopicID = r.SourceTopicID, r.DestTopicID
		for _, l := range r.Lineage {
			ps.Lineage = append(ps.Lineage, EpochStart{Epoch: l.Epoch, StartOffset: l.Start})
		}
		for _, tx := range r.Txns {
			if tx.Open {
				ps.OpenTxns++
			}
		}
	}
	ps.Owner = ownerOf(st.cat, mirror, topic, recorded, now).owner
	if rec, ok := st.cat.Rebuilds[store.TopicRef{Mirror: mirror, Topic: topic}]; ok {
		ps.Progress = recordedProgress(&rec, p, now)
	}
	if e, ok := sl.ends[topic][p]; ok {
		op.srcEnd = e
		if n := len(op.hist); n == 0 || op.hist[n-1].end != e {
			op.hist = append(op.hist, hwmSample{at: now, end: e})
			if len(op.hist) > maxHistory {
				op.hist = slices.Delete(op.hist, 0, len(op.hist)-maxHistory)
			}
		}
	}
	if tm, ok := sl.meta.topics[topic]; ok && int(p) < len(tm.partitions) {
		ps.SourceEpoch, ps.SourceLeader = tm.partitions[p].epoch, tm.partitions[p].leader
	}
	if e, ok := dstEnds[topic][p]; ok {
		if !op.dstAt.IsZero() && op.dstEnd >= 0 {
			if dt := now.Sub(op.dstAt).Seconds(); dt > 0 {
				op.rate = float64(max(0, e-op.dstEnd)) / dt
			}
		}
		op.dstEnd, op.dstAt = e, now
	}
	ps.SourceHWM, ps.DestLogEnd, ps.RecordsPerSec = op.srcEnd, op.dstEnd, op.rate
	if ps.SourceHWM >= 0 && ps.DestLogEnd >= 0 {
		ps.Lag = max(0, ps.SourceHWM-ps.DestLogEnd)
		ps.LagTime = op.lagTime(ps.DestLogEnd, now)
	}
	return ps
}

// lagTime estimates how long ago the source first held a record the
// destination does not: the first source end seen beyond the destination's.
// With no end seen at or below it, the estimate is a lower bound (the
// observer has not watched long enough).
func (op *observedPart) lagTime(dstEnd int64, now time.Time) time.Duration {
	for _, s := range op.hist {
		if s.end > dstEnd {
			return max(0, now.Sub(s.at))
		}
	}
	return 0
}

// forget drops the memory of partitions no longer in the catalog.
func (o *Observer) forget(st *observeState) {
	for ref := range st.parts {
		if _, ok := st.cat.Topics[store.TopicRef{Mirror: ref.Mirror, Topic: ref.Topic}]; !ok {
			delete(st.parts, ref)
		}
	}
	for name, src := range st.sources {
		if _, ok := st.cat.Mirrors[name]; !ok {
			if src.c != nil {
				src.c.close()
			}
			delete(st.sources, name)
		}
	}
}

// judgeOwners counts the partitions no live instance owns and names the
// lost instances recorded as their owners, telling of each once.
func (o *Observer) judgeOwners(st *observeState, snap *Snapshot, now time.Time) {
	lost := map[string]*LostInstance{}
	for _, m := range snap.Mirrors {
		for _, p := range m.Partitions {
			if p.State == partition.Stopped {
				continue
			}
			rec := st.cat.Partitions[store.PartitionRef{Mirror: m.Name, Topic: p.Topic, Partition: p.Partition}]
			own := ownerOf(st.cat, m.Name, p.Topic, rec.Owner, now)
			if own.status == OwnerLive {
				continue
			}
			snap.Unowned.Partitions++
			if own.status != OwnerLost || own.owner == "" {
				continue
			}
			li := lost[own.owner]
			if li == nil {
				li = &LostInstance{ID: own.owner}
				if h, ok := st.cat.Instances[own.owner]; ok {
					li.LastHeartbeat = h.At
				}
				lost[own.owner] = li
			}
			li.Partitions++
			if li.LastHeartbeat.After(snap.Unowned.Since) {
				snap.Unowned.Since = li.LastHeartbeat
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(lost)) {
		snap.Lost = append(snap.Lost, *lost[id])
		if !st.lost[id] {
			st.lost[id] = true
			o.emit(LevelError, "", "", -1, fmt.Sprintf("instance %s lost: no heartbeat for %s; %d partitions it owned have no live owner",
				id, heartbeatAge(lost[id].LastHeartbeat, now), lost[id].Partitions))
		}
	}
	for id := range st.lost {
		if _, ok := lost[id]; !ok {
			delete(st.lost, id)
			o.emit(LevelInfo, "", "", -1, fmt.Sprintf("instance %s no longer owns partitions without a live owner", id))
		}
	}
}

func heartbeatAge(at, now time.Time) string {
	if at.IsZero() {
		return "ever (none read)"
	}
	return now.Sub(at).Round(time.Second).String()
}
