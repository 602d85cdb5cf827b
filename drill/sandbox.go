package drill

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/sandbox"
)

// sandboxTarget is the demo's sandbox: it takes cluster A down and brings
// it back, moves its own producers and consumer group, and keeps every
// acknowledgement, so its losses, duplicates and gaps are exact.
type sandboxTarget struct {
	sb       *sandbox.Sandbox
	scenario Scenario

	// Only the running step touches these.
	unmirroredAtOutage int64
	election           *ElectionLoss // ScenarioUnclean, from the outage step
	elected            sandbox.Election
	electedIDs         map[string]bool // what the failed leader wrote from the election's end offset on
	lostParts          []LostPartition
	failbackEng        *engine.Engine // the instance on A that runs the reverse mirror
	quarantine         *Quarantine
	compare            *Compare
	groupA, groupB     map[int32]int64 // the demo group on A (last acknowledged commit) and on B
	verified           bool
	lost               []sandbox.Ack
	ackedA, ackedB     int64
	duplicates, gaps   int64
}

// SandboxTarget returns the drill target of the demo's sandbox, rehearsing
// scenario.
func SandboxTarget(sb *sandbox.Sandbox, scenario Scenario) Target {
	return &sandboxTarget{sb: sb, scenario: scenario}
}

func (t *sandboxTarget) kind() string { return "sandbox" }

func (t *sandboxTarget) Clusters() (source, destination string) {
	return sandbox.ClusterA + " " + strings.Join(t.sb.Bootstrap(sandbox.SideA), ","),
		sandbox.ClusterB + " " + strings.Join(t.sb.Bootstrap(sandbox.SideB), ",")
}

// Instruction is empty for every step: the sandbox does them all.
func (t *sandboxTarget) Instruction(StepID) string { return "" }

func (t *sandboxTarget) describe(id StepID) stepText { return sandboxText(t.scenario, id) }

func (t *sandboxTarget) side(s sandbox.Side) cluster {
	name := sandbox.ClusterA
	if s == sandbox.SideB {
		name = sandbox.ClusterB
	}
	return cluster{name: name, bootstrap: t.sb.Bootstrap(s)}
}

func (t *sandboxTarget) destination() cluster { return t.side(sandbox.SideB) }

func (t *sandboxTarget) wantTopics() []string { return sandbox.TopicNames() }

// preflight checks A answers and the demo group is processing there, and
// waits until the group's offsets are on B.
func (t *sandboxTarget) preflight(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	if _, err := endOffsets(ctx, t.side(sandbox.SideA), []string{sandbox.ProcessedTopic}); err != nil {
		return fmt.Errorf("source cluster A unreachable: %w", err)
	}
	r.line("source cluster A reachable at %s", strings.Join(sb.Bootstrap(sandbox.SideA), ","))
	if err := t.steady(ctx, r); err != nil {
		return err
	}

	// Without a commit on A there is no position to compare after the
	// switch; the demo group commits within a second of starting.
	if !WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool { return len(sb.Consumer().Committed(sandbox.SideA)) > 0 }) {
		return fmt.Errorf("group %s has committed nothing on A after %s: it is not processing", sandbox.GroupID, d.cfg.StepTimeout)
	}
	r.line("group %s is processing %s on A (commits for %d partitions)", sandbox.GroupID, sandbox.ProcessedTopic, len(sb.Consumer().Committed(sandbox.SideA)))

	return t.groupOnB(ctx, r)
}

