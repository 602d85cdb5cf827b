package engine

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
		want appendFailure
	}{
		// Maybe applied: resend with the same producer id, epoch and
		// sequence.
		{kerr.RequestTimedOut, failUnknown},
		{kerr.NotEnoughReplicasAfterAppend, failUnknown},
		{kerr.NotEnoughReplicas, failUnknown},
		{kerr.NotLeaderForPartition, failUnknown},
		{kerr.FencedLeaderEpoch, failUnknown},
		{kerr.UnknownLeaderEpoch, failUnknown},
		{kerr.UnknownTopicOrPartition, failUnknown},
		{kerr.UnknownTopicID, failUnknown},
		{kerr.NetworkException, failUnknown},
		{kerr.CorruptMessage, failUnknown},
		{kerr.KafkaStorageError, failUnknown},
		{fmt.Errorf("wait for Produce: %w", wire.ErrConnClosed), failUnknown},
		{io.ErrUnexpectedEOF, failUnknown},
		{context.DeadlineExceeded, failUnknown},
		{fmt.Errorf("append: %w: detail", kerr.RequestTimedOut), failUnknown},

		// The writer must change: only a realignment with a new epoch
		// goes on.
		{kerr.OutOfOrderSequenceNumber, failWriter},
		{kerr.UnknownProducerID, failWriter},
		{kerr.DuplicateSequenceNumber, failWriter},
		{kerr.InvalidProducerIDMapping, failWriter},
		{fmt.Errorf("append: %w: detail", kerr.OutOfOrderSequenceNumber), failWriter},

		// Another writer holds a newer epoch.
		{kerr.InvalidProducerEpoch, failFenced},
		{kerr.ProducerFenced, failFenced},

		// Refused for good.
		{kerr.InvalidRecord, failFatal},
		{kerr.MessageTooLarge, failFatal},
		{kerr.TopicAuthorizationFailed, failFatal},
		{kerr.InvalidTxnState, failFatal},
		{context.Canceled, failFatal},
	} {
		if got := appendFailureOf(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}
