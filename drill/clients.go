package drill

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/sandbox"
)

// switchClients moves the producers and the consumer group to B. The
// group's offsets on B are read first: they are where it resumes (or, when
// none were synced, it starts from the earliest offset).
func (t *sandboxTarget) switchClients(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	if d.m.outageAt.IsZero() {
		return errNoMeasure
	}
	t.groupA = sb.Consumer().Committed(sandbox.SideA)
	g, err := groupOffsets(ctx, t.destination(), sandbox.GroupID)
	if err != nil {
		return err
	}
	t.groupB = g[sandbox.ProcessedTopic]
	if t.groupB == nil {
		t.groupB = map[int32]int64{}
	}
	for _, p := range slices.Sorted(maps.Keys(unionKeys(t.groupA, t.groupB))) {
		r.line("group %s %s/%d: last commit on A %s, on B %s", sandbox.GroupID, sandbox.ProcessedTopic, p, offStr(t.groupA, p), offStr(t.groupB, p))
	}
	if len(t.groupB) == 0 {
		r.line("no offsets for %s on B: it starts from the earliest offset", sandbox.GroupID)
	}
	if err := sb.MoveClients(sandbox.SideB); err != nil {
		return fmt.Errorf("move clients to B: %w", err)
	}
	r.line("producers and consumer group now point at B (%s)", sb.Bootstrap(sandbox.SideB)[0])
	ok := WaitFor(ctx, d.cfg.StepTimeout, 50*time.Millisecond, func() bool {
		d.m.firstProduceB = sb.Ledger().FirstAck(sandbox.SideB, d.m.outageAt)
		d.m.firstConsumeB = sb.Consumer().FirstProcessed(sandbox.SideB)
		return !d.m.firstProduceB.IsZero() && !d.m.firstConsumeB.IsZero()
	})
	if !ok {
		return fmt.Errorf("no successful produce and consume on B within %s (first produce %v, first consume %v)",
			d.cfg.StepTimeout, !d.m.firstProduceB.IsZero(), !d.m.firstConsumeB.IsZero())
	}
	r.line("first produce acknowledged by B +%s after the outage", d.m.firstProduceB.Sub(d.m.outageAt).Round(time.Millisecond))
	r.line("first record consumed from B +%s after the outage", d.m.firstConsumeB.Sub(d.m.outageAt).Round(time.Millisecond))
	r.line("RTO %s", d.rto().Round(time.Millisecond))
	return nil
}

func unionKeys(a, b map[int32]int64) map[int32]bool {
	out := map[int32]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func offStr(m map[int32]int64, p int32) string {
	if o, ok := m[p]; ok {
		return fmt.Sprint(o)
	}
	return "none"
}

// verify freezes the producers, then counts exactly: writes A acknowledged
// that B lacks (the RPO), and, once the group has caught up on B, records
// it processed twice and records it never processed.
func (t *sandboxTarget) verify(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	if d.m.t0Ends == nil || d.m.outageAt.IsZero() {
		return errNoMeasure
	}
	sb.StopProducers()
	r.line("producers stopped so the counts below are final")
	ends, err := endOffsets(ctx, t.destination(), sandbox.TopicNames())
	if err != nil {
		return err
	}
	// Transactional topics are read from their start: on kfake a
	// read_committed fetch that begins inside a mirrored transaction was
	// seen to filter differently from one that begins before it, and the
	// count must not depend on where reading starts.
	from := offsets{}
	for tp, ps := range d.m.t0Ends {
		from[tp] = map[int32]int64{}
		for p, o := range ps {
			from[tp][p] = o
			if sandbox.IsTransactional(tp) {
				from[tp][p] = 0
			}
		}
	}
	readStart := d.cfg.Now()
	onB, err := committedIDs(ctx, t.destination(), from, ends, d.cfg.StepTimeout)
	if err != nil {
		return fmt.Errorf("read B since T0: %w", err)
	}
	r.line("read B to its log end in %s", d.cfg.Now().Sub(readStart).Round(time.Millisecond))
	acksA := sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA })
	acksB := sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideB })
	t.ackedA, t.ackedB = int64(len(acksA)), int64(len(acksB))
	t.lost = lostAcks(acksA, d.m.t0Ends, onB, d.m.lme)
	byTopic := map[string]int{}
	for _, a := range t.lost {
		byTopic[a.Topic]++
	}
	var per []string
	for _, tp := range sandbox.TopicNames() {
		if byTopic[tp] > 0 {
			per = append(per, fmt.Sprintf("%s %d", tp, byTopic[tp]))
		}
	}
	r.line("lost: %d of %d records A acknowledged are not on B (%s)", len(t.lost), len(acksA), orDash(strings.Join(per, ", ")))
	if s := inFlightAtOutage(t.unmirroredAtOutage, int64(len(t.lost))); s != "" {
		r.line("%s", s)
	}
	t.lostParts = lostByPartition(t.lost, d.m.lme)
	for _, lp := range t.lostParts {
		r.line("%s", lossLine(lp, d.m.outageAt))
	}
	r.line("RPO %d records, %s", len(t.lost), t.rpoTime(d.m.outageAt).Round(time.Millisecond))
	if t.election != nil {
		t.nameElectionLoss(r)
	}
	if t.scenario == ScenarioPlanned && len(t.lost) > 0 {
		sb.StopClients()
		t.verified = true
		return fmt.Errorf("a planned failover lost %d acknowledged records: the mirror had not caught up when it stopped", len(t.lost))
	}

	writable := map[string]bool{}
	for _, a := range acksB {
		writable[a.Topic] = true
	}
	d.m.bWritable = len(writable) == len(sandbox.Topics)
	r.line("B writable: %d of %d topics took writes from the moved producers (%d records)", len(writable), len(sandbox.Topics), len(acksB))
	if !d.m.bWritable {
		d.m.anomaly("B did not accept writes on every topic after the failover (%d of %d)", len(writable), len(sandbox.Topics))
	}

	// The group must see every orders record B holds: A's that survived and
	// B's own. Whatever it has not processed once caught up is a gap.
	lostIDs := map[string]bool{}
	for _, a := range t.lost {
		lostIDs[a.ID] = true
	}
	var want []string
	for _, a := range acksA {
		if a.Topic == sandbox.ProcessedTopic && !lostIDs[a.ID] {
			want = append(want, a.ID)
		}
	}
	for _, a := range acksB {
		if a.Topic == sandbox.ProcessedTopic {
			want = append(want, a.ID)
		}
	}
	var seen map[string]int
	missing := func() int {
		seen = sb.Consumer().Processed()
		n := 0
		for _, id := range want {
			if seen[id] == 0 {
				n++
			}
		}
		return n
	}
	waitStart := d.cfg.Now()
	caughtUp := WaitFor(ctx, d.cfg.StepTimeout, 100*time.Millisecond, func() bool { return missing() == 0 })
	r.line("group caught up on B in %s", d.cfg.Now().Sub(waitStart).Round(time.Millisecond))
	sb.StopClients()
	t.duplicates, t.gaps = 0, int64(missing())
	var processedLost int64
	for id, n := range seen {
		t.duplicates += int64(n - 1)
		if lostIDs[id] {
			processedLost++
		}
	}
	t.verified = true
	r.line("group %s: %d records processed twice, %d never processed (of %d expected)", sandbox.GroupID, t.duplicates, t.gaps, len(want))
	if !caughtUp {
		d.m.anomaly("the group did not catch up on B within %s: %d records never processed", d.cfg.StepTimeout, t.gaps)
	}
	if t.duplicates > 0 {
		d.m.anomaly("%d records processed twice after the switch (the group resumed before its last processed record on A)", t.duplicates)
	}
	if processedLost > 0 {
		d.m.anomaly("%d records the group processed on A are lost on B: downstream effects of them exist, the records do not", processedLost)
	}
	if len(t.lost) > 0 {
		d.m.anomaly("%d acknowledged records lost in the failover (RPO %s)", len(t.lost), t.rpoTime(d.m.outageAt).Round(time.Millisecond))
	}
	return nil
}

