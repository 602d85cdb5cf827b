package txn

import (
	"errors"
	"fmt"
)

// Sentinels to branch on with errors.Is.
var (
	// ErrNotTransactional: Writer was given a batch that is not a
	// transactional data batch (plain batches use the partition's own writer).
	ErrNotTransactional = errors.New("not a transactional data batch")
	// ErrNotControl: End was given a batch that is not a control batch.
	ErrNotControl = errors.New("not a control batch")
	// ErrBadControl: a control batch does not hold one readable commit or
	// abort record.
	ErrBadControl = errors.New("malformed control batch")
	// ErrLoneMarker: the source holds a marker for a transaction that has no
	// open mirrored transaction on the destination, and the destination cannot
	// open an empty one (it only adds partitions implicitly, on a write).
	ErrLoneMarker = errors.New("transaction marker without a mirrored transaction")
	// ErrUnsupported: the destination cannot run the transactions kmirror
	// needs (no AddPartitionsToTxn client form and no implicit add).
	ErrUnsupported = errors.New("destination does not support mirrored transactions")
	// ErrAbortedByCoordinator is what *AbortedByCoordinatorError matches.
	ErrAbortedByCoordinator = errors.New("mirrored transaction aborted by the destination coordinator")
	// ErrMarkerMisplaced is what *MarkerError matches.
	ErrMarkerMisplaced = errors.New("transaction marker misplaced on destination")
)

// MarkerError reports a transaction marker that did not, or would not, land
// at the source marker's offset: the destination log end was not what the
// offset-identity invariant requires. Before EndTxn (Sent false) the log end
// must equal the marker offset; after it (Sent true) it must become the marker
// offset plus one. Something else wrote to the destination partition (a
// foreign producer, a zombie kmirror), or the caller had appends in flight.
type MarkerError struct {
	Topic     string
	Partition int32
	TxnID     string
	Expected  int64 // destination log end required
	Actual    int64 // destination log end observed
	Sent      bool  // whether EndTxn had been sent when the mismatch was seen
}

func (e *MarkerError) Error() string {
	when := "before EndTxn"
	if e.Sent {
		when = "after EndTxn"
	}
	return fmt.Sprintf("%v: %s/%d transaction %s: destination log end %d %s, expected %d",
		ErrMarkerMisplaced, e.Topic, e.Partition, e.TxnID, e.Actual, when, e.Expected)
}

func (e *MarkerError) Unwrap() error { return ErrMarkerMisplaced }

// AbortedByCoordinatorError reports a mirrored transaction that the
// destination's transaction coordinator ended on its own, nearly always
// because it outlived the transaction timeout (the engine was down or paused
// longer than transaction.max.timeout.ms). The coordinator wrote an abort
// marker the source does not have, so the destination no longer lines up with
// the source: the partition must fail and be rebuilt or realigned by an
// operator. MarkerOffset is where that marker landed when it could be found
// (-1 otherwise).
type AbortedByCoordinatorError struct {
	Topic        string
	Partition    int32
	TxnID        string
	SourcePID    int64
	MarkerOffset int64
	Cause        error // what revealed it (a broker error or the coordinator's state)
}

func (e *AbortedByCoordinatorError) Error() string {
	at := "at an unknown offset"
	if e.MarkerOffset >= 0 {
		at = fmt.Sprintf("at offset %d", e.MarkerOffset)
	}
	return fmt.Sprintf("%v: %s/%d transaction %s (source producer %d) was aborted %s, which the source does not have: %v",
		ErrAbortedByCoordinator, e.Topic, e.Partition, e.TxnID, e.SourcePID, at, e.Cause)
}

func (e *AbortedByCoordinatorError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrAbortedByCoordinator}
	}
	return []error{ErrAbortedByCoordinator, e.Cause}
}
