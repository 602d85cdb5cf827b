package engine

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/engine/replica"
)

// The errors of a mirrored partition are engine/replica's, where the
// runner that returns them lives; these names keep them the engine's API.
var (
	ErrForeignWrite         = replica.ErrForeignWrite
	ErrDiverged             = replica.ErrDiverged
	ErrGap                  = replica.ErrGap
	ErrBadSourceBatch       = replica.ErrBadSourceBatch
	ErrFenced               = replica.ErrFenced
	ErrUnsupported          = replica.ErrUnsupported
	ErrSourceClusterChanged = replica.ErrSourceClusterChanged
	ErrSourceTopicDeleted   = replica.ErrSourceTopicDeleted
	ErrTxnAborted           = replica.ErrTxnAborted
	ErrULE                  = replica.ErrULE
	ErrDestinationLost      = replica.ErrDestinationLost
)

type (
	// PartitionError is replica.PartitionError.
	PartitionError = replica.PartitionError
	// OffsetMismatchError is replica.OffsetMismatchError.
	OffsetMismatchError = replica.OffsetMismatchError
	// ULEError is replica.ULEError.
	ULEError = replica.ULEError
	// MismatchError is replica.MismatchError.
	MismatchError = replica.MismatchError
	// TxnAbortedError is replica.TxnAbortedError.
	TxnAbortedError = replica.TxnAbortedError
)

// errRealign asks the runner to re-read the destination and start again.
var errRealign = errors.New("realign")

// failure is err as a failure of the runner's partition that waits for an
// operator's recover.
func (r *runner) failure(err error) error {
	return &PartitionError{Topic: r.topic, Partition: r.partition, Err: err}
}

// failuref is failure(fmt.Errorf(format, args...)).
func (r *runner) failuref(format string, args ...any) error {
	return r.failure(fmt.Errorf(format, args...))
}

// mismatch reports a batch of the runner's partition at actual on the
// destination where the source has it at expected; cause is ErrForeignWrite
// or ErrDiverged.
func (r *runner) mismatch(expected, actual int64, cause error) error {
	return &OffsetMismatchError{Topic: r.topic, Partition: r.partition, Expected: expected, Actual: actual, Cause: cause}
}
