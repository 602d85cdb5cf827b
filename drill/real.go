package drill

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// RealConfig says how the drill reaches a real mirror's destination.
type RealConfig struct {
	// Bootstrap is the destination cluster (B).
	Bootstrap []string
	// Security is the destination client's resolved security settings
	// (--command-config); the source is reached with the mirror's own.
	Security map[string]string
	// Poll is how often the switch step looks for the clients on B
	// (default 250ms): a first consume is known to within it.
	Poll time.Duration
}

// realTarget is a mirror between real clusters. The operator takes the
// source away and moves the clients, and confirms each; the drill never
// writes to either cluster except the stop kmirror itself records. What it
// measures comes from offsets and group state: the source's log end against
// the last mirrored offset for the loss, B's logs and group commits for the
// switch, the groups' synced offsets for what is read again.
type realTarget struct {
	cfg RealConfig
	dst cluster

	// Set by the steps; only the running step touches them.
	source, destinationName string
	rpo                     RPO
	failoverEnds            map[string]int64 // "topic/p" → the source's log end at the failover, where known
	stopEnds                offsets          // B's log ends when every partition had STOPPED
	newOnB                  map[string]int64 // offsets written to B since the stop, by topic
	stoppedAll              bool
	positions               []GroupPosition
}

// RealTarget returns the drill target of a mirror between real clusters.
func RealTarget(cfg RealConfig) (Target, error) {
	if len(cfg.Bootstrap) == 0 {
		return nil, errors.New("drill: the destination's bootstrap servers are required")
	}
	opts, err := engine.SecurityOpts(cfg.Security)
	if err != nil {
		return nil, fmt.Errorf("drill: destination security: %w", err)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	return &realTarget{cfg: cfg, dst: cluster{name: "B", bootstrap: cfg.Bootstrap, opts: opts}}, nil
}

func (t *realTarget) kind() string { return "real" }

func (t *realTarget) Clusters() (source, destination string) {
	src, dst := t.source, t.destinationName
	if src == "" {
		src = "the mirror's source"
	}
	if dst == "" {
		dst = strings.Join(t.cfg.Bootstrap, ",")
	}
	return src, dst
}

func (t *realTarget) Instruction(id StepID) string {
	switch id {
	case StepOutage:
		return "Take A away from the mirror now: stop its brokers or block kmirror's access to them. " +
			"For a planned failover, stop the producers on A instead and leave A up. Tick when done."
	case StepSwitch:
		return "Point your producers and consumer groups at B (" + strings.Join(t.cfg.Bootstrap, ",") +
			") and start them; tick when they run there."
	case StepPreflight, StepSnapshot, StepFailover, StepVerify, StepFailback, StepReport:
	}
	return ""
}

func (t *realTarget) describe(id StepID) stepText {
	txt := stepText{title: id.Title(), explain: id.Explain(), lookAt: id.LookAt()}
	switch id {
	case StepOutage:
		txt.explain = "The outage is yours: the drill records when you confirm it and checks whether A still answers."
		txt.lookAt = "events view (tab): the mirror's fetches from A fail; this panel: whether A still answers"
	case StepSwitch:
		txt.explain = "The clients are yours to move; groups resume on B from the offsets the mirror synced there."
		txt.lookAt = "this panel: the first write and the first group commit seen on B, the RTO"
	case StepVerify:
		txt.explain = "Offsets and group state tell the loss (A's log end beyond the last mirrored offset), what groups read again, and whether B is writable."
		txt.lookAt = "this panel: RPO, group positions on B against the synced ones"
	case StepFailback:
		txt.explain = "Plan the failback without running it: per partition, B's delta to copy back, or DIVERGED where A holds offsets B never got. Nothing is written to A."
		txt.lookAt = "this panel: the plan per partition and the commands that run it"
	case StepPreflight, StepSnapshot, StepFailover, StepReport:
	}
	return txt
}

func (t *realTarget) destination() cluster { return t.dst }

// audit has nothing to hold the report against: real clusters keep no
// ledger of what their producers were told.
func (t *realTarget) audit(context.Context, *Report, map[string]int64) []AuditCheck { return nil }

func (t *realTarget) wantTopics() []string { return nil }

// describeMirror reads the mirror's partitions from B's __mirror_state with
// live offsets: SourceOffset is -1 where the source does not answer.
func (t *realTarget) describeMirror(ctx context.Context, mirror string) ([]engine.DescribeRow, error) {
	adm, err := engine.NewAdmin(ctx, t.cfg.Bootstrap, t.cfg.Security, 30*time.Second)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	rows, err := adm.Describe(ctx, mirror)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", mirror, err)
	}
	return rows, nil
}

