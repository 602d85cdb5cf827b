package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/internal/backoff"
)

// maxRealigns bounds the realignments MIRRORING tries on its own (after a
// leader move, a timeout, a lost connection) before the partition is FAILED
// and retried with the state machine's slower backoff.
const maxRealigns = 6

// run drives the partition through the state machine until ctx ends: each
// event goes through partition.Step, whose actions are persisted, announced
// and executed here, one at a time. While the partition has nothing to do
// (idle while MIRRORING, or waiting for a command) the runner parks: its
// goroutine ends, and the next thing handed to it starts another one that
// goes on from where this one stopped (park.go). The runner's state is in
// its fields, never on a goroutine's stack.
func (r *Runner) run(ctx context.Context, initial ...partition.Event) {
	r.begin(ctx, initial)
	r.loop(ctx)
}

// loop runs the runner until it parks or exits.
func (r *Runner) loop(ctx context.Context) {
	for ctx.Err() == nil {
		if work := r.work; work != nil {
			var ev partition.Event
			if _, ok := work.(partition.StartFetching); ok {
				r.deps.Starter.started(r) // aligned and fenced: started
				ev = r.doFetching(ctx)
			} else {
				ev = r.do(ctx, work)
			}
			if ev != nil {
				if r.work == work {
					r.work = nil
				}
				r.step(ctx, ev)
			}
		} else {
			r.waitEvent(ctx)
		}
		if r.parking {
			r.parking = false
			if ctx.Err() == nil && r.park() {
				return
			}
		}
	}
	r.exit()
	r.deps.Events.PartitionGone(r.topic, r.partition)
}

// begin publishes the initial status and steps the initial events.
func (r *Runner) begin(ctx context.Context, initial []partition.Event) {
	r.stats.SetStatus(r.st)
	for _, ev := range initial {
		r.step(ctx, ev)
	}
}

// exitDrainTimeout bounds how long a stopping runner waits for the answers
// to its batches in flight.
const exitDrainTimeout = 5 * time.Second

// exit is the end of run.
func (r *Runner) exit() {
	// A closing engine still learns where its last batches landed, but a
	// destination that stopped answering must not hold Close for the
	// connections' whole response timeout: the next start realigns from
	// the destination log end anyway.
	ctx, cancel := context.WithTimeout(context.Background(), exitDrainTimeout)
	_ = r.drain(ctx)
	cancel()
	r.finalCheckpoint()
	if r.rare != nil && r.rare.retry != nil {
		r.rare.retry.Stop()
	}
	r.markExited()
	r.deps.Starter.started(r)
	r.tc.Running.Done()
	r.deps.Exited()
}

// waitEvent steps an operator event, a failure or a due retry while no
// work is in progress; with none waiting the runner parks (the end of ctx
// and the retry's timer hand it a wake too).
func (r *Runner) waitEvent(ctx context.Context) {
	if r.stepInbox(ctx) {
		return
	}
	if r.rare != nil && r.rare.retry != nil && r.takeRetryDue() {
		r.rare.retry = nil
		tick := partition.Tick{Now: r.deps.Now(), Jitter: r.deps.Jitter()}
		if down := r.deps.Source.Down(); down != nil {
			tick.SourceUnreachable = down.Error()
		}
		r.step(ctx, tick)
		return
	}
	r.parking = true
}

// stepInbox steps an operator event, or else a failure found outside the
// runner, if one waits.
func (r *Runner) stepInbox(ctx context.Context) bool {
	if r.takeCheckpoint() {
		r.checkpoint()
	}
	if r.stepPending(ctx) {
		return true
	}
	if err := r.takeFault(); err != nil {
		r.step(ctx, r.errorEvent(r.st.StateEpoch, err))
		return true
	}
	return false
}

// step applies one event and runs the actions it produces, in order.
func (r *Runner) step(ctx context.Context, ev partition.Event) {
	next, acts, err := partition.Apply(r.st, ev)
	if err != nil {
		if !errors.Is(err, partition.ErrStale) && isCommand(ev) {
			r.emit(partition.SeverityWarn, err.Error())
		}
		return
	}
	prev := r.st.State
	r.st = next
	r.stats.SetStatus(r.st)
	if next.State == partition.Failed && prev != partition.Failed {
		r.deps.Events.Failed(next.Cause)
	}
	if next.State == partition.Paused && prev != partition.Paused {
		r.warnPausedTxns(ctx)
	}
	for _, a := range acts {
		switch a := a.(type) {
		case partition.Persist:
			r.persistStatus(ctx, a.Status)
		case partition.Emit:
			r.deps.Events.EmitState(a.Severity, r.topic, r.partition, prev, next.State, a.Message)
		case partition.ScheduleRetry:
			r.scheduleRetry(max(0, a.At.Sub(r.deps.Now())))
		case partition.Halt:
			r.dropFetch()
			_ = r.drain(ctx)
			r.work = nil
		case partition.StartAlignment, partition.StartFencing, partition.StartFetching,
			partition.RemoveFetcher, partition.RunStopSequence, partition.StartULERecovery, partition.Rebuild:
			r.work = a
		}
	}
}

