package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// ReportVersion is the version of the JSON report's format. Version 2
// added the target, the RPO's method and whether it is known, per-partition
// offsets, every synced group's positions, and moved bWritable to the top.
// Version 3 added the scenario, the loss per partition, the unclean
// election's loss, the rebuild's quarantine, A against B after the
// failback, the audit against the ledger and the cost explained.
const ReportVersion = 3

// Report is the drill's result, written as PATH.json (and rendered as
// PATH.md).
type Report struct {
	Version     int                 `json:"version"`
	Target      string              `json:"target"`             // "sandbox" or "real"
	Scenario    string              `json:"scenario,omitempty"` // the sandbox's: planned, region-loss, unclean
	Mirror      string              `json:"mirror"`
	Reverse     string              `json:"reverseMirror"`
	Source      string              `json:"source"`
	Destination string              `json:"destination"`
	Started     time.Time           `json:"started"`
	Finished    time.Time           `json:"finished"`
	Complete    bool                `json:"complete"` // every step before the report passed
	Timeline    []StepRecord        `json:"timeline"`
	RPO         RPO                 `json:"rpo"`
	RTO         RTO                 `json:"rto"`
	BWritable   bool                `json:"bWritable"`
	Writable    string              `json:"bWritableHow"` // what bWritable is based on
	Group       *GroupResult        `json:"group,omitempty"`
	Groups      []GroupPosition     `json:"groups"`
	Failback    []FailbackPartition `json:"failback"`
	Anomalies   []string            `json:"anomalies"`
	Notes       []string            `json:"notes"`
	// Election is what an unclean leader election on A lost (scenario
	// unclean); Quarantine what the failback's rebuild kept of the loss;
	// AEqualsB the comparison of A and B once the failback finished.
	Election   *ElectionLoss `json:"election,omitempty"`
	Quarantine *Quarantine   `json:"quarantine,omitempty"`
	AEqualsB   *Compare      `json:"aEqualsB,omitempty"`
	// Audit holds the report's numbers against the producers' ledger
	// (sandbox only); a failed check fails the report step.
	Audit []AuditCheck `json:"audit,omitempty"`
	// Cost is each number the drill measured, with what it means.
	Cost []Cost `json:"cost"`
}

// RPO methods.
const (
	// RPOAcks counts the writes the source acknowledged to producers that
	// the destination lacks: exact (the sandbox's producers keep a ledger).
	RPOAcks = "acknowledgements"
	// RPOOffsets is, per partition, the source's log end minus the offset
	// after the last mirrored one, read when the failover completed. It
	// counts offsets, so transaction markers are included, and it can only
	// be read while the source answers.
	RPOOffsets = "offsets"
)

// RPO is the data the failover lost.
type RPO struct {
	Method string `json:"method"` // RPOAcks or RPOOffsets
	// Known is false when the loss could not be measured; Unknown says why
	// (for offsets: the source was unreachable).
	Known   bool   `json:"known"`
	Unknown string `json:"unknown,omitempty"`
	Records int64  `json:"records"`
	// Seconds is how far back the loss reaches: from the oldest lost
	// acknowledgement to the outage (acknowledgements), or the mirror's
	// worst lag time when the outage began (offsets, an estimate).
	Seconds            float64          `json:"seconds"`
	ByTopic            map[string]int64 `json:"byTopic"`
	AckedByA           int64            `json:"ackedByA,omitempty"`
	UnmirroredAtOutage int64            `json:"unmirroredAtOutage,omitempty"` // by offset, when A went down
	LostIDs            []string         `json:"lostIds,omitempty"`
	Lost               []LostPartition  `json:"lostPartitions,omitempty"` // acknowledgements: which partitions and offsets
	Partitions         []PartitionRPO   `json:"partitions,omitempty"`
	MeasuredAt         time.Time        `json:"measuredAt,omitzero"`
}