func sourceAnswers(rows []engine.DescribeRow) (answered, all int) {
	for _, r := range rows {
		if r.SourceOffset >= 0 {
			answered++
		}
	}
	return answered, len(rows)
}

// preflight names the clusters and checks the source answers the mirror's
// own settings.
func (t *realTarget) preflight(ctx context.Context, r *stepRun) error {
	d := r.d
	snap := d.cfg.Engine.Snapshot()
	t.destinationName = snap.Destination.ID + " " + strings.Join(snap.Destination.Bootstrap, ",")
	if m, ok := d.mirrorIn(snap); ok {
		t.source = m.Source.ID + " " + strings.Join(m.Source.Bootstrap, ",")
	}
	rows, err := t.describeMirror(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}
	if n, all := sourceAnswers(rows); n < all {
		return fmt.Errorf("the source answered for %d of %d partitions: a drill starts from a healthy mirror", n, all)
	}
	r.line("source %s answers for all %d partitions", t.source, len(rows))
	return nil
}

func (t *realTarget) snapshot(r *stepRun) {
	r.line("no producer acknowledgements are known here: the loss is read from A's log ends at the failover")
}

// outage records the operator's confirmation as the outage time and checks
// whether the source still answers: if it does, this is a planned failover
// and the loss can be read from its log ends.
func (t *realTarget) outage(ctx context.Context, r *stepRun) error {
	d := r.d
	d.m.outageAt = r.confirmed()
	if d.m.outageAt.IsZero() {
		return ErrNeedsConfirm
	}
	r.line("outage confirmed at %s; the mirror's worst lag time then: %s", d.m.outageAt.Format("15:04:05.000"), d.m.lagAtOutage.Round(time.Millisecond))
	rows, err := t.describeMirror(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}
	n, all := sourceAnswers(rows)
	var lag int64
	for _, row := range rows {
		lag += row.Lag
	}
	switch {
	case n == 0:
		r.line("A does not answer: an unplanned failover; the loss in records cannot be read from A")
	case n < all:
		r.line("A answers for %d of %d partitions", n, all)
	default:
		r.line("A still answers (a planned failover): %d offsets not yet mirrored; the loss is read from A when the failover completes", lag)
	}
	return nil
}

// afterFailover reads, per partition, the source's log end against the
// last mirrored offset the stop recorded: the offsets B will never get.
// It also notes B's log ends, so the switch can tell the clients' writes
// from kmirror's.
func (t *realTarget) afterFailover(ctx context.Context, r *stepRun) error {
	d := r.d
	ends, err := endOffsets(ctx, t.dst, d.m.topics)
	if err != nil {
		return err
	}
	t.stopEnds = ends
	rows, err := t.describeMirror(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}
	t.rpo = rpoFromRows(rows, d.cfg.Now())
	t.failoverEnds = map[string]int64{}
	for _, p := range t.rpo.Partitions {
		if p.SourceEnd >= 0 {
			t.failoverEnds[ptKey(p.Topic, p.Partition)] = p.SourceEnd
		}
	}
	t.rpo.Seconds = d.m.lagAtOutage.Seconds()
	r.line("RPO %s", rpoLine(t.rpo))
	return nil
}