// groupOnB waits until the group offset sync has brought the demo group's
// position to B: for every partition the group had committed on A when
// the wait began, B holds that offset or a later one. A failover before
// that would restart the group on B from older offsets than the mirror
// can give (from the earliest, if none reached B), and the drill would
// count as processed twice what the sync was about to carry. The line
// says how long the sync took to get there.
func (t *sandboxTarget) groupOnB(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	start := d.cfg.Now()
	want := sb.Consumer().Committed(sandbox.SideA)
	var behind []string
	var lastErr error
	reached := WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool {
		g, err := groupOffsets(ctx, t.destination(), sandbox.GroupID)
		if err != nil {
			lastErr = err
			return false
		}
		behind = behind[:0]
		for _, p := range slices.Sorted(maps.Keys(want)) {
			if on, ok := g[sandbox.ProcessedTopic][p]; !ok || on < want[p] {
				at := "none"
				if ok {
					at = fmt.Sprint(on)
				}
				behind = append(behind, fmt.Sprintf("%s: %s on B, %d on A", ptKey(sandbox.ProcessedTopic, p), at, want[p]))
			}
		}
		return len(behind) == 0
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !reached {
		why := strings.Join(behind, "; ")
		if lastErr != nil && why == "" {
			why = lastErr.Error()
		}
		return fmt.Errorf("group %s's offsets did not reach B within %s (the mirror syncs group offsets every mirror.metadata.refresh.interval.ms): %s",
			sandbox.GroupID, d.cfg.StepTimeout, why)
	}
	r.line("group %s's offsets are on B for its %d partitions of %s, at or past its commits on A when preflight began; the group offset sync took %s to bring them",
		sandbox.GroupID, len(want), sandbox.ProcessedTopic, d.cfg.Now().Sub(start).Round(10*time.Millisecond))
	return nil
}

// steady waits until the mirror has copied everything A held when it
// began: a mirror still working off its start-up backlog would make the
// loss that of a mirror that never ran, not of one running behind. A mirror
// that does not get there within a third of the step's timeout is
// reported, not failed (the lag threshold is preflight's hard limit): the
// loss the drill measures then includes that backlog, and the report says
// so. Either way the step says how far behind A the mirror runs.
func (t *sandboxTarget) steady(ctx context.Context, r *stepRun) error {
	d, topics := r.d, sandbox.TopicNames()
	start := d.cfg.Now()
	held, err := endOffsets(ctx, t.side(sandbox.SideA), topics)
	if err != nil {
		return fmt.Errorf("source cluster A: %w", err)
	}
	var short []string
	wait := d.cfg.StepTimeout / 3
	caught := WaitFor(ctx, wait, 250*time.Millisecond, func() bool {
		b, err := endOffsets(ctx, t.destination(), topics)
		if err != nil {
			return false
		}
		short = short[:0]
		for tp, ps := range held {
			for p, o := range ps {
				if b[tp][p] < o {
					short = append(short, fmt.Sprintf("%s %d of %d", ptKey(tp, p), b[tp][p], o))
				}
			}
		}
		return len(short) == 0
	})
	b, err := endOffsets(ctx, t.destination(), topics)
	if err != nil {
		return err
	}
	now, behind, oldest := d.cfg.Now(), int64(0), time.Time{}
	for _, a := range t.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA }) {
		if a.Offset >= b[a.Topic][a.Partition] {
			behind++
			if oldest.IsZero() || a.At.Before(oldest) {
				oldest = a.At
			}
		}
	}
	lag := time.Duration(0)
	if !oldest.IsZero() {
		lag = now.Sub(oldest)
	}
	if !caught {
		slices.Sort(short)
		r.line("the mirror has not copied what A held %s ago (%s): it is still working off its backlog, %s behind A (%d acknowledged records not on B yet)",
			wait, strings.Join(firstN(short, 5), ", "), lag.Round(time.Millisecond), behind)
		d.m.anomaly("preflight: the mirror was still working off its backlog (%s behind A); the loss measured includes it", lag.Round(time.Millisecond))
		return nil
	}
	r.line("the mirror has copied everything A held when preflight began (in %s) and runs %s behind A (%d acknowledged records not on B yet)",
		now.Sub(start).Round(time.Millisecond), lag.Round(time.Millisecond), behind)
	return nil
}

func (t *sandboxTarget) snapshot(r *stepRun) {
	acked, _ := t.sb.Ledger().Count(sandbox.SideA)
	r.line("A acknowledged %d records so far", acked)
}

// outage is the scenario's disaster: A taken down mid-stream (after an
// unclean election on it, in ScenarioUnclean), or the producers stopped
// for a planned cutover. What A acknowledged beyond B's log end is counted
// now by offset, and exactly by record id in verify.
func (t *sandboxTarget) outage(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	switch t.scenario {
	case ScenarioPlanned:
		return t.cutover(ctx, r)
	case ScenarioUnclean:
		if err := t.elect(ctx, r); err != nil {
			return err
		}
	case ScenarioRegionLoss:
	}
	sb.TakeDownA()
	d.m.outageAt = d.cfg.Now()
	r.line("cluster A is down at %s; producers on A keep retrying", d.m.outageAt.Format("15:04:05.000"))
	if o, ok := sb.Link(); ok {
		r.line("the mirror reached A across a link adding %s round trip (%s)", o.RTT, sandbox.BandwidthText(o.Bandwidth))
	}
	return t.countUnmirrored(ctx, r)
}

