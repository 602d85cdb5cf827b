package replica

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/engine/wire"
)

// TestAppendFailureOf: which append errors are resent with the same bytes
// (the broker may have applied the batch), which need a new writer epoch,
// which mean another writer took over, and which are final.
func TestAppendFailureOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Failure
	}{
		// Maybe applied: resend with the same producer id, epoch and
		// sequence.
		{kerr.RequestTimedOut, FailUnknown},
		{kerr.NotEnoughReplicasAfterAppend, FailUnknown},
		{kerr.NotEnoughReplicas, FailUnknown},
		{kerr.NotLeaderForPartition, FailUnknown},
		{kerr.FencedLeaderEpoch, FailUnknown},
		{kerr.UnknownLeaderEpoch, FailUnknown},
		{kerr.UnknownTopicOrPartition, FailUnknown},
		{kerr.UnknownTopicID, FailUnknown},
		{kerr.NetworkException, FailUnknown},
		{kerr.CorruptMessage, FailUnknown},
		{kerr.KafkaStorageError, FailUnknown},
		{fmt.Errorf("wait for Produce: %w", wire.ErrConnClosed), FailUnknown},
		{io.ErrUnexpectedEOF, FailUnknown},
		{context.DeadlineExceeded, FailUnknown},
		{fmt.Errorf("append: %w: detail", kerr.RequestTimedOut), FailUnknown},

		// The writer must change: only a realignment with a new epoch
		// goes on.
		{kerr.OutOfOrderSequenceNumber, FailWriter},
		{kerr.UnknownProducerID, FailWriter},
		{kerr.DuplicateSequenceNumber, FailWriter},
		{kerr.InvalidProducerIDMapping, FailWriter},
		{fmt.Errorf("append: %w: detail", kerr.OutOfOrderSequenceNumber), FailWriter},

		// Another writer holds a newer epoch.
		{kerr.InvalidProducerEpoch, FailFenced},
		{kerr.ProducerFenced, FailFenced},

		// Refused for good.
		{kerr.InvalidRecord, FailFatal},
		{kerr.MessageTooLarge, FailFatal},
		{kerr.TopicAuthorizationFailed, FailFatal},
		{kerr.InvalidTxnState, FailFatal},
		{context.Canceled, FailFatal},
	} {
		if got := FailureOf(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}
