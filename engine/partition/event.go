package partition

import (
	"fmt"
	"time"
)

// EventKind names the kind of an Event.
type EventKind int8

const (
	KindStart EventKind = iota
	KindPause
	KindResume
	KindStop
	KindRecover
	KindAligned
	KindAlignmentDiverged
	KindFenced
	KindFetcherRemoved
	KindStopCompleted
	KindError
	KindTick
	KindULEDetected
	KindULERecovered
	KindRestored
	KindConfigure
	KindProgressed
	KindSourceReachable
)

// EventKinds lists every event kind.
var EventKinds = []EventKind{KindStart, KindPause, KindResume, KindStop, KindRecover,
	KindAligned, KindAlignmentDiverged, KindFenced, KindFetcherRemoved, KindStopCompleted,
	KindError, KindTick, KindULEDetected, KindULERecovered, KindRestored, KindConfigure, KindProgressed, KindSourceReachable}

// String returns the event's name as logs and rejections show it.
func (k EventKind) String() string {
	switch k {
	case KindStart:
		return "start"
	case KindPause:
		return "pause"
	case KindResume:
		return "resume"
	case KindStop:
		return "stop"
	case KindRecover:
		return "recover"
	case KindAligned:
		return "aligned"
	case KindAlignmentDiverged:
		return "alignment-diverged"
	case KindFenced:
		return "fenced"
	case KindFetcherRemoved:
		return "fetcher-removed"
	case KindStopCompleted:
		return "stop-completed"
	case KindError:
		return "error"
	case KindTick:
		return "tick"
	case KindULEDetected:
		return "ule-detected"
	case KindULERecovered:
		return "ule-recovered"
	case KindRestored:
		return "restored"
	case KindProgressed:
		return "progressed"
	case KindConfigure:
		return "configure"
	case KindSourceReachable:
		return "source-reachable"
	}
	return fmt.Sprintf("EventKind(%d)", int8(k))
}

// Event is an input of Step: an operator command, the result of an action the
// engine ran, a timer tick, or a configuration change. The set is closed;
// only this package's types implement it.
//
// Results (Aligned, AlignmentDiverged, Fenced, FetcherRemoved, StopCompleted,
// Error, ULEDetected, ULERecovered) carry Epoch: the StateEpoch of the status
// whose Step returned the action that produced them. A result from an older
// epoch is stale (its work was overtaken by a command, a failure or a new
// owner) and is rejected, so a late alignment of an abandoned attempt can
// never move a newer attempt forward.
type Event interface {
	Kind() EventKind
	isEvent()
}

// Operator commands. Each records the operator's intent in Status.Desired.
type (
	// Start mirrors the partition: a new partition begins with alignment, a
	// stopped one goes back through alignment (restart after failover), a
	// paused one resumes.
	Start struct{}
	// Pause removes the fetcher but keeps progress; the topic stays read-only.
	Pause struct{}
	// Resume continues a paused partition.
	Resume struct{}
	// Stop runs the failover sequence and leaves the partition STOPPED.
	Stop struct{}
	// Recover leaves FAILED at once, whatever the cause. With Rebuild the
	// operator allows the destructive topic rebuild if alignment finds
	// divergence.
	Recover struct{ Rebuild bool }
)

// AlignMode says how alignment positioned the destination.
type AlignMode int8

const (
	AlignResume AlignMode = iota // destination log end matches the LME: continue
	AlignFresh                   // empty destination: fillers + DeleteRecords to the source log start
)

// String returns "resume" or "fresh".
func (m AlignMode) String() string {
	switch m {
	case AlignResume:
		return "resume"
	case AlignFresh:
		return "fresh"
	}
	return fmt.Sprintf("AlignMode(%d)", int8(m))
}

// Engine results.
type (
	// Aligned: log alignment (or a rebuild) finished and the destination log
	// end is where mirroring continues.
	Aligned struct {
		Epoch int64
		Mode  AlignMode
	}
	// AlignmentDiverged: alignment found destination records the source does
	// not have (or different ones).
	AlignmentDiverged struct {
		Epoch  int64
		Reason string
		Cause  Cause // why, when it is not plain divergence (CauseTxnAborted); CauseNone: CauseDiverged
	}
	// Fenced: the writer identity was acquired (or bumped), fencing older
	// writers, and the destination log end was re-checked.
	Fenced struct {
		Epoch       int64
		WriterID    int64
		WriterEpoch int16
	}
	// FetcherRemoved: the partition left its fetcher and has no append in
	// flight (the reply to RemoveFetcher).
	FetcherRemoved struct{ Epoch int64 }
	// StopCompleted: the stop sequence finished (the reply to RunStopSequence).
	StopCompleted struct{ Epoch int64 }
	// Error: the running work failed. Now and Jitter (a fraction in [0, 1))
	// schedule the retry; the machine reads no clock and draws no randomness.
	Error struct {
		Epoch     int64
		Err       string
		Retryable bool
		Cause     Cause
		Now       time.Time
		Jitter    float64
	}
	// ULEDetected: the source lost committed records to an unclean leader
	// election. Enabled is mirror.unclean.leader.election.enable.
	ULEDetected struct {
		Epoch   int64
		Enabled bool
		Reason  string // what the source lost, for the operator
	}
	// ULERecovered: the recovery started by StartULERecovery finished.
	ULERecovered struct{ Epoch int64 }
)