// countUnmirrored counts what A acknowledged beyond B's log end, and how
// far back the oldest of it goes.
func (t *sandboxTarget) countUnmirrored(ctx context.Context, r *stepRun) error {
	d := r.d
	ends, err := endOffsets(ctx, t.destination(), sandbox.TopicNames())
	if err != nil {
		return err
	}
	acks := t.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA })
	t.unmirroredAtOutage = 0
	var oldest time.Time
	for _, a := range acks {
		if a.Offset >= ends[a.Topic][a.Partition] {
			t.unmirroredAtOutage++
			if oldest.IsZero() || a.At.Before(oldest) {
				oldest = a.At
			}
		}
	}
	behind := ""
	if !oldest.IsZero() {
		behind = fmt.Sprintf("; the oldest was acknowledged %s before", d.m.outageAt.Sub(oldest).Round(time.Millisecond))
	}
	r.line("A acknowledged %d records in all; %d of them are beyond B's log end (acknowledged but not mirrored)%s", len(acks), t.unmirroredAtOutage, behind)
	return nil
}

// cutover is the planned failover's first half: the producers on A stop,
// A stays up, and the mirror catches up until B holds every offset A has
// and no mirrored transaction is open.
func (t *sandboxTarget) cutover(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	sb.StopProducers()
	d.m.outageAt = d.cfg.Now()
	r.line("producers on A stopped at %s; A stays up", d.m.outageAt.Format("15:04:05.000"))
	topics := sandbox.TopicNames()
	var behind int64
	caught := WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool {
		a, errA := endOffsets(ctx, t.side(sandbox.SideA), topics)
		b, errB := endOffsets(ctx, t.destination(), topics)
		if errA != nil || errB != nil {
			return false
		}
		behind = 0
		for tp, ps := range a {
			for p, o := range ps {
				behind += max(0, o-b[tp][p])
			}
		}
		for _, p := range d.mirrorOf(d.cfg.Engine.Snapshot()) {
			behind += int64(p.OpenTxns)
		}
		return behind == 0
	})
	if !caught {
		return fmt.Errorf("the mirror did not catch up within %s of the producers stopping (%d offsets or open transactions behind)", d.cfg.StepTimeout, behind)
	}
	r.line("the mirror caught up in %s: B holds every offset A has, no mirrored transaction open (lag 0)", d.cfg.Now().Sub(d.m.outageAt).Round(time.Millisecond))
	return t.countUnmirrored(ctx, r)
}

// electedTopic is the partition the unclean scenario's election hits: the
// clicks producer writes with acks=1, the writes an unclean election
// loses first.
const (
	electedTopic     = "clicks"
	electedPartition = int32(0)
	// electionBehind is how far the replica that takes over was behind
	// the failed leader.
	electionBehind = time.Second
)