// rpoFromRows computes the loss by offsets from --describe rows: per
// partition, the source's log end minus the offset after the last mirrored
// one. Any partition the source did not answer for makes the total
// unknown; the ones it did answer for are kept.
func rpoFromRows(rows []engine.DescribeRow, at time.Time) RPO {
	rpo := RPO{Method: RPOOffsets, Known: true, ByTopic: map[string]int64{}, MeasuredAt: at}
	unanswered := 0
	for _, row := range rows {
		p := PartitionRPO{Topic: row.Topic, Partition: row.Partition, SourceEnd: row.SourceOffset, LME: row.LastMirrorOffset}
		if p.SourceEnd < 0 {
			unanswered++
		} else {
			p.Unmirrored = max(0, p.SourceEnd-(p.LME+1))
			rpo.Records += p.Unmirrored
			rpo.ByTopic[p.Topic] += p.Unmirrored
		}
		rpo.Partitions = append(rpo.Partitions, p)
	}
	switch {
	case len(rows) == 0:
		rpo.Known, rpo.Unknown = false, "the mirror has no partitions in __mirror_state"
	case unanswered == len(rows):
		rpo.Known, rpo.Unknown = false, "source unreachable"
	case unanswered > 0:
		rpo.Known = false
		rpo.Unknown = fmt.Sprintf("source unreachable for %d of %d partitions (%d offsets unmirrored on the others)", unanswered, len(rows), rpo.Records)
	}
	if !rpo.Known {
		rpo.Records = 0
	}
	return rpo
}

func rpoLine(r RPO) string {
	if !r.Known {
		return "unknown, " + r.Unknown
	}
	var per []string
	for _, t := range slices.Sorted(maps.Keys(r.ByTopic)) {
		if n := r.ByTopic[t]; n > 0 {
			per = append(per, fmt.Sprintf("%s %d", t, n))
		}
	}
	s := fmt.Sprintf("%d offsets on A beyond the last mirrored offset (records and transaction markers)", r.Records)
	if len(per) > 0 {
		s += ": " + strings.Join(per, ", ")
	}
	return s
}

// switchClients waits, after the operator confirmed the clients moved, for
// evidence on B: a write to a mirrored topic beyond where the stop left its
// log, and a commit of a synced group that differs from what the sync
// wrote. The first write's time is its record timestamp; a commit carries
// none, so the first consume is when the drill saw it.
func (t *realTarget) switchClients(ctx context.Context, r *stepRun) error {
	d := r.d
	if d.m.outageAt.IsZero() || t.stopEnds == nil {
		return errNoMeasure
	}
	synced := syncedPositions(d.m.synced)
	watched := 0
	for _, ps := range synced {
		watched += len(ps)
	}
	r.line("clients confirmed on B at %s; watching B's log ends and %d groups (%d partitions) synced there", r.confirmed().Format("15:04:05.000"), len(synced), watched)
	var grown offsets
	var produceSeen, consumeSeen time.Time
	var moved string
	look := func() bool {
		if produceSeen.IsZero() {
			if ends, err := endOffsets(ctx, t.dst, d.m.topics); err == nil {
				if g := grownSince(t.stopEnds, ends); len(g) > 0 {
					grown, produceSeen = g, d.cfg.Now()
				}
			}
		}
		if consumeSeen.IsZero() && len(synced) > 0 {
			if g, p, ok := t.groupMoved(ctx, synced); ok {
				moved, consumeSeen = fmt.Sprintf("%s %s", g, p), d.cfg.Now()
			}
		}
		return !produceSeen.IsZero() && (!consumeSeen.IsZero() || len(synced) == 0)
	}
	WaitFor(ctx, d.cfg.StepTimeout, t.cfg.Poll, look)
	if produceSeen.IsZero() {
		return fmt.Errorf("no new record on B's mirrored topics within %s of confirming: are the producers writing to B (%s)?",
			d.cfg.StepTimeout, strings.Join(t.cfg.Bootstrap, ","))
	}
	first := firstTimestamp(ctx, t.dst, grown)
	d.m.firstProduceB = produceSeen
	if !first.IsZero() {
		d.m.firstProduceB = first
	}
	r.line("first write on B after the failover: %s +%s after the outage (%s)", d.m.firstProduceB.Format("15:04:05.000"),
		d.m.firstProduceB.Sub(d.m.outageAt).Round(time.Millisecond), grownText(grown))
	switch {
	case len(synced) == 0:
		r.line("no consumer group offsets were synced by %s: the first consume on B is not measured", d.cfg.Mirror)
	case consumeSeen.IsZero():
		r.line("no synced group committed on B within %s", d.cfg.StepTimeout)
		d.m.anomaly("switch: no synced consumer group committed on B within %s of confirming the switch", d.cfg.StepTimeout)
	default:
		d.m.firstConsumeB = consumeSeen
		r.line("first group commit seen on B: %s (%s), +%s after the outage", consumeSeen.Format("15:04:05.000"), moved,
			consumeSeen.Sub(d.m.outageAt).Round(time.Millisecond))
	}
	r.line("RTO %s", d.rto().Round(time.Millisecond))
	return nil
}