// Other events.
type (
	// Tick is a timer firing at Now. A FAILED partition whose NextRetry is due
	// retries; in every other case a tick changes nothing, so the engine may
	// tick freely. SourceUnreachable is set while the engine knows the
	// mirror's source does not answer (why, for the operator): a partition
	// FAILED for that cause then stays FAILED and schedules its next retry
	// (Jitter, in [0, 1), draws its delay) instead of aligning against a
	// source that is not there.
	Tick struct {
		Now               time.Time
		SourceUnreachable string
		Jitter            float64
	}
	// SourceReachable: the mirror's source answers again. A partition
	// FAILED because it did not retries at once rather than at the end of
	// its backoff, which may have grown to minutes during the outage.
	SourceReachable struct{}
	// Restored: this instance has just taken ownership of the partition and
	// replayed its status from __mirror_state. The machine bumps the state
	// epoch (fencing the previous owner's writes) and re-enters the state:
	// work that was in flight in another process is started again from its
	// safe beginning.
	Restored struct{}
	// Progressed: MIRRORING copied data again after the retries that led
	// there. Only then is the retry count reset: reaching MIRRORING alone
	// proves nothing when the fault strikes at the first fetch.
	Progressed struct{ Epoch int64 }
	// Configure replaces the retry settings; it takes effect at the next
	// scheduled retry.
	Configure struct{ Config Config }
)

func (Start) Kind() EventKind             { return KindStart }
func (Pause) Kind() EventKind             { return KindPause }
func (Resume) Kind() EventKind            { return KindResume }
func (Stop) Kind() EventKind              { return KindStop }
func (Recover) Kind() EventKind           { return KindRecover }
func (Aligned) Kind() EventKind           { return KindAligned }
func (AlignmentDiverged) Kind() EventKind { return KindAlignmentDiverged }
func (Fenced) Kind() EventKind            { return KindFenced }
func (FetcherRemoved) Kind() EventKind    { return KindFetcherRemoved }
func (StopCompleted) Kind() EventKind     { return KindStopCompleted }
func (Error) Kind() EventKind             { return KindError }
func (Tick) Kind() EventKind              { return KindTick }
func (ULEDetected) Kind() EventKind       { return KindULEDetected }
func (ULERecovered) Kind() EventKind      { return KindULERecovered }
func (Restored) Kind() EventKind          { return KindRestored }
func (Configure) Kind() EventKind         { return KindConfigure }
func (Progressed) Kind() EventKind        { return KindProgressed }
func (SourceReachable) Kind() EventKind   { return KindSourceReachable }

func (Start) isEvent()             {}
func (Pause) isEvent()             {}
func (Resume) isEvent()            {}
func (Stop) isEvent()              {}
func (Recover) isEvent()           {}
func (Aligned) isEvent()           {}
func (AlignmentDiverged) isEvent() {}
func (Fenced) isEvent()            {}
func (FetcherRemoved) isEvent()    {}
func (StopCompleted) isEvent()     {}
func (Error) isEvent()             {}
func (Tick) isEvent()              {}
func (ULEDetected) isEvent()       {}
func (ULERecovered) isEvent()      {}
func (Restored) isEvent()          {}
func (Configure) isEvent()         {}
func (Progressed) isEvent()        {}
func (SourceReachable) isEvent()   {}

// resultEpoch returns the epoch a result carries; ok is false for events that
// are not results.
func resultEpoch(ev Event) (epoch int64, ok bool) {
	switch e := ev.(type) {
	case Aligned:
		return e.Epoch, true
	case AlignmentDiverged:
		return e.Epoch, true
	case Fenced:
		return e.Epoch, true
	case FetcherRemoved:
		return e.Epoch, true
	case StopCompleted:
		return e.Epoch, true
	case Error:
		return e.Epoch, true
	case ULEDetected:
		return e.Epoch, true
	case ULERecovered:
		return e.Epoch, true
	case Progressed:
		return e.Epoch, true
	}
	return 0, false
}