// PartitionRPO is one partition's loss by offsets.
type PartitionRPO struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	SourceEnd  int64  `json:"sourceLogEnd"`       // -1 when the source did not answer for it
	LME        int64  `json:"lastMirroredOffset"` // -1 when nothing was mirrored
	Unmirrored int64  `json:"unmirrored"`         // SourceEnd - (LME+1), 0 when unknown
}

// RTO is the outage to the first successful produce and consume on B.
type RTO struct {
	Seconds        float64   `json:"seconds"`
	OutageAt       time.Time `json:"outageAt,omitzero"`
	StopSentAt     time.Time `json:"stopSentAt,omitzero"`
	StoppedAt      time.Time `json:"stoppedAt,omitzero"`
	FirstProduceAt time.Time `json:"firstProduceAt,omitzero"`
	FirstConsumeAt time.Time `json:"firstConsumeAt,omitzero"`
	// How says where the two firsts come from.
	How string `json:"how,omitempty"`
}

// GroupResult is what happened to the demo consumer group (sandbox only:
// its member remembers every record it processed).
type GroupResult struct {
	Group      string          `json:"group"`
	Topic      string          `json:"topic"`
	Duplicates int64           `json:"duplicates"`   // records processed more than once
	Gaps       int64           `json:"gaps"`         // records on B never processed
	PositionsA map[int32]int64 `json:"positionsOnA"` // last commit acknowledged by A before the outage
	PositionsB map[int32]int64 `json:"positionsOnB"` // offsets B held for the group when it moved
	AckedByB   int64           `json:"ackedByB"`
}

// GroupPosition is one partition of a consumer group whose offsets the
// mirror synced: where it was on A, what the sync wrote to B, and where it
// is on B after the switch.
type GroupPosition struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Source    int64  `json:"sourceCommitted"` // on A as of the mirror's last sync, -1 none
	Synced    int64  `json:"synced"`          // written to B by the sync, -1 none
	OnB       int64  `json:"onB"`             // committed on B when verified, -1 none
	// Reprocessed is Source - Synced when positive: records the group
	// reads again on B because the sync had not caught up with it.
	Reprocessed int64 `json:"reprocessed"`
}

// measured is the report's measurements only: what the steps found, with
// the target's own, and no timeline. Only the running step (or nobody) may
// touch the measurements meanwhile.
func (d *Drill) measured() Report {
	rep := Report{
		Version: ReportVersion, Target: d.cfg.Target.kind(), Mirror: d.cfg.Mirror, Reverse: d.cfg.Reverse,
		BWritable: d.m.bWritable,
		Anomalies: slices.Clone(d.m.anomalies),
		Failback:  slices.Clone(d.m.failback),
	}
	rep.RTO = RTO{Seconds: d.rto().Seconds(), OutageAt: d.m.outageAt, StopSentAt: d.m.stopSent, StoppedAt: d.m.stopDone,
		FirstProduceAt: d.m.firstProduceB, FirstConsumeAt: d.m.firstConsumeB}
	rep.RPO = RPO{ByTopic: map[string]int64{}}
	d.cfg.Target.fill(&rep)
	return rep
}

// BuildReport assembles the report from what the steps measured.
func (d *Drill) BuildReport() Report {
	st := d.Status()
	rep := d.measured()
	rep.Source, rep.Destination = d.cfg.Target.Clusters()
	rep.Finished, rep.Timeline, rep.Complete = d.cfg.Now(), st.Steps, true
	if len(st.Steps) > 0 {
		rep.Started = st.Steps[0].Started
	}
	// The report is the report step's last act: it describes that step as
	// done at the moment it is written.
	if last := &rep.Timeline[len(rep.Timeline)-1]; last.ID == StepReport && last.State == Running {
		last.State, last.Result, last.Ended = Passed, Passed.String(), rep.Finished
	}
	for _, s := range rep.Timeline {
		if s.ID != StepReport && s.State != Passed {
			rep.Complete = false
		}
		if s.Note != "" {
			rep.Notes = append(rep.Notes, s.Step+": "+s.Note)
		}
		if s.State == Failed {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("step %s failed: %s", s.Step, s.Error))
		}
	}
	if rep.Groups == nil {
		rep.Groups = []GroupPosition{}
	}
	if rep.Failback == nil {
		rep.Failback = []FailbackPartition{}
	}
	if rep.Anomalies == nil {
		rep.Anomalies = []string{}
	}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	rep.Cost = Costs(rep)
	return rep
}

