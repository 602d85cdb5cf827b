package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/internal/backoff"
)

// ErrRejected matches every *RejectedError (errors.Is).
var ErrRejected = errors.New("event rejected")

// ErrStale matches a *RejectedError for a result of an older state epoch.
var ErrStale = errors.New("stale result")

// RejectedError says why an event does not apply to a partition's state.
type RejectedError struct {
	State  State
	Event  EventKind
	Reason string
	Stale  bool // the event is a result of an older StateEpoch
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%s rejected in state %s: %s", e.Event, e.State, e.Reason)
}

// Is makes errors.Is(err, ErrRejected) and, for stale results,
// errors.Is(err, ErrStale) true.
func (e *RejectedError) Is(target error) bool {
	return target == ErrRejected || (e.Stale && target == ErrStale)
}

// Step applies ev to s and returns the next status and the actions the engine
// must run, in order. It does no I/O, reads no clock and draws no randomness:
// time and jitter come in on events. A rejected event returns s unchanged and
// no actions; Check tells why.
func Step(s Status, ev Event) (Status, []Action) {
	next, acts, _ := Apply(s, ev)
	return next, acts
}

// Check returns the *RejectedError Step would silently swallow, or nil if ev
// applies to s (as a transition or as a deliberate no-op).
func Check(s Status, ev Event) error {
	_, _, err := Apply(s, ev)
	return err
}

// Apply is Step and Check in one call.
func Apply(s Status, ev Event) (Status, []Action, error) {
	if ev == nil {
		return s, nil, &RejectedError{State: s.State, Event: -1, Reason: "nil event"}
	}
	if epoch, ok := resultEpoch(ev); ok && epoch != s.StateEpoch {
		return s, nil, &RejectedError{State: s.State, Event: ev.Kind(), Stale: true,
			Reason: fmt.Sprintf("stale result of state epoch %d (now %d)", epoch, s.StateEpoch)}
	}
	switch e := ev.(type) {
	case Start:
		return onStart(s)
	case Pause:
		return onPause(s)
	case Resume:
		return onResume(s)
	case Stop:
		return onStop(s)
	case Recover:
		return onRecover(s, e)
	case Aligned:
		return onAligned(s, e)
	case AlignmentDiverged:
		return onDiverged(s, e)
	case Fenced:
		return onFenced(s, e)
	case FetcherRemoved:
		return onFetcherRemoved(s)
	case StopCompleted:
		return onStopCompleted(s)
	case Error:
		return onError(s, e)
	case Tick:
		return onTick(s, e)
	case ULEDetected:
		return onULEDetected(s, e)
	case ULERecovered:
		return onULERecovered(s)
	case Restored:
		return onRestored(s)
	case Configure:
		s.Config = e.Config
		return s, nil, nil
	case Progressed:
		return onProgressed(s)
	case SourceReachable:
		return onSourceReachable(s)
	}
	return s, nil, &RejectedError{State: s.State, Event: ev.Kind(), Reason: "unknown event"}
}

func reject(s Status, k EventKind, format string, args ...any) (Status, []Action, error) {
	return s, nil, &RejectedError{State: s.State, Event: k, Reason: fmt.Sprintf(format, args...)}
}

func noop(s Status) (Status, []Action, error) { return s, nil, nil }

// to moves s into state st: it bumps the epoch, clears the failure fields
// unless st is FAILED, and resets the retry count on reaching MIRRORING.
func to(s Status, st State) Status {
	s.State = st
	s.StateEpoch++
	if st != Failed {
		s.PrevState, s.Error, s.Cause, s.Retryable, s.NextRetry = Unknown, "", CauseNone, false, time.Time{}
	}
	return s
}

// onProgressed resets the retry count once MIRRORING copies data again. It
// is not a transition: the epoch stays, only the record is rewritten.
func onProgressed(s Status) (Status, []Action, error) {
	switch s.State {
	case Mirroring:
		if s.Attempt == 0 {
			return noop(s)
		}
		s.Attempt = 0
		return s, []Action{Persist{Status: s}}, nil
	case Unknown, LogAlignment, EpochFencing, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindProgressed, "not mirroring")
	}
	return reject(s, KindProgressed, "unknown state")
}

