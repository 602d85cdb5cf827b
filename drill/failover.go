package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// mirrorIn returns the forward mirror in snap.
func (d *Drill) mirrorIn(snap engine.Snapshot) (engine.MirrorSnapshot, bool) {
	i := slices.IndexFunc(snap.Mirrors, func(m engine.MirrorSnapshot) bool { return m.Name == d.cfg.Mirror })
	if i < 0 {
		return engine.MirrorSnapshot{}, false
	}
	return snap.Mirrors[i], true
}

// mirrorOf returns the forward mirror's partitions in snap.
func (d *Drill) mirrorOf(snap engine.Snapshot) []engine.PartitionSnapshot {
	m, _ := d.mirrorIn(snap)
	return m.Partitions
}

func countStates(ps []engine.PartitionSnapshot) map[partition.State]int {
	out := map[partition.State]int{}
	for _, p := range ps {
		out[p.State]++
	}
	return out
}

func statesLine(c map[partition.State]int) string {
	var parts []string
	for _, s := range partition.States {
		if c[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, c[s]))
		}
	}
	return strings.Join(parts, ", ")
}

// preflight checks that a failover now would be a fair test: every
// partition MIRRORING, lag under the threshold, the source reachable. Open
// transactions and the groups' offset sync are reported, not required: the
// failover aborts the first, and the verify step measures the cost of the
// second.
func (d *Drill) preflight(ctx context.Context, r *stepRun) error {
	want := d.cfg.Target.wantTopics()
	var parts []engine.PartitionSnapshot
	all := func() bool {
		parts = d.mirrorOf(d.cfg.Engine.Snapshot())
		topics := map[string]bool{}
		for _, p := range parts {
			topics[p.Topic] = true
			if p.State != partition.Mirroring {
				return false
			}
		}
		for _, t := range want {
			if !topics[t] {
				return false
			}
		}
		return len(parts) > 0
	}
	if !WaitFor(ctx, d.cfg.StepTimeout, 250*time.Millisecond, all) {
		return fmt.Errorf("not every partition of %s is MIRRORING after %s (%s): wait for alignment, or recover FAILED partitions first",
			d.cfg.Mirror, d.cfg.StepTimeout, orDash(statesLine(countStates(parts))))
	}
	d.m.topics = topicsOf(parts)
	r.line("%d partitions of %s MIRRORING (%s)", len(parts), d.cfg.Mirror, strings.Join(d.m.topics, ", "))

	var lag int64
	var worst time.Duration
	var open []string
	for _, p := range parts {
		lag += p.Lag
		worst = max(worst, p.LagTime)
		if p.OpenTxns > 0 {
			open = append(open, fmt.Sprintf("%s (%d)", ptKey(p.Topic, p.Partition), p.OpenTxns))
		}
	}
	r.line("total lag %d records (threshold %d), worst lag time %s", lag, d.cfg.LagThreshold, worst.Round(time.Millisecond))
	if lag > d.cfg.LagThreshold {
		return fmt.Errorf("total lag %d records is over the threshold %d: a failover now would lose more than planned", lag, d.cfg.LagThreshold)
	}
	if len(open) > 0 {
		r.line("open mirrored transactions: %s (the failover aborts them on B)", strings.Join(open, ", "))
	} else {
		r.line("no open mirrored transaction")
	}
	snap := d.cfg.Engine.Snapshot()
	d.noteGroups(snap)
	for _, g := range d.groupsOf(snap) {
		switch {
		case g.SkipReason != "":
			r.line("group %s not synced: %s", g.Group, g.SkipReason)
		case g.LastSync.IsZero():
			r.line("group %s not synced yet", g.Group)
		default:
			behind := 0
			for _, p := range g.Partitions {
				if p.Destination != p.Source {
					behind++
				}
			}
			r.line("group %s synced %s ago: %d partitions, %d behind A", g.Group, d.cfg.Now().Sub(g.LastSync).Round(time.Second), len(g.Partitions), behind)
		}
	}
	return d.cfg.Target.preflight(ctx, r)
}

// snapshot records T0: the engine's snapshot and B's log ends, saved next
// to the report.
func (d *Drill) snapshot(ctx context.Context, r *stepRun) error {
	if len(d.m.topics) == 0 {
		return errNoMeasure
	}
	d.m.t0 = d.cfg.Now()
	d.m.t0Snap = d.cfg.Engine.Snapshot()
	d.noteGroups(d.m.t0Snap)
	ends, err := endOffsets(ctx, d.cfg.Target.destination(), d.m.topics)
	if err != nil {
		return err
	}
	d.m.t0Ends = ends
	var total int64
	for _, ps := range ends {
		for _, o := range ps {
			total += o
		}
	}
	path := d.cfg.ReportPath + "-t0.json"
	b, err := json.MarshalIndent(map[string]any{"time": d.m.t0, "destinationEnds": ends, "engine": d.m.t0Snap}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode T0 snapshot: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save T0 snapshot: %w", err)
	}
	r.line("T0 %s: B holds %d offsets over %d topics", d.m.t0.Format(time.TimeOnly), total, len(ends))
	d.cfg.Target.snapshot(r)
	r.line("saved %s", path)
	return nil
}

// outage records the mirror's worst lag time as the source goes away (the
// RPO in time, estimated, where no producer acknowledgements are known),
// then lets the target take the source down or check the operator did.
func (d *Drill) outage(ctx context.Context, r *stepRun) error {
	snap := d.cfg.Engine.Snapshot()
	d.noteGroups(snap)
	for _, p := range d.mirrorOf(snap) {
		d.m.lagAtOutage = max(d.m.lagAtOutage, p.LagTime)
	}
	return d.cfg.Target.outage(ctx, r)
}