// rto is the outage to the first successful produce and consume on B (to
// the one measured, when a target can only see one of them).
func (d *Drill) rto() time.Duration {
	if d.m.outageAt.IsZero() || (d.m.firstProduceB.IsZero() && d.m.firstConsumeB.IsZero()) {
		return 0
	}
	last := d.m.firstProduceB
	if d.m.firstConsumeB.After(last) {
		last = d.m.firstConsumeB
	}
	return max(0, last.Sub(d.m.outageAt))
}

// report writes PATH.json and PATH.md. A complete drill's numbers are
// audited first (sandbox: against the producers' ledger); the report says
// how each check went, and a failed one fails the step once it is written.
func (d *Drill) report(ctx context.Context, r *stepRun) error {
	rep := d.BuildReport()
	if rep.Complete {
		rep.Audit = d.cfg.Target.audit(ctx, &rep, d.m.lme)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(d.cfg.ReportPath+".json", append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.WriteFile(d.cfg.ReportPath+".md", []byte(Markdown(rep)), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	d.mu.Lock()
	d.written = d.cfg.ReportPath
	d.mu.Unlock()
	r.line("RPO %s, RTO %.3fs, %d anomalies", rpoText(rep.RPO), rep.RTO.Seconds, len(rep.Anomalies))
	if rep.Quarantine != nil {
		r.line("the loss three ways: %d records by the ledger, on %d DIVERGED partitions at failback, %d acknowledged records in the quarantine",
			rep.RPO.Records, divergedCount(rep.Failback), rep.Quarantine.Acknowledged)
	}
	if len(rep.Audit) > 0 {
		bad := auditFailures(rep.Audit)
		r.line("audit against the producers' ledger: %d of %d checks agree", len(rep.Audit)-len(bad), len(rep.Audit))
		for _, b := range bad {
			r.line("DISAGREES: %s", b)
		}
	}
	r.line("wrote %s.md and %s.json", d.cfg.ReportPath, d.cfg.ReportPath)
	if bad := auditFailures(rep.Audit); len(bad) > 0 {
		return fmt.Errorf("%d numbers of the report disagree with the producers' ledger: %s", len(bad), strings.Join(bad, "; "))
	}
	return nil
}

func divergedCount(fb []FailbackPartition) int {
	n := 0
	for _, fp := range fb {
		if fp.Expect == "diverged" {
			n++
		}
	}
	return n
}

// rpoText is the RPO in one phrase.
func rpoText(r RPO) string {
	if !r.Known {
		return "unknown (" + r.Unknown + ")"
	}
	if r.Method == RPOOffsets {
		return fmt.Sprintf("%d offsets (%.3fs by lag)", r.Records, r.Seconds)
	}
	return fmt.Sprintf("%d records (%.3fs)", r.Records, r.Seconds)
}

// Markdown renders a report for people.
func Markdown(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kmirror DR drill: %s\n\n", rep.Mirror)
	fmt.Fprintf(&b, "- target: %s\n- source: %s\n- destination: %s\n- started: %s\n- finished: %s\n- complete: %v\n\n",
		rep.Target, rep.Source, rep.Destination, rep.Started.Format(time.RFC3339), rep.Finished.Format(time.RFC3339), rep.Complete)
	b.WriteString("## Results\n\n| measure | value |\n|---|---|\n")
	switch {
	case !rep.RPO.Known:
		fmt.Fprintf(&b, "| RPO (records) | unknown: %s |\n", mdCell(rep.RPO.Unknown))
	case rep.RPO.Method == RPOOffsets:
		fmt.Fprintf(&b, "| RPO (records) | %d offsets on A beyond the last mirrored offset, at %s (transaction markers included) |\n",
			rep.RPO.Records, rep.RPO.MeasuredAt.Format("15:04:05.000"))
	default:
		fmt.Fprintf(&b, "| RPO (records) | %d of %d acknowledged by A |\n", rep.RPO.Records, rep.RPO.AckedByA)
	}
	switch {
	case rep.RPO.Method == RPOOffsets && !rep.RPO.Known:
		// Without A's log ends the lag is only what the mirror had seen of
		// A: records A took after its last answer are not in it.
		fmt.Fprintf(&b, "| RPO (time) | at least %.3f s (estimate: the mirror's worst lag time when the outage began, as far as it had seen A) |\n", rep.RPO.Seconds)
	case rep.RPO.Method == RPOOffsets:
		fmt.Fprintf(&b, "| RPO (time) | %.3f s (estimate: the mirror's worst lag time when the outage began) |\n", rep.RPO.Seconds)
	default:
		fmt.Fprintf(&b, "| RPO (time) | %.3f s |\n", rep.RPO.Seconds)
	}
	rto := "outage → first produce and consume on B"
	if rep.RTO.How != "" {
		rto = rep.RTO.How
	}
	fmt.Fprintf(&b, "| RTO | %.3f s (%s) |\n", rep.RTO.Seconds, mdCell(rto))
	if g := rep.Group; g != nil {
		fmt.Fprintf(&b, "| processed twice | %d |\n| never processed | %d |\n", g.Duplicates, g.Gaps)
	} else {
		var again int64
		for _, p := range rep.Groups {
			again += p.Reprocessed
		}
		fmt.Fprintf(&b, "| read again after the switch | %d records over %d synced group partitions (A's commit minus the synced offset) |\n", again, len(rep.Groups))
	}
	fmt.Fprintf(&b, "| B writable | %v (%s) |\n\n", rep.BWritable, mdCell(rep.Writable))
	if len(rep.RPO.ByTopic) > 0 {
		b.WriteString("Lost by topic:")
		for _, t := range lostTopics(rep.RPO.ByTopic) {
			fmt.Fprintf(&b, " %s %d;", t, rep.RPO.ByTopic[t])
		}
		b.WriteString("\n\n")
	}
	if len(rep.Cost) > 0 {
		b.WriteString("## What it cost\n\n")
		for _, c := range rep.Cost {
			fmt.Fprintf(&b, "- **%s: %s.** %s\n", c.Label, c.Value, c.Meaning)
		}
		b.WriteString("\n")
	}
	mdLoss(&b, rep)
	if len(rep.Groups) > 0 {
		b.WriteString("## Consumer groups\n\n| group | partition | on A (last sync) | synced to B | on B | read again |\n|---|---|---|---|---|---|\n")
		for _, p := range rep.Groups {
			fmt.Fprintf(&b, "| %s | %s/%d | %s | %s | %s | %d |\n", p.Group, p.Topic, p.Partition, offText(p.Source), offText(p.Synced), offText(p.OnB), p.Reprocessed)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Timeline\n\n")
	for i, s := range rep.Timeline {
		fmt.Fprintf(&b, "### %d. %s — %s\n\n", i+1, s.Title, s.Result)
		if s.Instruction != "" {
			mark := "[ ]"
			if !s.Confirmed.IsZero() {
				mark = "[x]"
			}
			fmt.Fprintf(&b, "- %s %s", mark, s.Instruction)
			if !s.Confirmed.IsZero() {
				fmt.Fprintf(&b, " (confirmed %s)", s.Confirmed.Format("15:04:05.000"))
			}
			b.WriteString("\n\n")
		}
		if !s.Started.IsZero() {
			fmt.Fprintf(&b, "%s → %s\n\n", s.Started.Format("15:04:05.000"), s.Ended.Format("15:04:05.000"))
		}
		for _, l := range s.Lines {
			fmt.Fprintf(&b, "    %s\n", l)
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "\n**error:** %s\n", s.Error)
		}
		if s.Note != "" {
			fmt.Fprintf(&b, "\n> operator note: %s\n", s.Note)
		}
		b.WriteString("\n")
	}
	if len(rep.Audit) > 0 {
		b.WriteString("## Audit against the producers' ledger\n\n| check | result | detail |\n|---|---|---|\n")
		for _, c := range rep.Audit {
			res := "agrees"
			if !c.OK {
				res = "**DISAGREES**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(c.Check), res, mdCell(c.Detail))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Anomalies\n\n")
	if len(rep.Anomalies) == 0 {
		b.WriteString("none\n")
	}
	for _, a := range rep.Anomalies {
		fmt.Fprintf(&b, "- %s\n", a)
	}
	b.WriteString("\n## Operator notes\n\n")
	if len(rep.Notes) == 0 {
		b.WriteString("none\n")
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func offText(o int64) string {
	if o < 0 {
		return "none"
	}
	return fmt.Sprint(o)
}

// mdLoss writes what was lost, partition by partition, the unclean
// election's share, what the failback's rebuild kept, and A against B.
func mdLoss(b *strings.Builder, rep Report) {
	if len(rep.RPO.Lost) > 0 {
		b.WriteString("## What was lost\n\n| partition | records | offsets on A | last mirrored offset | DIVERGED at failback | in the quarantine |\n|---|---|---|---|---|---|\n")
		for _, lp := range rep.RPO.Lost {
			fmt.Fprintf(b, "| %s/%d | %d | %s | %d | %v | %d |\n", lp.Topic, lp.Partition, lp.Records, lp.Offsets, lp.LME, lp.Diverged, lp.Quarantined)
		}
		b.WriteString("\n")
	}
	if el := rep.Election; el != nil {
		fmt.Fprintf(b, "## Unclean leader election on A\n\n%s/%d: broker %d took over from broker %d; epoch %d ends at offset %d. "+
			"It lost %d records A had acknowledged (offsets %s): %d are on B, mirrored before the election, %d nowhere. "+
			"%d more were written there without an acknowledgement. The mirror reported: %s.\n\n(%s.)\n\nLost records: %s\n\n",
			el.Topic, el.Partition, el.NewLeader, el.OldLeader, el.OldEpoch, el.EndOffset, el.Records, orDash(el.Offsets), el.OnB, el.Nowhere,
			el.Unacknowledged, orDash(el.MirrorError), el.Simulated, orDash(strings.Join(el.IDs, ", ")))
	}
	if q := rep.Quarantine; q != nil {
		fmt.Fprintf(b, "## Rebuild of A\n\n    %s\n\n", q.Command)
		for _, qt := range q.Topics {
			fmt.Fprintf(b, "- %s: %d records quarantined in `%s`\n", qt.Topic, qt.Records, qt.Name)
		}
		fmt.Fprintf(b, "\nThe quarantine holds %d records: %d A had acknowledged, the %d records of the RPO, and %d it never acknowledged "+
			"(aborted transactions, writes whose answer the outage cut off).\n\n", q.Read, q.Acknowledged, rep.RPO.Records, q.NeverAcknowledged)
	}
	if c := rep.AEqualsB; c != nil {
		if c.Equal {
			fmt.Fprintf(b, "After the failback A == B: %d partitions end at the same offsets and hold the same %d records.\n\n", c.Partitions, c.Records)
		} else {
			fmt.Fprintf(b, "After the failback A differs from B: %s.\n\n", strings.Join(c.Differences, "; "))
		}
	}
}

// lostTopics is the topics of byTopic that lost records, sorted.
func lostTopics(byTopic map[string]int64) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		if byTopic[t] > 0 {
			out = append(out, t)
		}
	}
	return out
}