// moved returns the transition from → next with the contract's action order:
// Persist, Emit, then the work.
func moved(from State, next Status, sev Severity, msg string, work ...Action) (Status, []Action, error) {
	acts := make([]Action, 0, len(work)+2)
	acts = append(acts, Persist{Status: next},
		Emit{Severity: sev, Message: fmt.Sprintf("%s → %s: %s", from, next.State, msg)})
	return next, append(acts, work...), nil
}

// command prepares s for a transition the operator asked for: the intent is
// recorded and the retry count and rebuild permission start over.
func command(s Status, d Desired) Status {
	s.Desired, s.Attempt, s.Rebuild = d, 0, false
	return s
}

func onStart(s Status) (Status, []Action, error) {
	switch s.State {
	case Unknown, Stopped:
		return moved(s.State, to(command(s, DesiredStart), LogAlignment), SeverityInfo, "mirroring started", StartAlignment{})
	case Paused:
		return onResume(s)
	case LogAlignment, EpochFencing, Mirroring, ULERecovery:
		return noop(s)
	case Pausing:
		return reject(s, KindStart, "pause in progress; start once PAUSED")
	case Stopping:
		return reject(s, KindStart, "stop in progress; start once STOPPED")
	case Failed:
		return reject(s, KindStart, "partition is FAILED; recover it instead")
	}
	return reject(s, KindStart, "unknown state")
}

func onPause(s Status) (Status, []Action, error) {
	switch s.State {
	case Unknown, Failed:
		// Nothing runs: a new partition has not started and entering FAILED
		// halted the work, so there is no fetcher to wait for.
		return moved(s.State, to(command(s, DesiredPause), Paused), SeverityInfo, "paused by operator")
	case LogAlignment, EpochFencing, Mirroring:
		return moved(s.State, to(command(s, DesiredPause), Pausing), SeverityInfo, "pause requested", RemoveFetcher{})
	case Pausing, Paused:
		return noop(s)
	case Stopping:
		return reject(s, KindPause, "stop in progress")
	case Stopped:
		return reject(s, KindPause, "mirroring is stopped; start it to mirror again")
	case ULERecovery:
		return reject(s, KindPause, "unclean leader election recovery in progress; wait for it or stop")
	}
	return reject(s, KindPause, "unknown state")
}

func onResume(s Status) (Status, []Action, error) {
	switch s.State {
	case Paused:
		return moved(s.State, to(command(s, DesiredStart), LogAlignment), SeverityInfo, "resumed by operator", StartAlignment{})
	case Unknown:
		return reject(s, KindResume, "not paused: mirroring never started")
	case LogAlignment, EpochFencing, Mirroring, ULERecovery:
		return reject(s, KindResume, "not paused: mirroring is running")
	case Pausing:
		return reject(s, KindResume, "pause in progress; resume once PAUSED")
	case Stopping, Stopped:
		return reject(s, KindResume, "not paused: mirroring is stopped; use start")
	case Failed:
		return reject(s, KindResume, "not paused: partition is FAILED; recover it")
	}
	return reject(s, KindResume, "unknown state")
}

func onStop(s Status) (Status, []Action, error) {
	switch s.State {
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Failed, ULERecovery:
		return moved(s.State, to(command(s, DesiredStop), Stopping), SeverityWarn, "stop (failover) requested", RunStopSequence{})
	case Stopping, Stopped:
		return noop(s)
	}
	return reject(s, KindStop, "unknown state")
}

