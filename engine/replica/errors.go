package replica

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels to branch on with errors.Is.
var (
	// ErrForeignWrite: the destination partition holds records kmirror did not write.
	ErrForeignWrite = errors.New("foreign write on destination")
	// ErrDiverged: the destination log does not line up with the source log.
	ErrDiverged = errors.New("destination diverged from source")
	// ErrGap: a source batch cannot be copied at identical offsets by a client.
	ErrGap = errors.New("gap in source log")
	// ErrBadSourceBatch: a fetched batch is corrupt; it is never appended.
	ErrBadSourceBatch = errors.New("corrupt source batch")
	// ErrFenced: another writer took over the destination partition.
	ErrFenced = errors.New("fenced by a newer writer")
	// ErrUnsupported: the source holds data this engine cannot yet copy at identical offsets.
	ErrUnsupported = errors.New("unsupported source data")
	// ErrSourceClusterChanged: the mirror's bootstrap reaches another cluster than at create.
	ErrSourceClusterChanged = errors.New("source cluster changed")
	// ErrSourceTopicDeleted: the source topic is gone.
	ErrSourceTopicDeleted = errors.New("source topic deleted")
	// ErrTxnAborted: the destination aborted a mirrored transaction by itself.
	ErrTxnAborted = errors.New("mirrored transaction aborted by the destination")
)