// syncedPositions returns, per group, what the mirror's sync had last
// written to B for each partition before the failover.
func syncedPositions(groups map[string]engine.GroupSnapshot) map[string]map[string]engine.GroupPartition {
	out := map[string]map[string]engine.GroupPartition{}
	for _, g := range groups {
		if g.LastSync.IsZero() || len(g.Partitions) == 0 {
			continue
		}
		out[g.Group] = map[string]engine.GroupPartition{}
		for _, p := range g.Partitions {
			out[g.Group][ptKey(p.Topic, p.Partition)] = p
		}
	}
	return out
}

// groupMoved reports the first synced group whose commit on B differs from
// what the sync wrote.
func (t *realTarget) groupMoved(ctx context.Context, synced map[string]map[string]engine.GroupPartition) (group, part string, ok bool) {
	for _, g := range slices.Sorted(maps.Keys(synced)) {
		onB, err := groupOffsets(ctx, t.dst, g)
		if err != nil {
			continue
		}
		for tp, ps := range onB {
			for p, o := range ps {
				k := ptKey(tp, p)
				if s, known := synced[g][k]; !known || o != s.Destination {
					return g, k, true
				}
			}
		}
	}
	return "", "", false
}

// grownSince returns the partitions whose log end moved past before, with
// the offset where the new records start.
func grownSince(before, now offsets) offsets {
	out := offsets{}
	for tp, ps := range now {
		for p, e := range ps {
			if b, ok := before[tp][p]; ok && e > b {
				if out[tp] == nil {
					out[tp] = map[int32]int64{}
				}
				out[tp][p] = b
			}
		}
	}
	return out
}

func grownText(g offsets) string {
	var parts []string
	for _, tp := range slices.Sorted(maps.Keys(g)) {
		for _, p := range slices.Sorted(maps.Keys(g[tp])) {
			parts = append(parts, ptKey(tp, p))
		}
	}
	if len(parts) > 4 {
		return fmt.Sprintf("%s and %d more partitions", strings.Join(parts[:4], ", "), len(parts)-4)
	}
	return strings.Join(parts, ", ")
}

