package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/sandbox"
)

// mirrorOf returns the forward mirror's partitions in snap.
func (d *Drill) mirrorOf(snap engine.Snapshot) []engine.PartitionSnapshot {
	for _, m := range snap.Mirrors {
		if m.Name == d.cfg.Mirror {
			return m.Partitions
		}
	}
	return nil
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
// transactions and the group's offsets on B are reported, not required:
// the failover aborts the first, and the verify step measures the cost of
// the second.
func (d *Drill) preflight(ctx context.Context, r *stepRun) error {
	sb := d.cfg.Sandbox
	want := len(sandbox.Topics)
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
		return len(topics) == want
	}
	if !waitFor(ctx, d.cfg.StepTimeout, 250*time.Millisecond, all) {
		return fmt.Errorf("not every partition of %s is MIRRORING after %s (%s): wait for alignment, or recover FAILED partitions first",
			d.cfg.Mirror, d.cfg.StepTimeout, statesLine(countStates(parts)))
	}
	r.line("%d partitions of %s MIRRORING", len(parts), d.cfg.Mirror)

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

	if _, err := endOffsets(ctx, sb.Bootstrap(sandbox.SideA), []string{sandbox.ProcessedTopic}); err != nil {
		return fmt.Errorf("source cluster A unreachable: %w", err)
	}
	r.line("source cluster A reachable at %s", strings.Join(sb.Bootstrap(sandbox.SideA), ","))

	// Without a commit on A there is no position to compare after the
	// switch; the demo group commits within a second of starting.
	if !waitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool { return len(sb.Consumer().Committed(sandbox.SideA)) > 0 }) {
		return fmt.Errorf("group %s has committed nothing on A after %s: it is not processing", sandbox.GroupID, d.cfg.StepTimeout)
	}
	r.line("group %s is processing %s on A (commits for %d partitions)", sandbox.GroupID, sandbox.ProcessedTopic, len(sb.Consumer().Committed(sandbox.SideA)))

	g, err := groupOffsets(ctx, sb.Bootstrap(sandbox.SideB))
	if err != nil {
		return err
	}
	d.m.t0Group = g
	if len(g) == 0 {
		r.line("group %s has no offsets on B: no group offset sync reached B, so after the switch it starts from the earliest offset (duplicates expected)", sandbox.GroupID)
		d.m.anomaly("preflight: group %s had no committed offsets on B; it will reprocess from the earliest offset", sandbox.GroupID)
	} else {
		r.line("group %s has offsets on B for %d partitions of %s", sandbox.GroupID, len(g), sandbox.ProcessedTopic)
	}
	return nil
}

// snapshot records T0: the engine's snapshot and B's log ends, saved next
// to the report.
func (d *Drill) snapshot(ctx context.Context, r *stepRun) error {
	d.m.t0 = d.cfg.Now()
	d.m.t0Snap = d.cfg.Engine.Snapshot()
	ends, err := endOffsets(ctx, d.cfg.Sandbox.Bootstrap(sandbox.SideB), sandbox.TopicNames())
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
	acked, _ := d.cfg.Sandbox.Ledger().Count(sandbox.SideA)
	path := d.cfg.ReportPath + "-t0.json"
	b, err := json.MarshalIndent(map[string]any{"time": d.m.t0, "destinationEnds": ends, "engine": d.m.t0Snap}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode T0 snapshot: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save T0 snapshot: %w", err)
	}
	r.line("T0 %s: B holds %d offsets over %d topics; A acknowledged %d records so far", d.m.t0.Format(time.TimeOnly), total, len(ends), acked)
	r.line("saved %s", path)
	return nil
}

// outage takes A down. The producers keep writing to it (and failing);
// what it acknowledged beyond B's log end is counted now by offset, and
// exactly by record id in verify.
func (d *Drill) outage(ctx context.Context, r *stepRun) error {
	sb := d.cfg.Sandbox
	sb.TakeDownA()
	d.m.outageAt = d.cfg.Now()
	r.line("cluster A is down at %s; producers on A keep retrying", d.m.outageAt.Format("15:04:05.000"))
	ends, err := endOffsets(ctx, sb.Bootstrap(sandbox.SideB), sandbox.TopicNames())
	if err != nil {
		return err
	}
	acks := sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA })
	for _, a := range acks {
		if a.Offset >= ends[a.Topic][a.Partition] {
			d.m.unmirroredAtOutage++
		}
	}
	r.line("A acknowledged %d records in all; %d of them are beyond B's log end (acknowledged but not mirrored)", len(acks), d.m.unmirroredAtOutage)
	return nil
}

// failover stops the forward mirror (unless the operator already did, with
// S on the console) and follows each partition to STOPPED. The engine's
// stop works without the source.
func (d *Drill) failover(ctx context.Context, r *stepRun) error {
	eng := d.cfg.Engine
	before := countStates(d.mirrorOf(eng.Snapshot()))
	d.m.stopSent = d.cfg.Now()
	if before[partition.Stopping]+before[partition.Stopped] > 0 {
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
	if !waitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, all) {
		return fmt.Errorf("not every partition STOPPED after %s (%s)", d.cfg.StepTimeout, statesLine(countStates(parts)))
	}
	d.m.stopDone = d.cfg.Now()
	r.line("all %d partitions STOPPED in %s; B's topics are writable", len(parts), d.m.stopDone.Sub(d.m.stopSent).Round(time.Millisecond))
	return nil
}

var errNoMeasure = errors.New("nothing measured: run the earlier steps first")