// elect runs the unclean leader election of ScenarioUnclean: a replica
// electionBehind behind becomes leader of electedTopic/electedPartition,
// and the mirror must find it.
func (t *sandboxTarget) elect(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	mine := func(a *sandbox.Ack) bool {
		return a.Side == sandbox.SideA && a.Topic == electedTopic && a.Partition == electedPartition
	}
	acks := sb.Ledger().Acks(mine)
	if len(acks) == 0 {
		return fmt.Errorf("unclean election: A acknowledged nothing on %s yet", ptKey(electedTopic, electedPartition))
	}
	// The new leader's log ends where the failed leader's stood
	// electionBehind ago: at the first record acknowledged since.
	cut := d.cfg.Now().Add(-electionBehind)
	end := acks[len(acks)-1].Offset + 1
	for _, a := range acks {
		if !a.At.Before(cut) {
			end = a.Offset
			break
		}
	}
	el, err := sb.UncleanElection(electedTopic, electedPartition, end)
	if err != nil {
		return err
	}
	r.line("unclean leader election on A: the leader of %s (broker %d) failed; broker %d, %s behind it, took over with epoch %d",
		ptKey(el.Topic, el.Partition), el.OldLeader, el.NewLeader, electionBehind, el.OldEpoch+1)
	r.line("the new leader's log ends at offset %d: what the failed leader wrote from there on is gone from A", el.EndOffset)
	var p engine.PartitionSnapshot
	seen := WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool {
		for _, q := range d.mirrorOf(d.cfg.Engine.Snapshot()) {
			if q.Topic == el.Topic && q.Partition == el.Partition {
				p = q
			}
		}
		return p.State == partition.Failed || p.State == partition.ULERecovery
	})
	if !seen {
		return fmt.Errorf("the mirror did not report the unclean election on %s within %s (%s)", ptKey(el.Topic, el.Partition), d.cfg.StepTimeout, p.State)
	}
	r.line("the mirror found it: %s %s%s", ptKey(el.Topic, el.Partition), p.State, errText(p.Error))
	// What the election lost is what the failed leader wrote from the
	// end offset on: the records of the old epoch there (A keeps them,
	// see sandbox.UncleanElection).
	written, err := oldEpochIDs(ctx, t.side(sandbox.SideA), el, d.cfg.StepTimeout)
	if err != nil {
		return err
	}
	loss := electionLoss(el, written, sb.Ledger().Acks(mine))
	loss.MirrorError = p.Error
	t.election, t.elected, t.electedIDs = &loss, el, written
	r.line("the election lost the %d records A had acknowledged on %s at offsets %s (acks=1 producer)",
		loss.Records, ptKey(el.Topic, el.Partition), orDash(loss.Offsets))
	return nil
}

// oldEpochIDs reads the ids of the records of el's partition that the
// failed leader wrote from el.EndOffset on (leader epoch up to el.OldEpoch).
func oldEpochIDs(ctx context.Context, a cluster, el sandbox.Election, timeout time.Duration) (map[string]bool, error) {
	ends, err := endOffsets(ctx, a, []string{el.Topic})
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	from := offsets{el.Topic: {el.Partition: el.EndOffset}}
	to := offsets{el.Topic: {el.Partition: ends[el.Topic][el.Partition]}}
	err = readRange(ctx, a, from, to, false, timeout, func(r *kgo.Record) {
		if r.LeaderEpoch <= el.OldEpoch {
			ids[sandbox.IDOf(r.Value)] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read what the election lost on A: %w", err)
	}
	return ids, nil
}

// afterFailover measures nothing more: A is down, and verify counts the
// loss exactly from the producers' acknowledgements.
func (t *sandboxTarget) afterFailover(context.Context, *stepRun) error { return nil }

// fill puts the exact, acknowledgement-based results in the report.
func (t *sandboxTarget) fill(rep *Report) {
	rep.RPO.Method, rep.RPO.Known = RPOAcks, t.verified
	if !t.verified {
		rep.RPO.Unknown = "the verify step has not run"
	}
	rep.RPO.Records, rep.RPO.Seconds = int64(len(t.lost)), t.rpoTime(rep.RTO.OutageAt).Seconds()
	rep.RPO.AckedByA, rep.RPO.UnmirroredAtOutage, rep.RPO.LostIDs = t.ackedA, t.unmirroredAtOutage, []string{}
	for _, a := range t.lost {
		rep.RPO.ByTopic[a.Topic]++
		rep.RPO.LostIDs = append(rep.RPO.LostIDs, a.ID)
	}
	rep.Scenario, rep.RPO.Lost = t.scenario.String(), t.lostParts
	rep.Election, rep.Quarantine, rep.AEqualsB = t.election, t.quarantine, t.compare
	rep.Writable = fmt.Sprintf("the moved producers' writes acknowledged by B on every topic (%d records)", t.ackedB)
	rep.RTO.How = "outage → first produce acknowledged by B and first record the group processed from B"
	rep.Group = &GroupResult{Group: sandbox.GroupID, Topic: sandbox.ProcessedTopic, Duplicates: t.duplicates, Gaps: t.gaps,
		PositionsA: t.groupA, PositionsB: t.groupB, AckedByB: t.ackedB}
}
