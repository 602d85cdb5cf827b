// Package step is what the console shows of a DR drill: the steps in their
// order, where each one is, and the drill's progress. It imports nothing of
// the drill's targets, so the views that draw it link no fake cluster.
package step

import (
	"errors"
	"time"
)

// ID is one step of the drill, in the order they run.
type ID int8

const (
	Preflight ID = iota
	Snapshot
	Outage
	Failover
	Switch
	Verify
	Failback
	Report
)

// All lists every step in order.
var All = []ID{Preflight, Snapshot, Outage, Failover, Switch, Verify, Failback, Report}

// String returns the step's short name, as the report's JSON spells it.
func (s ID) String() string {
	switch s {
	case Preflight:
		return "preflight"
	case Snapshot:
		return "snapshot"
	case Outage:
		return "outage"
	case Failover:
		return "failover"
	case Switch:
		return "switch-clients"
	case Verify:
		return "verify"
	case Failback:
		return "failback-rehearsal"
	case Report:
		return "report"
	}
	return "unknown"
}

// Title is the step's heading in the panel and the report.
func (s ID) Title() string {
	switch s {
	case Preflight:
		return "Preflight"
	case Snapshot:
		return "Snapshot T0"
	case Outage:
		return "Outage: take A down"
	case Failover:
		return "Failover: stop the mirror"
	case Switch:
		return "Switch clients to B"
	case Verify:
		return "Verify"
	case Failback:
		return "Failback rehearsal"
	case Report:
		return "Report"
	}
	return "Unknown"
}

// Explain is the one line that says why the step exists.
func (s ID) Explain() string {
	switch s {
	case Preflight:
		return "A failover is only as good as the mirror before it: every partition MIRRORING, lag small, source reachable."
	case Snapshot:
		return "Records where B stood before the outage, so what is lost afterwards can be counted exactly."
	case Outage:
		return "Cluster A goes down now; its producers keep trying, and writes A acknowledged but B never got are the loss."
	case Failover:
		return "Stopping the mirror aborts open mirrored transactions, fences the writer and makes B's topics writable."
	case Switch:
		return "Producers and the consumer group move to B; the group resumes from the offsets B holds for it."
	case Verify:
		return "Count records lost, records processed twice and never processed, and compare group positions."
	case Failback:
		return "Bring A back and mirror B to A: partitions get only the delta, or fail as diverged where A holds lost writes."
	case Report:
		return "Write the timeline, RPO, RTO, anomalies and your notes as Markdown and JSON."
	}
	return ""
}

// LookAt says where on the console the step's effect shows.
func (s ID) LookAt() string {
	switch s {
	case Preflight:
		return "partitions view: STATE column all MIRRORING, LAG near 0"
	case Snapshot:
		return "partitions view: the DST-OFFSET column: these are the T0 positions"
	case Outage:
		return "events view (tab): the mirror's fetches from A fail; this panel: writes A acknowledged but never mirrored"
	case Failover:
		return "partitions view: STATE moves to STOPPED partition by partition; this panel: each one's LME"
	case Switch:
		return "this panel: first produce and consume on B after the outage, the group's positions, the RTO"
	case Verify:
		return "this panel: lost, duplicate and gap counts"
	case Failback:
		return "this panel: per-partition LME, delta or DIVERGED (b-to-a runs in a second instance, on A)"
	case Report:
		return "the report path below"
	}
	return ""
}

// State is where a step is.
type State int8

const (
	Pending State = iota
	Running
	Passed
	Failed
)

// String names the state.
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Passed:
		return "passed"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Record is one step's place in the timeline.
type Record struct {
	ID    ID     `json:"-"`
	Step  string `json:"step"`
	Title string `json:"title"`
	// Instruction is what the operator does in this step on real clusters;
	// Confirmed is when they ticked it done.
	Instruction string    `json:"instruction,omitempty"`
	Confirmed   time.Time `json:"confirmed,omitzero"`
	Explain     string    `json:"-"` // why the step exists, for the panel
	LookAt      string    `json:"-"` // where its effect shows on the console
	State       State     `json:"-"`
	Result      string    `json:"result"`
	Started     time.Time `json:"started,omitzero"`
	Ended       time.Time `json:"ended,omitzero"`
	Lines       []string  `json:"lines"`
	Error       string    `json:"error,omitempty"`
	Note        string    `json:"note,omitempty"`
}

// NeedsConfirm reports whether the step waits for the operator to confirm
// its instruction.
func (s Record) NeedsConfirm() bool { return s.Instruction != "" && s.Confirmed.IsZero() }

// Status is a copy of the drill's progress for the console.
type Status struct {
	Current    int // index into Steps of the next step to run; len(Steps) when done
	Steps      []Record
	Running    bool
	ReportPath string // set once the report is written
	// Cost explains each number measured so far (after every step).
	Cost []Cost
}

// Cost is one number the drill measured, with one sentence on what it
// means for the business and what would shrink it.
type Cost struct {
	Label   string `json:"label"`
	Value   string `json:"value"`
	Meaning string `json:"meaning"`
}

// Done reports whether every step ran.
func (s Status) Done() bool { return s.Current >= len(s.Steps) }

// The drill's answers to a step asked for at the wrong time, here so the
// console can tell them apart with errors.Is.
var (
	// ErrDone is returned by the drill's Next after the last step.
	ErrDone = errors.New("drill: every step has run")
	// ErrBusy is returned by the drill's Next while a step runs.
	ErrBusy = errors.New("drill: a step is running")

	// ErrNeedsConfirm is returned by the drill's Next when the current
	// step is the operator's: they do what its instruction says and
	// Confirm it.
	ErrNeedsConfirm = errors.New("drill: this step is yours: do what it says, then confirm it")
	// ErrNothingToConfirm is returned by the drill's Confirm when the
	// current step has no instruction: Next runs it.
	ErrNothingToConfirm = errors.New("drill: this step has no instruction to confirm")
)