func isCommand(ev partition.Event) bool {
	switch ev.(type) {
	case partition.Start, partition.Pause, partition.Resume, partition.Stop, partition.Recover:
		return true
	}
	return false
}

// do runs one work action other than MIRRORING (see doFetching) and
// returns its result event, or nil when an operator event interrupted it
// (the event has then been stepped; if it was rejected the same work runs
// again).
func (r *Runner) do(ctx context.Context, work partition.Action) partition.Event {
	epoch := r.st.StateEpoch
	wctx, cancel := r.startWork(ctx)
	defer r.endWork(cancel)
	if r.stepPending(ctx) { // an event that arrived before the work started
		return nil
	}
	result, err := r.perform(ctx, wctx, work, epoch)
	return r.workDone(ctx, wctx.Err() != nil, epoch, result, err)
}

// doFetching is do for MIRRORING, which lasts as long as the partition is
// healthy: its frame, on the stack all that time, is kept small. MIRRORING
// holds no work context while it waits: each piece of its work takes one
// (interruptible), so an idle partition keeps none.
func (r *Runner) doFetching(ctx context.Context) partition.Event {
	epoch := r.st.StateEpoch
	if r.stepPending(ctx) { // an event that arrived before the work started
		return nil
	}
	err := r.fetching(ctx)
	if errors.Is(err, errParked) {
		return nil // MIRRORING goes on when the runner is woken
	}
	return r.fetchingDone(ctx, errors.Is(err, errInterrupted), epoch, err)
}

// errInterrupted ends MIRRORING's work for an operator event.
var errInterrupted = errors.New("interrupted by an operator event")

// interruptible runs one piece of MIRRORING's work with a context that an
// operator event cancels, and returns errInterrupted when one did.
func (r *Runner) interruptible(ctx context.Context, work func(context.Context) error) error {
	wctx, cancel := r.startWork(ctx)
	err := work(wctx)
	interrupted := wctx.Err() != nil && ctx.Err() == nil
	r.endWork(cancel)
	if interrupted {
		return errInterrupted
	}
	return err
}

// fetchingDone is workDone for MIRRORING.
func (r *Runner) fetchingDone(ctx context.Context, interrupted bool, epoch int64, err error) partition.Event {
	if errors.Is(err, ErrULE) {
		return r.workDone(ctx, interrupted, epoch, r.uleDetected(epoch, err), nil)
	}
	return r.workDone(ctx, interrupted, epoch, nil, err)
}

// stepPending steps an operator event that is waiting, if any.
func (r *Runner) stepPending(ctx context.Context) bool {
	ev, ok := r.takeEvent()
	if ok {
		r.step(ctx, ev)
	}
	return ok
}

// uleDetected is the event of a source unclean election found by work.
func (r *Runner) uleDetected(epoch int64, err error) partition.Event {
	return partition.ULEDetected{Epoch: epoch, Enabled: r.deps.UncleanRecovery, Reason: err.Error()}
}

// perform runs a work action other than MIRRORING (doFetching runs that
// one).
func (r *Runner) perform(ctx, wctx context.Context, work partition.Action, epoch int64) (partition.Event, error) {
	var err error
	var result partition.Event
	switch work.(type) {
	case partition.StartAlignment:
		mode := partition.AlignResume
		// A rebuild recorded and not finished is finished first, by
		// whichever partition of the topic aligns: the record is the
		// operator's approval, and its topic may be half-way (deleted,
		// not recreated).
		if err = r.resumeRebuild(wctx); err != nil {
			break
		}
		if err = r.align(wctx); err == nil {
			if r.fillTo > r.pos || r.deleteTo > r.pos {
				mode = partition.AlignFresh
			}
			result = partition.Aligned{Epoch: epoch, Mode: mode}
		} else if errors.Is(err, ErrULE) {
			result, err = r.uleDetected(epoch, err), nil
		} else if errors.Is(err, ErrTxnAborted) {
			// A divergence with its own cause: FAILED saying so, or a
			// rebuild when the operator allowed one.
			result, err = partition.AlignmentDiverged{Epoch: epoch, Reason: err.Error(), Cause: partition.CauseTxnAborted}, nil
		} else if errors.Is(err, ErrDiverged) {
			// The state machine decides: FAILED, or a rebuild when the
			// operator allowed one.
			result, err = partition.AlignmentDiverged{Epoch: epoch, Reason: err.Error()}, nil
		}
	case partition.StartFencing:
		if err = r.fence(wctx); err == nil {
			result = partition.Fenced{Epoch: epoch, WriterID: r.writer.ProducerID, WriterEpoch: r.writer.ProducerEpoch}
		}
	case partition.RemoveFetcher:
		r.dropFetch()
		if err = r.drain(ctx); err == nil {
			result = partition.FetcherRemoved{Epoch: epoch}
		}
	case partition.RunStopSequence:
		if err = r.stop(ctx); err == nil {
			result = partition.StopCompleted{Epoch: epoch}
		}
	case partition.Rebuild:
		if err = r.rebuild(wctx); err == nil {
			result = partition.Aligned{Epoch: epoch, Mode: partition.AlignFresh}
		}
	case partition.StartULERecovery:
		if err = r.rebuild(wctx); err == nil {
			result = partition.ULERecovered{Epoch: epoch}
		}
	}
	return result, err
}

