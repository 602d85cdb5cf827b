package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/internal/backoff"
)

// AppendRetries bounds the resends of an append whose outcome is unknown,
// and appendRetryMax caps the wait before each: with the default 100ms
// first wait they span about five seconds, enough to ride out a leader
// election, before the partition falls back to alignment.
const (
	AppendRetries  = 6
	appendRetryMax = 2 * time.Second
)

var (
	// errUnknownOutcome marks an append the broker may have applied
	// without saying so; it always comes with errRealign, which is what
	// is left once the resends are exhausted.
	errUnknownOutcome = errors.New("outcome unknown")
	errNotSent        = errors.New("not sent: no connection to the destination leader")
)

// complete waits for one issued batch and checks where it landed.
//
// An append whose outcome is unknown is resent with the same bytes, so the
// same producer id, epoch and sequence, together with every later batch of
// the partition in flight, in order: the broker deduplicates what it
// already holds and answers with the offset it gave it then. Reading the
// destination log end instead would not do: a batch that the leader
// appended but its followers have not yet copied lies above the high
// watermark, where ListOffsets does not show it, and an append at the end
// it shows would land after it, a second time.
//
// When the resends run out, the destination leader's producer state says
// whether the batch landed (askLanded): one that did is taken and the
// partition goes on. Only when it cannot tell, or the batch did not land,
// or the writer itself must change, does the partition go to alignment
// (errRealign), which bumps the writer epoch so that a batch still
// travelling under the old one is fenced. What makes that safe is the
// alignment's verification, not the log end it reads: every destination
// batch above the last checkpoint must match the source's and carry
// kmirror's writer identity; and a batch that was in the log but hidden
// above the high watermark turns the next append's answer into an
// OffsetMismatchError, never a silent duplicate.
func (r *Runner) complete(ctx context.Context, f *inflight) error {
	return r.completeWith(ctx, f, AppendRetries)
}

// completeWith is complete with at most retries resends, or without limit
// (resendUntilKnown: a stop's drain, drainUntilKnown).
func (r *Runner) completeWith(ctx context.Context, f *inflight, retries int) error {
	err := r.completeOnce(ctx, *f, false)
	for attempt := 1; errors.Is(err, errUnknownOutcome) && (retries == resendUntilKnown || attempt <= retries); attempt++ {
		if err = r.resend(ctx, f, attempt, retries, err); err == nil {
			if err = r.completeOnce(ctx, *f, true); err == nil {
				r.stats.clearError()
			}
		}
	}
	if errors.Is(err, errUnknownOutcome) && ctx.Err() == nil {
		err = r.askLanded(ctx, *f, err)
	}
	if cutShort(ctx, err) {
		return err // not failed: the batch stays to be settled (completeHeld)
	}
	return r.appendFailed(ctx, *f, err)
}

// completeHeld is complete for the oldest in-flight batch, taken off the
// pipeline by work that an operator event or the engine's end may cut
// short. Cut short, the batch goes back to the front as it is then (sent
// again or not), so whoever settles the pipeline next (the stop's drain,
// an alignment) learns where it landed: dropped, a batch that landed
// last would be left out of the last mirrored offset the stop records,
// and a failback would take the destination's copy of it for a foreign
// write.
func (r *Runner) completeHeld(ctx context.Context, f inflight) error {
	err := r.complete(ctx, &f)
	if cutShort(ctx, err) {
		r.unpop(f)
	}
	return err
}

// cutShort reports whether err is ctx's end, not the batch's outcome.
func cutShort(ctx context.Context, err error) bool { return err != nil && ctx.Err() != nil }

// unpop puts f back first in the pipeline, undoing popInflight.
func (r *Runner) unpop(f inflight) { r.inflight = slices.Insert(r.inflight, 0, f) }

// settle is complete without resends: it learns where the batch landed,
// if it did, before an alignment reads the log end anyway.
func (r *Runner) settle(ctx context.Context, f inflight) error {
	err := r.completeOnce(ctx, f, false)
	if cutShort(ctx, err) {
		return err
	}
	return r.appendFailed(ctx, f, err)
}

// appendFailed tells the transaction mapper of a mirrored transaction's
// batch that did not land; it re-reads the transaction's state.
func (r *Runner) appendFailed(ctx context.Context, f inflight, err error) error {
	if err != nil && f.txn != nil && r.txm != nil {
		if terr := r.txm.ProduceFailed(ctx, *f.txn, err); terr != nil {
			return r.txnError(terr)
		}
	}
	return err
}

// resend sends f and every batch in flight behind it again, in order, to
// the destination leader as the metadata names it now, after a backoff. A
// batch that cannot be sent leaves those behind it unsent too, so the
// broker never sees a sequence ahead of a missing one.
func (r *Runner) resend(ctx context.Context, f *inflight, attempt, retries int, cause error) error {
	r.stats.setError(cause.Error(), true)
	of := fmt.Sprintf("of %d", retries)
	if retries == resendUntilKnown {
		of = "until its outcome is known: the stop records where it landed"
	}
	r.emit(partition.SeverityWarn, fmt.Sprintf("resending %d batches from offset %d unchanged (attempt %d %s): %v", 1+len(r.inflight), f.base, attempt, of, cause))
	at := r.deps.Now()
	p := backoff.Policy{Initial: r.deps.RetryInitial, Max: min(r.deps.RetryMax, appendRetryMax)}
	if !r.wait(ctx, p.Delay(attempt, r.deps.Jitter())) {
		return ctx.Err()
	}
	rt, err := r.deps.Dest.Route(ctx, r.topic, r.partition, at)
	if err != nil {
		r.unsend(0)
		f.call = nil
		return r.unknownOutcome(f.base, err)
	}
	if rt.TopicID != r.dst.TopicID {
		// The destination topic was recreated: the batches belong to
		// the old one. Alignment finds out what the new one holds.
		return fmt.Errorf("%w: append %s/%d at %d: destination topic id changed while the outcome was unknown: %w", errRealign, r.topic, r.partition, f.base, cause)
	}
	r.dst = rt
	r.sendGen++ // what the sink still holds of the partition is stale
	if err := r.sendBatch(ctx, f); err != nil {
		r.unsend(0)
		return nil // completeOnce reports f unsent, and the next attempt resends
	}
	for i := range r.inflight {
		if err := r.sendBatch(ctx, &r.inflight[i]); err != nil {
			r.unsend(i + 1)
			break
		}
	}
	return nil
}

// unsend marks the in-flight batches from index i on as not sent; the
// answers to their earlier sends, if any come, are not looked at.
func (r *Runner) unsend(i int) {
	for ; i < len(r.inflight); i++ {
		r.inflight[i].call = nil
	}
}
