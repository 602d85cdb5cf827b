package drill

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/sandbox"
)

// ReportVersion is the version of the JSON report's format.
const ReportVersion = 1

// Report is the drill's result, written as PATH.json (and rendered as
// PATH.md).
type Report struct {
	Version     int                 `json:"version"`
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
	Group       GroupResult         `json:"group"`
	Failback    []FailbackPartition `json:"failback"`
	Anomalies   []string            `json:"anomalies"`
	Notes       []string            `json:"notes"`
}

// RPO is the data the failover lost, counted from the producers' own
// acknowledgements against B's logs.
type RPO struct {
	Records            int64            `json:"records"`
	Seconds            float64          `json:"seconds"`
	ByTopic            map[string]int64 `json:"byTopic"`
	AckedByA           int64            `json:"ackedByA"`
	UnmirroredAtOutage int64            `json:"unmirroredAtOutage"` // by offset, when A went down
	LostIDs            []string         `json:"lostIds"`
}

// RTO is the outage to the first successful produce and consume on B.
type RTO struct {
	Seconds        float64   `json:"seconds"`
	OutageAt       time.Time `json:"outageAt,omitzero"`
	StopSentAt     time.Time `json:"stopSentAt,omitzero"`
	StoppedAt      time.Time `json:"stoppedAt,omitzero"`
	FirstProduceAt time.Time `json:"firstProduceAt,omitzero"`
	FirstConsumeAt time.Time `json:"firstConsumeAt,omitzero"`
}

// GroupResult is what happened to the demo consumer group.
type GroupResult struct {
	Group      string          `json:"group"`
	Topic      string          `json:"topic"`
	Duplicates int64           `json:"duplicates"`   // records processed more than once
	Gaps       int64           `json:"gaps"`         // records on B never processed
	PositionsA map[int32]int64 `json:"positionsOnA"` // last commit acknowledged by A before the outage
	PositionsB map[int32]int64 `json:"positionsOnB"` // offsets B held for the group when it moved
	BWritable  bool            `json:"bWritable"`
	AckedByB   int64           `json:"ackedByB"`
}

// BuildReport assembles the report from what the steps measured.
func (d *Drill) BuildReport() Report {
	st := d.Status()
	rep := Report{
		Version: ReportVersion, Mirror: d.cfg.Mirror, Reverse: d.cfg.Reverse,
		Source:      sandbox.ClusterA + " " + strings.Join(d.cfg.Sandbox.Bootstrap(sandbox.SideA), ","),
		Destination: sandbox.ClusterB + " " + strings.Join(d.cfg.Sandbox.Bootstrap(sandbox.SideB), ","),
		Finished:    d.cfg.Now(),
		Timeline:    st.Steps,
		Complete:    true,
		Anomalies:   slices.Clone(d.m.anomalies),
		Failback:    slices.Clone(d.m.failback),
	}
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
	rep.RPO = RPO{Records: int64(len(d.m.lost)), Seconds: d.rpoTime().Seconds(), ByTopic: map[string]int64{},
		AckedByA: d.m.ackedA, UnmirroredAtOutage: d.m.unmirroredAtOutage, LostIDs: []string{}}
	for _, a := range d.m.lost {
		rep.RPO.ByTopic[a.Topic]++
		rep.RPO.LostIDs = append(rep.RPO.LostIDs, a.ID)
	}
	rep.RTO = RTO{Seconds: d.rto().Seconds(), OutageAt: d.m.outageAt, StopSentAt: d.m.stopSent, StoppedAt: d.m.stopDone,
		FirstProduceAt: d.m.firstProduceB, FirstConsumeAt: d.m.firstConsumeB}
	rep.Group = GroupResult{Group: sandbox.GroupID, Topic: sandbox.ProcessedTopic, Duplicates: d.m.duplicates, Gaps: d.m.gaps,
		PositionsA: d.m.groupA, PositionsB: d.m.groupB, BWritable: d.m.bWritable, AckedByB: d.m.ackedB}
	if rep.Failback == nil {
		rep.Failback = []FailbackPartition{}
	}
	if rep.Anomalies == nil {
		rep.Anomalies = []string{}
	}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	return rep
}

// report writes PATH.json and PATH.md.
func (d *Drill) report(r *stepRun) error {
	rep := d.BuildReport()
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
	r.line("RPO %d records (%.3fs), RTO %.3fs, %d anomalies", rep.RPO.Records, rep.RPO.Seconds, rep.RTO.Seconds, len(rep.Anomalies))
	r.line("wrote %s.md and %s.json", d.cfg.ReportPath, d.cfg.ReportPath)
	return nil
}

// Markdown renders a report for people.
func Markdown(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kmirror DR drill: %s\n\n", rep.Mirror)
	fmt.Fprintf(&b, "- source: %s\n- destination: %s\n- started: %s\n- finished: %s\n- complete: %v\n\n",
		rep.Source, rep.Destination, rep.Started.Format(time.RFC3339), rep.Finished.Format(time.RFC3339), rep.Complete)
	b.WriteString("## Results\n\n| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| RPO (records) | %d of %d acknowledged by A |\n", rep.RPO.Records, rep.RPO.AckedByA)
	fmt.Fprintf(&b, "| RPO (time) | %.3f s |\n", rep.RPO.Seconds)
	fmt.Fprintf(&b, "| RTO | %.3f s (outage → first produce and consume on B) |\n", rep.RTO.Seconds)
	fmt.Fprintf(&b, "| processed twice | %d |\n| never processed | %d |\n", rep.Group.Duplicates, rep.Group.Gaps)
	fmt.Fprintf(&b, "| B writable | %v (%d records acknowledged by B) |\n\n", rep.Group.BWritable, rep.Group.AckedByB)
	if len(rep.RPO.ByTopic) > 0 {
		b.WriteString("Lost by topic:")
		for _, t := range sandbox.TopicNames() {
			if n := rep.RPO.ByTopic[t]; n > 0 {
				fmt.Fprintf(&b, " %s %d;", t, n)
			}
		}
		b.WriteString("\n\n")
	}
	b.WriteString("## Timeline\n\n")
	for i, s := range rep.Timeline {
		fmt.Fprintf(&b, "### %d. %s — %s\n\n", i+1, s.Title, s.Result)
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