// firstTimestamp reads the first record at each given offset and returns
// the earliest timestamp (zero when none could be read in a few seconds).
func firstTimestamp(ctx context.Context, c cluster, from offsets) time.Time {
	assign := map[string]map[int32]kgo.Offset{}
	n := 0
	for tp, ps := range from {
		assign[tp] = map[int32]kgo.Offset{}
		for p, o := range ps {
			assign[tp][p] = kgo.NewOffset().At(o)
			n++
		}
	}
	cl, err := kgo.NewClient(c.clientOpts("kmirror-drill-reader", kgo.ConsumePartitions(assign))...)
	if err != nil {
		return time.Time{}
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var first time.Time
	seen := map[string]bool{}
	for len(seen) < n && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(rec *kgo.Record) {
			k := ptKey(rec.Topic, rec.Partition)
			if seen[k] {
				return
			}
			seen[k] = true
			if first.IsZero() || rec.Timestamp.Before(first) {
				first = rec.Timestamp
			}
		})
	}
	return first
}

// verify reads the state the failover left: every partition STOPPED (what
// makes B's topics the clients' own), the loss (measured now if A was
// unreachable at the failover and answers again), writes that still reached
// A after it, and each synced group's position on B.
func (t *realTarget) verify(ctx context.Context, r *stepRun) error {
	d := r.d
	if d.m.stopDone.IsZero() {
		return errNoMeasure
	}
	rows, err := t.describeMirror(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}
	stopped := 0
	for _, row := range rows {
		if row.State == partition.Stopped.String() {
			stopped++
		}
	}
	t.stoppedAll = stopped == len(rows) && len(rows) > 0
	ends, err := endOffsets(ctx, t.dst, d.m.topics)
	if err != nil {
		return err
	}
	t.newOnB = map[string]int64{}
	for tp, ps := range grownSince(t.stopEnds, ends) {
		for p, from := range ps {
			t.newOnB[tp] += ends[tp][p] - from
		}
	}
	d.m.bWritable = t.stoppedAll
	r.line("%d of %d partitions STOPPED in __mirror_state on B: kmirror writes none of them", stopped, len(rows))
	r.line("offsets written to B since the failover, by topic: %s (%d of %d topics)", orDash(countsText(t.newOnB)), len(t.newOnB), len(d.m.topics))
	if !t.stoppedAll {
		d.m.anomaly("%d of %d partitions of %s are not STOPPED: kmirror may still write to them on B", len(rows)-stopped, len(rows), d.cfg.Mirror)
	}

	now := rpoFromRows(rows, d.cfg.Now())
	switch {
	case !t.rpo.Known && now.Known:
		now.Seconds = t.rpo.Seconds
		t.rpo = now
		r.line("A answers again: RPO %s (read now, after the failover)", rpoLine(t.rpo))
	case t.rpo.Known:
		r.line("RPO %s", rpoLine(t.rpo))
		var after int64
		for _, p := range now.Partitions {
			if was, ok := t.failoverEnds[ptKey(p.Topic, p.Partition)]; ok && p.SourceEnd > was {
				after += p.SourceEnd - was
			}
		}
		if after > 0 {
			r.line("A took %d more offsets after the failover: clients still writing to A", after)
			d.m.anomaly("A took %d offsets after the failover: writes that went to the old source and are not on B", after)
		}
	default:
		r.line("RPO unknown, %s", t.rpo.Unknown)
	}
	if t.rpo.Known && t.rpo.Records > 0 {
		d.m.anomaly("lost in the failover: %s", rpoLine(t.rpo))
	}

	t.positions = t.positions[:0]
	synced := syncedPositions(d.m.synced)
	if len(synced) == 0 {
		r.line("no consumer group offsets were synced by %s", d.cfg.Mirror)
	}
	for _, g := range slices.Sorted(maps.Keys(synced)) {
		onB, err := groupOffsets(ctx, t.dst, g)
		if err != nil {
			return err
		}
		var again int64
		for _, k := range slices.Sorted(maps.Keys(synced[g])) {
			sp := synced[g][k]
			pos := GroupPosition{Group: g, Topic: sp.Topic, Partition: sp.Partition, Source: sp.Source, Synced: sp.Destination, OnB: -1}
			if o, ok := onB[sp.Topic][sp.Partition]; ok {
				pos.OnB = o
			}
			if pos.Source >= 0 && pos.Synced >= 0 {
				pos.Reprocessed = max(0, pos.Source-pos.Synced)
			}
			if pos.Synced < 0 && pos.Source >= 0 {
				d.m.anomaly("group %s had no synced offset for %s: on B it starts where its auto.offset.reset says", g, k)
			}
			again += pos.Reprocessed
			t.positions = append(t.positions, pos)
		}
		r.line("group %s: %d partitions, %d records read again on B (A's commit at the last sync minus the synced offset)", g, len(synced[g]), again)
		if again > 0 {
			d.m.anomaly("group %s reads %d records again on B: the offset sync had not caught up with its commits on A", g, again)
		}
	}
	return nil
}

