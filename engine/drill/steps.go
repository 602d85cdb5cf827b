package drill

// StepID is one step of the drill, in the order they run.
type StepID int8

const (
	StepPreflight StepID = iota
	StepSnapshot
	StepOutage
	StepFailover
	StepSwitch
	StepVerify
	StepFailback
	StepReport
)

// Steps lists every step in order.
var Steps = []StepID{StepPreflight, StepSnapshot, StepOutage, StepFailover, StepSwitch, StepVerify, StepFailback, StepReport}

// String returns the step's short name, as the report's JSON spells it.
func (s StepID) String() string {
	switch s {
	case StepPreflight:
		return "preflight"
	case StepSnapshot:
		return "snapshot"
	case StepOutage:
		return "outage"
	case StepFailover:
		return "failover"
	case StepSwitch:
		return "switch-clients"
	case StepVerify:
		return "verify"
	case StepFailback:
		return "failback-rehearsal"
	case StepReport:
		return "report"
	}
	return "unknown"
}

// Title is the step's heading in the panel and the report.
func (s StepID) Title() string {
	switch s {
	case StepPreflight:
		return "Preflight"
	case StepSnapshot:
		return "Snapshot T0"
	case StepOutage:
		return "Outage: take A down"
	case StepFailover:
		return "Failover: stop the mirror"
	case StepSwitch:
		return "Switch clients to B"
	case StepVerify:
		return "Verify"
	case StepFailback:
		return "Failback rehearsal"
	case StepReport:
		return "Report"
	}
	return "Unknown"
}

// Explain is the one line that says why the step exists.
func (s StepID) Explain() string {
	switch s {
	case StepPreflight:
		return "A failover is only as good as the mirror before it: every partition MIRRORING, lag small, source reachable."
	case StepSnapshot:
		return "Records where B stood before the outage, so what is lost afterwards can be counted exactly."
	case StepOutage:
		return "Cluster A goes down now; its producers keep trying, and writes A acknowledged but B never got are the loss."
	case StepFailover:
		return "Stopping the mirror aborts open mirrored transactions, fences the writer and makes B's topics writable."
	case StepSwitch:
		return "Producers and the consumer group move to B; the group resumes from the offsets B holds for it."
	case StepVerify:
		return "Count records lost, records processed twice and never processed, and compare group positions."
	case StepFailback:
		return "Bring A back and mirror B to A: partitions get only the delta, or fail as diverged where A holds lost writes."
	case StepReport:
		return "Write the timeline, RPO, RTO, anomalies and your notes as Markdown and JSON."
	}
	return ""
}

// LookAt says where on the console the step's effect shows.
func (s StepID) LookAt() string {
	switch s {
	case StepPreflight:
		return "partitions view: STATE column all MIRRORING, LAG near 0"
	case StepSnapshot:
		return "the DEST OFFSET column: these are the T0 positions"
	case StepOutage:
		return "events view (tab): the mirror's fetches from A fail; this panel: writes A acknowledged but never mirrored"
	case StepFailover:
		return "partitions view: STATE moves to STOPPED partition by partition; this panel: each one's LME"
	case StepSwitch:
		return "this panel: first produce and consume on B after the outage, the group's positions, the RTO"
	case StepVerify:
		return "this panel: lost, duplicate and gap counts"
	case StepFailback:
		return "this panel: per-partition LME, delta or DIVERGED (b-to-a runs in a second instance, on A)"
	case StepReport:
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