func onRecover(s Status, ev Recover) (Status, []Action, error) {
	switch s.State {
	case Failed:
		if ev.Rebuild && s.Cause == CauseSourceTopicRecreated {
			// A rebuild would delete the destination topic, the only
			// copy left of the old source topic's records, to mirror
			// another topic that merely has the same name.
			return reject(s, KindRecover, "rebuild refused: the source topic was deleted and recreated (another topic id); "+
				"the destination topic holds the old topic's records and is not deleted for it")
		}
		s.Attempt = 0
		s.Rebuild = ev.Rebuild && (s.Desired == DesiredStart || s.Desired == DesiredNone)
		msg := "recovered by operator"
		if s.Rebuild {
			msg += " (rebuild allowed)"
		}
		return retry(s, msg)
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, ULERecovery:
		return reject(s, KindRecover, "not FAILED")
	}
	return reject(s, KindRecover, "unknown state")
}

// retry leaves FAILED towards what the operator wants. Mirroring always
// re-enters through LOG_ALIGNMENT, never straight to the state that failed:
// the failure may have left the destination anywhere (a partial or foreign
// append, a zombie writer, a new source leader epoch), so the position is
// derived again from the destination log end and the LME, and EPOCH_FENCING
// then bumps the writer epoch. Nothing the failed attempt believed survives.
func retry(s Status, msg string) (Status, []Action, error) {
	switch s.Desired {
	case DesiredStop:
		return moved(s.State, to(s, Stopping), SeverityWarn, msg, RunStopSequence{})
	case DesiredPause:
		return moved(s.State, to(s, Paused), SeverityInfo, msg)
	case DesiredNone, DesiredStart:
		return moved(s.State, to(s, LogAlignment), SeverityInfo, msg, StartAlignment{Rebuild: s.Rebuild})
	}
	return moved(s.State, to(s, LogAlignment), SeverityInfo, msg, StartAlignment{Rebuild: s.Rebuild})
}

func onAligned(s Status, ev Aligned) (Status, []Action, error) {
	switch s.State {
	case LogAlignment:
		s.Rebuild = false
		return moved(s.State, to(s, EpochFencing), SeverityInfo, "aligned ("+ev.Mode.String()+")", StartFencing{})
	case Unknown, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindAligned, "not aligning")
	}
	return reject(s, KindAligned, "unknown state")
}

func onDiverged(s Status, ev AlignmentDiverged) (Status, []Action, error) {
	switch s.State {
	case LogAlignment:
		if s.Rebuild {
			// Not a transition: the rebuild is the rest of this alignment
			// and answers with Aligned. Rebuild stays set in the persisted
			// status, so a new owner after a crash finishes the job.
			return s, []Action{Emit{Severity: SeverityWarn,
				Message: "destination diverged (" + ev.Reason + "); rebuilding the topic as the operator allowed"},
				Rebuild{}}, nil
		}
		if ev.Cause != CauseNone {
			return fail(s, ev.Reason, ev.Cause, false, time.Time{}, 0)
		}
		return fail(s, "destination diverged: "+ev.Reason, CauseDiverged, false, time.Time{}, 0)
	case Unknown, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindAlignmentDiverged, "not aligning")
	}
	return reject(s, KindAlignmentDiverged, "unknown state")
}

func onFenced(s Status, ev Fenced) (Status, []Action, error) {
	switch s.State {
	case EpochFencing:
		return moved(s.State, to(s, Mirroring), SeverityInfo,
			fmt.Sprintf("writer fenced (producer id %d, epoch %d)", ev.WriterID, ev.WriterEpoch), StartFetching{})
	case Unknown, LogAlignment, Mirroring, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindFenced, "not fencing")
	}
	return reject(s, KindFenced, "unknown state")
}

func onFetcherRemoved(s Status) (Status, []Action, error) {
	switch s.State {
	case Pausing:
		return moved(s.State, to(s, Paused), SeverityInfo, "fetcher removed")
	case Unknown, LogAlignment, EpochFencing, Mirroring, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindFetcherRemoved, "not pausing")
	}
	return reject(s, KindFetcherRemoved, "unknown state")
}

func onStopCompleted(s Status) (Status, []Action, error) {
	switch s.State {
	case Stopping:
		return moved(s.State, to(s, Stopped), SeverityWarn, "stopped; destination partition is writable")
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopped, Failed, ULERecovery:
		return reject(s, KindStopCompleted, "not stopping")
	}
	return reject(s, KindStopCompleted, "unknown state")
}