// failover stops the forward mirror (unless the operator already did, with
// S on the console) and follows each partition to STOPPED. The engine's
// stop works without the source.
func (d *Drill) failover(ctx context.Context, r *stepRun) error {
	eng := d.cfg.Engine
	snap := eng.Snapshot()
	d.noteGroups(snap)
	before := countStates(d.mirrorOf(snap))
	d.m.stopSent = d.cfg.Now()
	// The stop aborts the mirrored transactions still open on B; the
	// snapshot shows them until then, so they are noted before the stop and
	// on every poll of a partition not yet STOPPED.
	d.m.openAtStop = map[string]int{}
	noteOpen := func(ps []engine.PartitionSnapshot) {
		for _, p := range ps {
			if k := ptKey(p.Topic, p.Partition); p.State != partition.Stopped && p.OpenTxns > d.m.openAtStop[k] {
				d.m.openAtStop[k] = p.OpenTxns
			}
		}
	}
	noteOpen(d.mirrorOf(snap))
	underWay := before[partition.Stopping]+before[partition.Stopped] > 0
	if underWay {
		r.line("stop already under way (%s): not sending it again", statesLine(before))
	} else {
		cctx, cancel := context.WithTimeout(ctx, d.cfg.StepTimeout)
		err := eng.Control(cctx, engine.Command{Kind: engine.CmdStop, Mirror: d.cfg.Mirror})
		cancel()
		if err != nil {
			return fmt.Errorf("stop %s: %w", d.cfg.Mirror, err)
		}
		r.line("stop %s recorded in __mirror_state on B", d.cfg.Mirror)
	}
	seen := map[string]bool{}
	d.m.lme = map[string]int64{}
	var parts []engine.PartitionSnapshot
	all := func() bool {
		parts = d.mirrorOf(eng.Snapshot())
		noteOpen(parts)
		done := len(parts) > 0
		for _, p := range parts {
			k := ptKey(p.Topic, p.Partition)
			if p.State != partition.Stopped {
				done = false
				continue
			}
			if !seen[k] {
				seen[k] = true
				d.m.lme[k] = p.LastOffset
				r.line("%s STOPPED, LME %d, +%s", k, p.LastOffset, d.cfg.Now().Sub(d.m.stopSent).Round(time.Millisecond))
			}
		}
		return done
	}
	if !WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, all) {
		return fmt.Errorf("not every partition STOPPED after %s (%s)", d.cfg.StepTimeout, statesLine(countStates(parts)))
	}
	d.m.stopDone = d.cfg.Now()
	d.noteGroups(eng.Snapshot())
	r.line("all %d partitions STOPPED in %s; B's topics are writable", len(parts), d.m.stopDone.Sub(d.m.stopSent).Round(time.Millisecond))
	d.abortedAtStop(r, underWay)
	return d.cfg.Target.afterFailover(ctx, r)
}

// abortedAtStop tells the mirrored transactions the stop aborted on B. Their
// records are on B, below the LME, but a read_committed consumer never sees
// them. Where A committed them (the commit reached A's coordinator but its
// marker was not mirrored before the outage), A holds committed records B
// lacks that an offset count does not show: on A they sit below the LME
// too, and only the commit marker lies beyond it.
func (d *Drill) abortedAtStop(r *stepRun, underWay bool) {
	var open []string
	n := 0
	for _, k := range slices.Sorted(maps.Keys(d.m.openAtStop)) {
		if c := d.m.openAtStop[k]; c > 0 {
			open = append(open, fmt.Sprintf("%s (%d open)", k, c))
			n += c
		}
	}
	switch {
	case n > 0:
		list := strings.Join(open, ", ")
		r.line("the stop aborted the mirrored transactions open on B: %s", list)
		why := "the loss by acknowledgements counts the committed ones"
		if d.cfg.Target.kind() == "real" {
			why = "the loss by offsets counts only their commit markers, not their records"
		}
		d.m.anomaly("transactions open at the failover, aborted on B: %s. Their records are on B but read_committed consumers skip them; "+
			"where A committed them (the commit marker never reached B), they are lost, and %s", list, why)
	case underWay:
		r.line("open mirrored transactions at the stop: not seen (the stop was sent before this step; the events view shows what it aborted)")
	default:
		r.line("no mirrored transaction was open at the stop")
	}
}

// noteGroups keeps the newest status of every group the forward mirror
// synced, as far as snap shows one.
func (d *Drill) noteGroups(snap engine.Snapshot) {
	if d.m.synced == nil {
		d.m.synced = map[string]engine.GroupSnapshot{}
	}
	for _, g := range d.groupsOf(snap) {
		if !g.LastSync.IsZero() && len(g.Partitions) > 0 {
			d.m.synced[g.Group] = g
		}
	}
}

// groupsOf returns the forward mirror's group offset sync status in snap.
func (d *Drill) groupsOf(snap engine.Snapshot) []engine.GroupSnapshot {
	m, _ := d.mirrorIn(snap)
	return m.Groups
}

func topicsOf(parts []engine.PartitionSnapshot) []string {
	var out []string
	for _, p := range parts {
		if !slices.Contains(out, p.Topic) {
			out = append(out, p.Topic)
		}
	}
	slices.Sort(out)
	return out
}

var errNoMeasure = errors.New("nothing measured: run the earlier steps first")
