package engine

import (
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