func onError(s Status, ev Error) (Status, []Action, error) {
	switch s.State {
	case LogAlignment, EpochFencing, Mirroring, Pausing, Stopping, ULERecovery:
		return fail(s, ev.Err, ev.Cause, ev.Retryable, ev.Now, ev.Jitter)
	case Paused:
		// A fatal fault found outside the data path (the metadata
		// refresh seeing another source cluster, the source topic gone)
		// ends the partition's mirroring even while nothing runs: a
		// resume would otherwise copy from what is not its source.
		if ev.Cause.Fatal() {
			return fail(s, ev.Err, ev.Cause, false, ev.Now, ev.Jitter)
		}
		return reject(s, KindError, "no work running")
	case Unknown, Stopped:
		return reject(s, KindError, "no work running")
	case Failed:
		// A retry in waiting would meet the fatal fault anyway: the
		// partition waits for recover instead, saying why. It keeps the
		// state it failed from, where recover returns it.
		if ev.Cause.Fatal() && s.Retryable {
			return failKeeping(s, s.PrevState, ev.Err, ev.Cause, false, ev.Now, ev.Jitter)
		}
		return reject(s, KindError, "already FAILED")
	}
	return reject(s, KindError, "unknown state")
}

// fail moves an active partition to FAILED. A retryable failure schedules
// retry number Attempt+1 after a full-jitter backoff; once the attempts are
// used up the partition stays FAILED, no longer retryable, until recovered.
func fail(s Status, msg string, cause Cause, retryable bool, now time.Time, jitter float64) (Status, []Action, error) {
	return failKeeping(s, s.State, msg, cause, retryable, now, jitter)
}

// failKeeping is fail with the state a recover returns to given: prev.
func failKeeping(s Status, prev State, msg string, cause Cause, retryable bool, now time.Time, jitter float64) (Status, []Action, error) {
	from := s.State
	cfg := s.Config.WithDefaults()
	if cause == CauseNone {
		cause = CauseOther
	}
	n := to(s, Failed)
	n.PrevState, n.Error, n.Cause, n.NextRetry = prev, msg, cause, time.Time{}
	n.Retryable = retryable && !cause.Fatal()
	if !n.Retryable {
		return moved(from, n, SeverityError, msg+" (waits for recover)", Halt{})
	}
	// A source outage is retried for as long as it lasts (at the capped
	// backoff): giving up would leave the partition for an operator to
	// recover after the source is back, where KIP-1279 resumes by itself.
	if cfg.MaxAttempts == NoRetries && cause != CauseSourceUnreachable {
		n.Retryable = false
		n.Error = "retries disabled (mirror.failed.retry.max.attempts=0): " + msg
		return moved(from, n, SeverityError, n.Error+" (waits for recover)", Halt{})
	}
	if n.Attempt >= cfg.MaxAttempts && cause != CauseSourceUnreachable {
		n.Retryable = false
		n.Error = fmt.Sprintf("retries exhausted after %d attempts: %s", n.Attempt, msg)
		return moved(from, n, SeverityError, n.Error+" (waits for recover)", Halt{})
	}
	n.Attempt++
	delay := backoff.Policy{Initial: cfg.InitialBackoff, Max: cfg.MaxBackoff}.Delay(n.Attempt, jitter)
	n.NextRetry = now.Add(delay)
	return moved(from, n, SeverityError,
		fmt.Sprintf("%s (retry %d of %d in %s)", msg, n.Attempt, cfg.MaxAttempts, delay.Round(time.Millisecond)),
		Halt{}, ScheduleRetry{At: n.NextRetry})
}