// PartitionError is a failure of one mirrored partition. Retryable errors are
// retried with backoff; the others wait for an operator's recover.
type PartitionError struct {
	Topic     string
	Partition int32
	Retryable bool
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("%s/%d: %v", e.Topic, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// OffsetMismatchError reports the offset-identity invariant broken: the
// broker put a batch at Actual where the source has it at Expected.
type OffsetMismatchError struct {
	Topic     string
	Partition int32
	Expected  int64
	Actual    int64
	Cause     error // ErrForeignWrite or ErrDiverged
	// Where names what showed the destination's offset for a foreign
	// write (a Produce answer, the log end after fencing, the periodic
	// destination check), "" for the others.
	Where string
}

func (e *OffsetMismatchError) Error() string {
	s := fmt.Sprintf("%v on %s/%d: expected offset %d, destination has %d", e.Cause, e.Topic, e.Partition, e.Expected, e.Actual)
	if e.Where != "" {
		s += " (" + e.Where + ")"
	}
	return s
}

func (e *OffsetMismatchError) Unwrap() error { return e.Cause }

// ErrULE: the source lost records that were already mirrored (an unclean
// leader election truncated its log).
var ErrULE = errors.New("source unclean leader election")

// ULEError reports mirrored records the source no longer has: the source's
// log for Epoch ends at SourceEnd, but the destination holds offsets up to
// Mirrored-1 copied in that epoch.
type ULEError struct {
	Topic     string
	Partition int32
	Epoch     int32
	SourceEnd int64
	Mirrored  int64
}

func (e *ULEError) Error() string {
	return fmt.Sprintf("%v on %s/%d: source epoch %d ends at offset %d, but offsets up to %d were mirrored (%d records diverge from offset %d)",
		ErrULE, e.Topic, e.Partition, e.Epoch, e.SourceEnd, e.Mirrored-1, e.Mirrored-e.SourceEnd, e.SourceEnd)
}

func (e *ULEError) Unwrap() []error { return []error{ErrULE, ErrDiverged} }

// ErrDestinationLost: the destination no longer holds records kmirror
// mirrored (an unclean election on the destination, or its topic deleted
// and recreated by someone else).
var ErrDestinationLost = errors.New("destination lost mirrored records")

// MismatchError reports destination records that alignment's verification
// found not to be the source's at the same offsets: a foreign producer, a
// zombie owner, or a destination topic that held other data before it was
// mirrored into. Nothing is appended to such a partition and nothing is
// deleted; --recover --rebuild quarantines the records from At on.
type MismatchError struct {
	Topic      string
	Partition  int32
	After      int64 // the last offset known to be the source's (the LME), -1 none
	At         int64 // the first offset that is not the source's
	End        int64 // the destination log end
	ProducerID int64 // of the destination batch at At
	Reason     string
	Adopting   bool // no LME: the destination partition held records before kmirror wrote to it
}

func (e *MismatchError) Error() string {
	if e.Adopting {
		return fmt.Sprintf("%v on %s/%d: the destination already holds records that differ from the source, first at offset %d (producer id %d: %s); nothing was deleted: to mirror into it, --recover --rebuild (quarantines the destination's records) or delete the destination topic",
			ErrForeignWrite, e.Topic, e.Partition, e.At, e.ProducerID, e.Reason)
	}
	n, are := fmt.Sprintf("%d records", e.End-e.At), "are"
	if e.End-e.At == 1 {
		n, are = "1 record", "is"
	}
	return fmt.Sprintf("%v on %s/%d: the destination holds %s after offset %d that %s not from the source (first at offset %d, producer id %d: %s)",
		ErrForeignWrite, e.Topic, e.Partition, n, e.After, are, e.At, e.ProducerID, e.Reason)
}

// Unwrap makes a mismatch a divergence too: what --recover --rebuild
// remedies.
func (e *MismatchError) Unwrap() []error { return []error{ErrForeignWrite, ErrDiverged} }

// TxnAbortedError reports a mirrored transaction that the destination's
// transaction coordinator aborted on its own, nearly always because it
// stayed open longer than the destination's transaction.max.timeout.ms
// (a pause, an outage, a source transaction left open that long). The
// coordinator's abort marker is a record the source does not have, so the
// destination has diverged: plain --recover finds it again, and
// --recover --rebuild quarantines it and mirrors the topic again.
type TxnAbortedError struct {
	Topic     string
	Partition int32
	TxnID     string // the mirrored producer's transactional id, "" unknown
	At        int64  // offset of the destination's abort marker, -1 unknown
	Err       error  // what revealed it: a *MismatchError, or the coordinator's answer
}

func (e *TxnAbortedError) Error() string {
	at := "at an unknown offset"
	if e.At >= 0 {
		at = fmt.Sprintf("at offset %d", e.At)
	}
	id := e.TxnID
	if id == "" {
		id = "of this partition"
	}
	return fmt.Sprintf("%v on %s/%d: the destination's transaction coordinator aborted mirrored transaction %s (it was open longer than the destination's transaction.max.timeout.ms) and wrote an abort marker %s that the source does not have; --recover --rebuild of %s quarantines it and mirrors the topic again (%v)",
		ErrTxnAborted, e.Topic, e.Partition, id, at, e.Topic, e.Err)
}

// Unwrap makes the abort a divergence too: what --recover --rebuild
// remedies.
func (e *TxnAbortedError) Unwrap() []error { return []error{ErrTxnAborted, ErrDiverged, e.Err} }

// ErrSourceTopicRecreated: the source topic has another topic id than the
// one the partition mirrored: it was deleted and created again under the
// same name, and its records are not those the destination holds.
var ErrSourceTopicRecreated = errors.New("source topic recreated")

// ErrSourceUnreachable: the mirror's source cluster does not answer.
var ErrSourceUnreachable = errors.New("source cluster unreachable")

// SourceUnreachableError names the unreachable source and since when.
type SourceUnreachableError struct {
	Mirror    string
	Bootstrap []string
	Since     time.Time
	Err       string
}

func (e *SourceUnreachableError) Error() string {
	return fmt.Sprintf("%v: %s (mirror %s) has not answered since %s UTC: %s", ErrSourceUnreachable,
		strings.Join(e.Bootstrap, ","), e.Mirror, e.Since.UTC().Format("15:04:05"), e.Err)
}

func (e *SourceUnreachableError) Unwrap() error { return ErrSourceUnreachable }

// errRealign asks the runner to re-read the destination and start again.
var errRealign = errors.New("realign")

// Failure is err as a failure of the runner's partition that waits for an
// operator's recover.
func (r *Runner) Failure(err error) error {
	return &PartitionError{Topic: r.topic, Partition: r.partition, Err: err}
}

// Failuref is failure(fmt.Errorf(format, args...)).
func (r *Runner) Failuref(format string, args ...any) error {
	return r.Failure(fmt.Errorf(format, args...))
}

// mismatch reports a batch of the runner's partition at actual on the
// destination where the source has it at expected; cause is ErrForeignWrite
// or ErrDiverged.
func (r *Runner) mismatch(expected, actual int64, cause error) error {
	return &OffsetMismatchError{Topic: r.topic, Partition: r.partition, Expected: expected, Actual: actual, Cause: cause}
}

// foreignWrite reports a destination offset beyond what the runner
// appended, where names what showed it.
func (r *Runner) foreignWrite(expected, actual int64, where string) error {
	return &OffsetMismatchError{Topic: r.topic, Partition: r.partition, Expected: expected, Actual: actual, Cause: ErrForeignWrite, Where: where}
}

// ErrMirrorLoop: a topic would be mirrored back to the cluster it is being
// mirrored from.
var ErrMirrorLoop = errors.New("mirror loop")

// ErrRebuildAbandoned: a recorded rebuild was given up before anything was
// deleted; the record's note says why.
var ErrRebuildAbandoned = errors.New("rebuild abandoned, nothing deleted")
