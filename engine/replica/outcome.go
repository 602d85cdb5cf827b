package replica

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// What an append's outcome calls for: the runner resends, realigns, fails
// or goes on after each Append's answer (Append.Wait) by what FailureOf
// says of its error.

// Failure is what a failed append calls for.
type Failure int

const (
	// FailUnknown: the broker may have applied the batch (a timeout, a
	// lost answer, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a leader that moved
	// while followers were copying it). Resend the same bytes.
	FailUnknown Failure = iota
	// FailWriter: the broker no longer accepts this writer's sequence
	// (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER, ...); only a new
	// writer epoch, after alignment, can go on.
	FailWriter
	// FailFenced: another writer holds a newer epoch.
	FailFenced
	// FailFatal: the batch is refused for good (INVALID_RECORD, a
	// missing authorization...).
	FailFatal
)

func (f Failure) String() string {
	switch f {
	case FailUnknown:
		return "outcome unknown"
	case FailWriter:
		return "writer must change"
	case FailFenced:
		return "fenced"
	case FailFatal:
		return "fatal"
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// FailureOf classifies the error of one append. The writer's own
// errors come first: some of them (OUT_OF_ORDER_SEQUENCE_NUMBER on older
// brokers) would otherwise pass for retriable.
func FailureOf(err error) Failure {
	switch {
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced):
		return FailFenced
	case errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
		errors.Is(err, kerr.DuplicateSequenceNumber), errors.Is(err, kerr.InvalidProducerIDMapping):
		// DUPLICATE_SEQUENCE_NUMBER on a resend whose offset the answer
		// confirms is taken as landed before classifying (the runner's
		// completeOnce).
		return FailWriter
	case Retriable(err):
		return FailUnknown
	}
	return FailFatal
}

// Retriable reports errors after which the same request may succeed once
// metadata is refreshed or the broker recovers.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch) ||
			errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicID)
	}
	// Anything that is not a Kafka error code is a connection or client
	// error: retry it.
	return !errors.Is(err, context.Canceled)
}

// NextSequence is the producer sequence count records after seq, which
// wraps to 0 past math.MaxInt32 as Kafka's does.
func NextSequence(seq, count int32) int32 {
	if int64(seq)+int64(count) > math.MaxInt32 {
		return int32(int64(seq) + int64(count) - math.MaxInt32 - 1)
	}
	return seq + count
}