func onTick(s Status, ev Tick) (Status, []Action, error) {
	switch s.State {
	case Failed:
		if !s.Retryable || ev.Now.Before(s.NextRetry) {
			return noop(s)
		}
		if s.Cause == CauseSourceUnreachable && ev.SourceUnreachable != "" && s.Desired != DesiredStop && s.Desired != DesiredPause {
			return stillUnreachable(s, ev)
		}
		return retry(s, fmt.Sprintf("retry %d of %d", s.Attempt, s.Config.WithDefaults().MaxAttempts))
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, ULERecovery:
		return noop(s)
	}
	return noop(s)
}

// stillUnreachable keeps a partition FAILED for an unreachable source when
// its retry falls due while the source still does not answer: the attempt
// is counted and the next one scheduled, and the record says so.
func stillUnreachable(s Status, ev Tick) (Status, []Action, error) {
	cfg := s.Config.WithDefaults()
	s.Attempt++
	s.Error = ev.SourceUnreachable
	delay := backoff.Policy{Initial: cfg.InitialBackoff, Max: cfg.MaxBackoff}.Delay(s.Attempt, ev.Jitter)
	s.NextRetry = ev.Now.Add(delay)
	return s, []Action{
		Persist{Status: s},
		Emit{Severity: SeverityWarn, Message: fmt.Sprintf("%s (retry %d in %s)", s.Error, s.Attempt, delay.Round(time.Millisecond))},
		ScheduleRetry{At: s.NextRetry},
	}, nil
}

// onSourceReachable retries a partition FAILED for an unreachable source at
// once.
func onSourceReachable(s Status) (Status, []Action, error) {
	switch s.State {
	case Failed:
		if s.Cause != CauseSourceUnreachable || !s.Retryable {
			return noop(s)
		}
		return retry(s, "the source answers again")
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, ULERecovery:
		return noop(s)
	}
	return noop(s)
}

func onULEDetected(s Status, ev ULEDetected) (Status, []Action, error) {
	switch s.State {
	case LogAlignment, Mirroring:
		if !ev.Enabled {
			msg := "unclean leader election on the source lost mirrored records"
			if ev.Reason != "" {
				msg = ev.Reason
			}
			return fail(s, msg+"; mirror.unclean.leader.election.enable is false", CauseULE, false, time.Time{}, 0)
		}
		return moved(s.State, to(s, ULERecovery), SeverityWarn, "unclean leader election on the source; recovering",
			Halt{}, StartULERecovery{})
	case Unknown, EpochFencing, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery:
		return reject(s, KindULEDetected, "not reading the source")
	}
	return reject(s, KindULEDetected, "unknown state")
}

func onULERecovered(s Status) (Status, []Action, error) {
	switch s.State {
	case ULERecovery:
		return moved(s.State, to(s, LogAlignment), SeverityInfo, "unclean leader election recovery done", StartAlignment{})
	case Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed:
		return reject(s, KindULERecovered, "not recovering")
	}
	return reject(s, KindULERecovered, "unknown state")
}

// onRestored re-enters the persisted state in a new owner. The epoch bump
// makes the previous owner's late writes to __mirror_state recognisably old;
// work is restarted from its safe beginning (alignment, not fetching).
func onRestored(s Status) (Status, []Action, error) {
	const msg = "partition taken over"
	switch s.State {
	case Unknown:
		return noop(s)
	case LogAlignment, EpochFencing, Mirroring:
		return moved(s.State, to(s, LogAlignment), SeverityInfo, msg, StartAlignment{Rebuild: s.Rebuild})
	case Pausing, Paused:
		return moved(s.State, to(s, Paused), SeverityInfo, msg)
	case Stopping:
		return moved(s.State, to(s, Stopping), SeverityWarn, msg, RunStopSequence{})
	case Stopped:
		return moved(s.State, to(s, Stopped), SeverityInfo, msg)
	case Failed:
		if !s.Retryable {
			return moved(s.State, to(s, Failed), SeverityError, msg)
		}
		return moved(s.State, to(s, Failed), SeverityError, msg, ScheduleRetry{At: s.NextRetry})
	case ULERecovery:
		return moved(s.State, to(s, ULERecovery), SeverityWarn, msg, StartULERecovery{})
	}
	return noop(s)
}
