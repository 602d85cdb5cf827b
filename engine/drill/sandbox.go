package drill

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/sandbox"
)

// sandboxTarget is the demo's sandbox: it takes cluster A down and brings
// it back, moves its own producers and consumer group, and keeps every
// acknowledgement, so its losses, duplicates and gaps are exact.
type sandboxTarget struct {
	sb *sandbox.Sandbox

	// Only the running step touches these.
	unmirroredAtOutage int64
	groupA, groupB     map[int32]int64 // the demo group on A (last acknowledged commit) and on B
	verified           bool
	lost               []sandbox.Ack
	ackedA, ackedB     int64
	duplicates, gaps   int64
}

// SandboxTarget returns the drill target of the demo's sandbox.
func SandboxTarget(sb *sandbox.Sandbox) Target { return &sandboxTarget{sb: sb} }

func (t *sandboxTarget) kind() string { return "sandbox" }

func (t *sandboxTarget) Clusters() (source, destination string) {
	return sandbox.ClusterA + " " + strings.Join(t.sb.Bootstrap(sandbox.SideA), ","),
		sandbox.ClusterB + " " + strings.Join(t.sb.Bootstrap(sandbox.SideB), ",")
}

// Instruction is empty for every step: the sandbox does them all.
func (t *sandboxTarget) Instruction(StepID) string { return "" }

func (t *sandboxTarget) describe(id StepID) (string, string) { return id.Explain(), id.LookAt() }

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
// reads the group's offsets on B.
func (t *sandboxTarget) preflight(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	if _, err := endOffsets(ctx, t.side(sandbox.SideA), []string{sandbox.ProcessedTopic}); err != nil {
		return fmt.Errorf("source cluster A unreachable: %w", err)
	}
	r.line("source cluster A reachable at %s", strings.Join(sb.Bootstrap(sandbox.SideA), ","))

	// Without a commit on A there is no position to compare after the
	// switch; the demo group commits within a second of starting.
	if !WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool { return len(sb.Consumer().Committed(sandbox.SideA)) > 0 }) {
		return fmt.Errorf("group %s has committed nothing on A after %s: it is not processing", sandbox.GroupID, d.cfg.StepTimeout)
	}
	r.line("group %s is processing %s on A (commits for %d partitions)", sandbox.GroupID, sandbox.ProcessedTopic, len(sb.Consumer().Committed(sandbox.SideA)))

	g, err := groupOffsets(ctx, t.destination(), sandbox.GroupID)
	if err != nil {
		return err
	}
	if len(g[sandbox.ProcessedTopic]) == 0 {
		r.line("group %s has no offsets on B: no group offset sync reached B, so after the switch it starts from the earliest offset (duplicates expected)", sandbox.GroupID)
		d.m.anomaly("preflight: group %s had no committed offsets on B; it will reprocess from the earliest offset", sandbox.GroupID)
	} else {
		r.line("group %s has offsets on B for %d partitions of %s", sandbox.GroupID, len(g[sandbox.ProcessedTopic]), sandbox.ProcessedTopic)
	}
	return nil
}

func (t *sandboxTarget) snapshot(r *stepRun) {
	acked, _ := t.sb.Ledger().Count(sandbox.SideA)
	r.line("A acknowledged %d records so far", acked)
}

// outage takes A down. The producers keep writing to it (and failing);
// what it acknowledged beyond B's log end is counted now by offset, and
// exactly by record id in verify.
func (t *sandboxTarget) outage(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	sb.TakeDownA()
	d.m.outageAt = d.cfg.Now()
	r.line("cluster A is down at %s; producers on A keep retrying", d.m.outageAt.Format("15:04:05.000"))
	ends, err := endOffsets(ctx, t.destination(), sandbox.TopicNames())
	if err != nil {
		return err
	}
	acks := sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA })
	t.unmirroredAtOutage = 0
	for _, a := range acks {
		if a.Offset >= ends[a.Topic][a.Partition] {
			t.unmirroredAtOutage++
		}
	}
	r.line("A acknowledged %d records in all; %d of them are beyond B's log end (acknowledged but not mirrored)", len(acks), t.unmirroredAtOutage)
	return nil
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
	rep.Writable = fmt.Sprintf("the moved producers' writes acknowledged by B on every topic (%d records)", t.ackedB)
	rep.RTO.How = "outage → first produce acknowledged by B and first record the group processed from B"
	rep.Group = &GroupResult{Group: sandbox.GroupID, Topic: sandbox.ProcessedTopic, Duplicates: t.duplicates, Gaps: t.gaps,
		PositionsA: t.groupA, PositionsB: t.groupB, AckedByB: t.ackedB}
}
