package drill

import "github.com/kmirror/kmirror/drill/step"

// The drill's steps, their states and its progress are package step's, so
// that the console can show a drill without linking the sandbox; the
// drill's callers keep spelling them here.
type (
	StepID     = step.ID
	State      = step.State
	StepRecord = step.Record
	Status     = step.Status
)

const (
	StepPreflight = step.Preflight
	StepSnapshot  = step.Snapshot
	StepOutage    = step.Outage
	StepFailover  = step.Failover
	StepSwitch    = step.Switch
	StepVerify    = step.Verify
	StepFailback  = step.Failback
	StepReport    = step.Report

	Pending = step.Pending
	Running = step.Running
	Passed  = step.Passed
	Failed  = step.Failed
)

// Steps lists every step in order.
var Steps = step.All

var (
	ErrDone             = step.ErrDone
	ErrBusy             = step.ErrBusy
	ErrNeedsConfirm     = step.ErrNeedsConfirm
	ErrNothingToConfirm = step.ErrNothingToConfirm
)