// rpoTime is how far back in time the loss reaches: from the oldest lost
// acknowledgement to the outage.
func (t *sandboxTarget) rpoTime(outage time.Time) time.Duration {
	if len(t.lost) == 0 {
		return 0
	}
	oldest := t.lost[0].At
	for _, a := range t.lost {
		if a.At.Before(oldest) {
			oldest = a.At
		}
	}
	return max(0, outage.Sub(oldest))
}

// nameElectionLoss tells which of the records the unclean election lost
// the mirror had copied to B before it (B holds the only copy) and which
// exist nowhere: A's new leader never had them and B never got them.
func (t *sandboxTarget) nameElectionLoss(r *stepRun) {
	d := r.d
	// Counted again now: acknowledgements still under way at the
	// election have arrived.
	loss := electionLoss(t.elected, t.electedIDs, t.sb.Ledger().Acks(nil))
	loss.MirrorError = t.election.MirrorError
	t.election = &loss
	el := t.election
	lost := map[string]bool{}
	for _, a := range t.lost {
		lost[a.ID] = true
	}
	el.OnB, el.Nowhere = 0, 0
	for _, id := range el.IDs {
		if lost[id] {
			el.Nowhere++
		} else {
			el.OnB++
		}
	}
	r.line("the unclean election on %s lost %d records A had acknowledged (offsets %s): %d of them B holds, mirrored before the election (the only copy left); %d B never got: in a real election they exist nowhere",
		ptKey(el.Topic, el.Partition), el.Records, orDash(el.Offsets), el.OnB, el.Nowhere)
	const named = 8
	ids := el.IDs
	more := ""
	if len(ids) > named {
		ids, more = ids[:named], fmt.Sprintf(" and %d more (the report lists all)", len(el.IDs)-named)
	}
	if len(ids) > 0 {
		r.line("the election's lost records: %s%s", strings.Join(ids, ", "), more)
	}
	d.m.anomaly("unclean leader election on A, %s: %d acknowledged records lost on A (offsets %s); %d survive only on B, %d nowhere",
		ptKey(el.Topic, el.Partition), el.Records, orDash(el.Offsets), el.OnB, el.Nowhere)
}

// inFlightAtOutage explains why fewer records are lost than were beyond
// B's log end when A went down: A had already sent the rest to the mirror,
// and they reached B after the outage. It is "" when nothing was in flight.
func inFlightAtOutage(atOutage, lost int64) string {
	if lost >= atOutage {
		return ""
	}
	return fmt.Sprintf("%d of the %d acknowledged records beyond B's log end when A went down reached B afterwards: A had sent them to the mirror before the outage",
		atOutage-lost, atOutage)
}