func countsText(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s +%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// failback plans the failback without running it: creating the reverse
// mirror writes to A, which on real clusters is the operator's decision.
// Where A answers, each partition is classified as failback would: only
// B's delta to copy, or DIVERGED where A holds offsets beyond the LME.
func (t *realTarget) failback(ctx context.Context, r *stepRun) error {
	d := r.d
	rows, err := t.describeMirror(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}
	d.m.failback = d.m.failback[:0]
	if n, _ := sourceAnswers(rows); n == 0 {
		r.line("A does not answer: no failback plan; run this step's commands once A is back with its data")
		d.m.anomaly("failback rehearsal not planned: the source was unreachable")
	} else {
		diverged, beyond := 0, int64(0)
		for _, row := range rows {
			if row.SourceOffset < 0 {
				r.line("%-12s A does not answer for it", ptKey(row.Topic, row.Partition))
				continue
			}
			fp := planPartition(row.Topic, row.Partition, row.LastMirrorOffset, row.SourceOffset, row.DestinationOffset)
			fp.State = "planned"
			d.m.failback = append(d.m.failback, *fp)
			r.line("%-12s LME %d, A ends %d, B ends %d: %s", ptKey(fp.Topic, fp.Partition), fp.LME, fp.AEnd, fp.BEnd, expectText(fp))
			if fp.Expect == "diverged" {
				diverged++
				beyond += fp.Beyond
			}
		}
		if diverged > 0 {
			d.m.anomaly("failback plan: %d partitions would fail as diverged (A holds %d offsets B never got)", diverged, beyond)
		}
	}
	src := "A"
	if m, ok := d.mirrorIn(d.cfg.Engine.Snapshot()); ok && len(m.Source.Bootstrap) > 0 {
		src = strings.Join(m.Source.Bootstrap, ",")
	}
	r.line("to fail back (this writes to A): with bootstrap.servers=%s in F,", strings.Join(t.cfg.Bootstrap, ","))
	r.line("kmirror --bootstrap-server %s --create --mirror %s --mirror-config F", src, d.cfg.Reverse)
	r.line("kmirror --bootstrap-server %s --start --mirror %s --topics '%s'", src, d.cfg.Reverse, strings.Join(d.m.topics, ","))
	return nil
}

// fill puts the offset-based results in the report.
func (t *realTarget) fill(rep *Report) {
	rpo := t.rpo
	if rpo.Method == "" {
		rpo = RPO{Method: RPOOffsets, Unknown: "the failover step has not run"}
	}
	if rpo.ByTopic == nil {
		rpo.ByTopic = map[string]int64{}
	}
	rep.RPO = rpo
	rep.Writable = fmt.Sprintf("every partition STOPPED in __mirror_state on B, so kmirror writes none of them (kmirror never blocks writes at the broker); clients wrote to %d of %d topics on B after the failover", len(t.newOnB), len(t.stopEnds))
	rep.RTO.How = "outage confirmed → first record written to B after the failover (its timestamp) and first synced group's commit seen on B (polled)"
	rep.Groups = slices.Clone(t.positions)
}
