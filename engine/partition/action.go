package partition

import (
	"fmt"
	"time"
)

// Action is an instruction Step hands to the engine. Actions are executed in
// order. The contract:
//
//   - Every transition (every Step that bumps StateEpoch) returns Persist of
//     the new status as its first action. The engine must write it to
//     __mirror_state and see it acknowledged before it runs the remaining
//     actions, so that what a partition does is never ahead of what a new
//     owner would read back.
//   - Actions that start work (StartAlignment, StartFencing, StartFetching,
//     RemoveFetcher, RunStopSequence, StartULERecovery, Rebuild) are answered
//     later by exactly one result event carrying the StateEpoch of the status
//     Step returned with them (or by an Error carrying that epoch).
type Action interface {
	isAction()
}

type (
	// Persist writes Status to the partition's __mirror_state record.
	Persist struct{ Status Status }
	// StartAlignment compares the destination with the LME and the source
	// epoch lineage; reply Aligned, AlignmentDiverged, ULEDetected or Error.
	// Rebuild tells the engine the operator allowed a rebuild.
	StartAlignment struct{ Rebuild bool }
	// StartFencing acquires or bumps the writer identity and re-checks the
	// destination log end; reply Fenced or Error.
	StartFencing struct{}
	// StartFetching attaches the partition to its fetcher and appender. It
	// has no reply of its own; failures come as Error or ULEDetected.
	StartFetching struct{}
	// RemoveFetcher detaches the partition from its fetcher once in-flight
	// appends finished, or cancels alignment or fencing in progress; reply
	// FetcherRemoved.
	RemoveFetcher struct{}
	// Halt cancels whatever the partition is doing (alignment, fencing,
	// fetching, appending) without waiting for in-flight work to finish
	// cleanly. It has no reply: results of the halted work arrive stale and
	// are rejected.
	Halt struct{}
	// RunStopSequence cancels alignment, fencing or recovery in progress,
	// removes the fetcher (letting in-flight appends finish), records the
	// LME, aborts open mirrored transactions and waits for their markers, and
	// bumps the writer epoch; reply StopCompleted or Error. It must work with
	// the source down and be safe to run again after a crash.
	RunStopSequence struct{}
	// ScheduleRetry asks for a Tick at or after At.
	ScheduleRetry struct{ At time.Time }
	// StartULERecovery rebuilds the topic after an unclean leader election on
	// the source; reply ULERecovered or Error.
	StartULERecovery struct{}
	// Rebuild quarantines the destination-only records, recreates the topic
	// and aligns it from scratch; reply Aligned{Mode: AlignFresh} or Error.
	// A rebuild is topic-wide: the engine coordinates the topic's partitions.
	Rebuild struct{}
	// Emit publishes a message to the console's event log.
	Emit struct {
		Severity Severity
		Message  string
	}
)

func (Persist) isAction()          {}
func (StartAlignment) isAction()   {}
func (StartFencing) isAction()     {}
func (StartFetching) isAction()    {}
func (RemoveFetcher) isAction()    {}
func (Halt) isAction()             {}
func (RunStopSequence) isAction()  {}
func (ScheduleRetry) isAction()    {}
func (StartULERecovery) isAction() {}
func (Rebuild) isAction()          {}
func (Emit) isAction()             {}

// Severity is how loud an Emit is.
type Severity int8

const (
	SeverityInfo Severity = iota
	SeverityWarn
	SeverityError
)

// String returns a short level name.
func (s Severity) String() string {
	switch s {
	case SeverityInfo:
		return "INFO"
	case SeverityWarn:
		return "WARN"
	case SeverityError:
		return "ERROR"
	}
	return fmt.Sprintf("Severity(%d)", int8(s))
}
