package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// WaitPoll is how often Wait reads __mirror_state.
const WaitPoll = 500 * time.Millisecond

// WaitTimeoutError is a Wait that ran out of time: Pending are the
// partitions not in the wanted state, with the state they are in.
type WaitTimeoutError struct {
	Want    partition.State
	After   time.Duration
	Pending []DescribeRow
}

func (e *WaitTimeoutError) Error() string {
	const shown = 20
	var names []string
	for i, r := range e.Pending {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(e.Pending)-shown))
			break
		}
		names = append(names, fmt.Sprintf("%s/%s/%d (%s, owner %s)", r.Mirror, r.Topic, r.Partition, r.State, ownerText(r)))
	}
	return fmt.Sprintf("timed out after %s: %d partitions not %s: %s", e.After, len(e.Pending), e.Want, strings.Join(names, ", "))
}

func ownerText(r DescribeRow) string {
	switch {
	case r.Owner == "":
		return "none"
	case r.OwnerLive:
		return r.Owner
	}
	return r.Owner + ": " + r.OwnerStatus
}

// Wait polls __mirror_state until every partition of the mirror's topics
// is in state want, then returns them as --describe shows them (with the
// source's offsets where it answers). It fails with *WaitTimeoutError once
// timeout has passed.
//
// Only the first and the last read ask the clusters for offsets: in a
// failover the source may well be down, and each ask then waits for it.
// The partitions are the topics' records, and the source's partitions
// without one (never started by an instance: they are waited for too).
func (a *Admin) Wait(ctx context.Context, mirror string, topics []string, want partition.State, timeout time.Duration) ([]DescribeRow, error) {
	start := a.now()
	rows, err := a.Describe(ctx, mirror)
	if err != nil {
		return nil, err
	}
	rows = slices.DeleteFunc(rows, func(r DescribeRow) bool { return !slices.Contains(topics, r.Topic) })
	deadline := time.NewTimer(max(0, timeout-a.now().Sub(start)))
	defer deadline.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, &WaitTimeoutError{Want: want, After: timeout, Pending: pending(rows, want)}
		case <-poll.C:
		}
		cat, err := a.Catalog(ctx)
		if err != nil {
			return nil, err
		}
		now := a.now()
		for i := range rows {
			r := &rows[i]
			if rec, ok := cat.Partitions[store.PartitionRef{Mirror: mirror, Topic: r.Topic, Partition: r.Partition}]; ok {
				r.State, r.RetryAttempt, r.ErrorMessage = rec.State.String(), rec.Attempt, rec.Error
				r.LastMirrorOffset, r.LastMirrorEpoch = rec.LastOffset, rec.LastEpoch
				*r = r.withOwner(ownerOf(cat, mirror, r.Topic, rec.Owner, now))
			} else {
				*r = r.withOwner(ownerOf(cat, mirror, r.Topic, "", now))
			}
		}
		if len(pending(rows, want)) == 0 {
			break
		}
		poll.Reset(WaitPoll)
	}
	final, err := a.Describe(ctx, mirror)
	if err != nil {
		return nil, err
	}
	final = slices.DeleteFunc(final, func(r DescribeRow) bool { return !slices.Contains(topics, r.Topic) })
	if len(pending(final, want)) > 0 {
		// A partition left the state between the reads (an operator
		// resumed it): report what was waited for.
		return rows, nil
	}
	return final, nil
}

func pending(rows []DescribeRow, want partition.State) []DescribeRow {
	var out []DescribeRow
	for _, r := range rows {
		if r.State != want.String() {
			out = append(out, r)
		}
	}
	return out
}