// workDone decides what do returns once its work has ended.
func (r *Runner) workDone(ctx context.Context, interrupted bool, epoch int64, result partition.Event, err error) partition.Event {
	if ctx.Err() != nil {
		return nil
	}
	if interrupted { // by an operator event, or a failure found outside
		if !r.stepPending(ctx) {
			if err := r.takeFault(); err != nil {
				return r.errorEvent(epoch, err)
			}
		}
		return nil
	}
	if err != nil {
		return r.errorEvent(epoch, err)
	}
	return result
}

// fetching is MIRRORING. Transient trouble (leader moved, timeout, lost
// connection, sequence error) is handled here by realigning from the
// destination's log end, without leaving the state; only repeated failure
// or a real fault ends it.
func (r *Runner) fetching(ctx context.Context) error {
	for {
		// A failure injected while the last piece of work was
		// interrupted for it: before anything can block again.
		if err := r.takeFault(); err != nil {
			return err
		}
		err := r.interruptible(ctx, r.startMirroring)
		for err == nil {
			err = r.mirrorNext(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errRealign) {
			return err
		}
		if err := r.interruptible(ctx, func(wctx context.Context) error { return r.realign(wctx, err) }); err != nil {
			return err
		}
	}
}

// realign goes back to the destination's log end after err, with backoff,
// until alignment and fencing succeed or the attempts run out.
func (r *Runner) realign(ctx context.Context, err error) error {
	for {
		// The batches behind the one that failed were resent with it
		// as often as it was: settled, not resent again.
		if derr := r.settleAll(ctx); derr != nil && !errors.Is(derr, errRealign) {
			return derr
		}
		r.dropFetch()
		r.attempt++
		if r.attempt > maxRealigns {
			return err
		}
		r.retrying("realigning: " + err.Error())
		cause, _, _ := r.classify(err)
		r.deps.Events.Realigned(cause)
		r.emit(partition.SeverityWarn, fmt.Sprintf("realigning (attempt %d of %d): %v", r.attempt, maxRealigns, err))
		if !r.wait(ctx, r.backoff()) {
			return ctx.Err()
		}
		// After an append whose outcome stayed unknown, the log end
		// that align reads may be below the true one: a batch can be
		// in the log above the high watermark. Appending there is
		// still safe: the answer's base offset is checked, so a batch
		// that was in fact there turns the next append into an
		// OffsetMismatchError (FAILED, with the offsets), never a
		// silent duplicate; and align verifies what lies above the
		// last checkpoint.
		if err = r.align(ctx); err == nil {
			err = r.fence(ctx)
		}
		if err == nil {
			return nil
		}
		if !isTransient(err) {
			return err
		}
	}
}

// isTransient reports errors a realignment may cure.
func isTransient(err error) bool {
	var om *OffsetMismatchError
	var pe *PartitionError
	var mm *MismatchError
	if errors.As(err, &om) || errors.As(err, &pe) || errors.As(err, &mm) {
		return false
	}
	return errors.Is(err, errRealign) || Retriable(err)
}

// errorEvent classifies a failure for the state machine.
func (r *Runner) errorEvent(epoch int64, err error) partition.Event {
	cause, retryable, err := r.classify(err)
	return partition.Error{Epoch: epoch, Err: err.Error(), Retryable: retryable, Cause: cause, Now: r.deps.Now(), Jitter: r.deps.Jitter()}
}

// classify finds an error's cause and whether it is retryable; during a
// source outage the error is returned wrapped in the outage's.
func (r *Runner) classify(err error) (partition.Cause, bool, error) {
	cause, retryable := partition.CauseOther, true
	var om *OffsetMismatchError
	var pe *PartitionError
	switch {
	case errors.Is(err, ErrTxnAborted): // also a divergence: its own cause first
		cause, retryable = partition.CauseTxnAborted, false
	case errors.Is(err, ErrForeignWrite):
		cause, retryable = partition.CauseForeignWrite, false
	case errors.Is(err, ErrDiverged):
		cause, retryable = partition.CauseDiverged, false
	case errors.Is(err, ErrGap):
		cause, retryable = partition.CauseGap, false
	case errors.Is(err, ErrBadSourceBatch):
		cause = partition.CauseBadSourceBatch
		if errors.As(err, &pe) {
			retryable = pe.Retryable
		}
	case errors.Is(err, ErrSourceClusterChanged):
		cause, retryable = partition.CauseSourceClusterChanged, false
	case errors.Is(err, ErrSourceTopicDeleted):
		cause, retryable = partition.CauseSourceTopicDeleted, false
	case errors.Is(err, ErrSourceTopicRecreated):
		cause, retryable = partition.CauseSourceTopicRecreated, false
	case errors.As(err, &om):
		cause, retryable = partition.CauseOffsetMismatch, false
	case errors.Is(err, ErrSourceUnreachable):
		cause = partition.CauseSourceUnreachable
	case (isTransient(err) || errors.As(err, &pe) && pe.Retryable) && r.deps.Source.Down() != nil:
		// Whatever failed, the source does not answer: say so, and keep
		// retrying for as long as the outage lasts.
		cause = partition.CauseSourceUnreachable
		err = fmt.Errorf("%w (%w)", r.deps.Source.Down(), err)
	case errors.As(err, &pe):
		retryable = pe.Retryable
	case isTransient(err):
		cause = partition.CauseTransient
	}
	return cause, retryable, err
}

// persistStatus writes the partition's record before any action of the
// transition runs. A destination that cannot take the write is retried:
// acting on a state nobody can read back would let two owners disagree.
func (r *Runner) persistStatus(ctx context.Context, st partition.Status) {
	if r.persist == nil {
		return
	}
	rec := r.record(st)
	b := backoff.Backoff{Policy: persistPolicy}
	for {
		// A record written by an instance the group replaced would
		// contradict the new owner's.
		if r.deps.Gate.Wait(ctx) != nil {
			return
		}
		err := r.persist.put(ctx, rec)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.stats.setError("persist state: "+err.Error(), true)
		if !r.wait(ctx, b.Next(r.deps.Jitter)) {
			return
		}
	}
}

// record builds the partition's __mirror_state value from its status and
// its durable position.
func (r *Runner) record(st partition.Status) store.PartitionRecord {
	rec := store.NewPartitionRecord(r.deps.Mirror, r.topic, r.partition)
	rec.SetStatus(st)
	rec.LastOffset, rec.LastEpoch = r.mirrored, r.mirroredEpoch
	for _, l := range r.stats.checkpointing(r.mirrored) {
		rec.Lineage = append(rec.Lineage, store.EpochStart{Epoch: l.Epoch, Start: l.StartOffset})
	}
	if r.writer.ProducerID != 0 {
		rec.WriterID, rec.WriterEpoch = r.writer.ProducerID, r.writer.ProducerEpoch
	}
	for _, p := range r.openTxnProducers() {
		rec.Txns = append(rec.Txns, store.TxnProducer{SourcePID: p.SourcePID, TxnID: p.TxnID, PID: p.PID, Epoch: p.Epoch, NextSeq: p.NextSeq, Open: p.Open, FirstOffset: p.FirstOffset})
	}
	if r.rare != nil {
		rec.StopAborted = slices.Clone(r.rare.stopAborted)
	}
	rec.SourceTopicID = TopicIDString(r.deps.Source.TopicID(r.topic))
	rec.DestTopicID = TopicIDString(r.dst.TopicID)
	rec.Owner = r.deps.Instance
	rec.UpdatedAt = r.deps.Now()
	return rec
}

// backoff is the delay before a retry inside MIRRORING: the mirror's retry
// policy, with the engine's jitter. r.attempt is already counted, and the
// first retry waits up to twice RetryInitial, as it always has.
func (r *Runner) backoff() time.Duration {
	p := backoff.Policy{Initial: r.deps.RetryInitial, Max: r.deps.RetryMax}
	return p.Delay(int(r.attempt)+1, r.deps.Jitter())
}

// persistPolicy spaces the attempts to write the partition's record while
// __mirror_state does not take it: its ceilings are twice the fixed waits
// it replaced (100ms doubling up to 5s), so a wait is as long on average.
var persistPolicy = backoff.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second}

// emit tells an event about this partition.
func (r *Runner) emit(level partition.Severity, msg string) {
	r.deps.Events.Emit(level, r.topic, r.partition, msg)
}

// wait waits d or until ctx ends; it reports whether ctx is still live.
func (r *Runner) wait(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) == nil }
