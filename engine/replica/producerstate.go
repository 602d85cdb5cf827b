package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
)

// errNoProducerState: the destination leader answered DescribeProducers
// but says nothing of the partition.
var errNoProducerState = errors.New("no producer state for the partition in the answer")

// askLanded settles an append whose resends ran out with its outcome still
// unknown, from the destination leader's producer state (DescribeProducers,
// KIP-664, Kafka 3.0+): a leader keeps each producer's last sequence on
// the partition from its own log, so it counts a batch that lies above the
// high watermark, where ListOffsets and Fetch do not show it. A realign
// would read the log end below that batch and append it a second time.
//
//   - the writer's last sequence at or past the batch's, same producer id
//     and epoch: the batch landed; it is taken at f.base and the partition
//     goes on without realigning (tookLanding checks the offset);
//   - the last sequence before the batch's, or an older epoch: it did not
//     land, and nothing after it did: the log end alignment reads is the
//     true one, and appending the batch again there is safe;
//   - no answer (a broker before 3.0, an error), no state for the
//     producer (it expired), a newer epoch: nothing is known, and the
//     partition realigns as before, with the alignment's checks.
//
// The last two return cause, which sends the partition to alignment.
func (r *Runner) askLanded(ctx context.Context, f inflight, cause error) error {
	h, err := batch.ParseHeader(f.b)
	if err != nil || h.ProducerID < 0 {
		return cause
	}
	last := NextSequence(h.BaseSequence, h.RecordCount-1)
	p, found, err := r.producerState(ctx, h.ProducerID)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.emit(partition.SeverityWarn, fmt.Sprintf("the destination cannot say whether the batch at offset %d landed: %v; realigning", f.base, err))
		return cause
	case !found:
		r.emit(partition.SeverityWarn, fmt.Sprintf("the destination leader keeps no state of producer id %d on the partition: whether the batch at offset %d landed is unknown; realigning", h.ProducerID, f.base))
		return cause
	case p.ProducerEpoch == int32(h.ProducerEpoch) && seqAtOrAfter(p.LastSequence, last):
		return r.tookLanding(ctx, f, h, p.LastSequence)
	case p.ProducerEpoch < int32(h.ProducerEpoch),
		p.ProducerEpoch == int32(h.ProducerEpoch) && !seqAtOrAfter(p.LastSequence, h.BaseSequence):
		r.emit(partition.SeverityWarn, fmt.Sprintf("the destination's producer state (producer id %d, epoch %d, last sequence %d) shows the batch at offset %d (epoch %d, sequences %d..%d) did not land: realigning appends it again",
			h.ProducerID, p.ProducerEpoch, p.LastSequence, f.base, h.ProducerEpoch, h.BaseSequence, last))
		return cause
	}
	r.emit(partition.SeverityWarn, fmt.Sprintf("the destination's producer state (producer id %d, epoch %d, last sequence %d) does not tell whether the batch at offset %d (epoch %d, sequences %d..%d) landed; realigning",
		h.ProducerID, p.ProducerEpoch, p.LastSequence, f.base, h.ProducerEpoch, h.BaseSequence, last))
	return cause
}

// tookLanding takes f, which the producer state shows landed, at f.base.
//
// DescribeProducers carries no offset for an idempotent producer, so the
// offset is checked where it can be: if the destination already serves
// the batch at f.base (its high watermark passed it), that batch must be
// this one (producer id, epoch and sequence), or the partition is FAILED
// with the offsets. If not yet, the next append's answer checks it: f
// landed after the batch before it (which ended at f.base, acknowledged)
// and before the next one of its producer, so that one's base offset is
// f.next exactly when nothing else lies in between; any other is an
// OffsetMismatchError.
func (r *Runner) tookLanding(ctx context.Context, f inflight, h batch.Header, lastSeq int32) error {
	bs, err := r.destBatches(ctx, f.base)
	seen := "above the destination's high watermark: the next append's offset checks where it landed"
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		seen = fmt.Sprintf("unread (%v): the next append's offset checks where it landed", err)
	case len(bs) > 0:
		d := bs[0].h
		if d.BaseOffset != f.base || d.ProducerID != h.ProducerID || d.ProducerEpoch != h.ProducerEpoch || d.BaseSequence != h.BaseSequence {
			return r.foreignWrite(f.base, d.NextOffset(), fmt.Sprintf("the batch at offsets %d..%d, of producer id %d epoch %d sequence %d, lies where the writer's batch (epoch %d, sequence %d) that its producer state shows landed belongs",
				d.BaseOffset, d.LastOffset(), d.ProducerID, d.ProducerEpoch, d.BaseSequence, h.ProducerEpoch, h.BaseSequence))
		}
		seen = "read back at that offset"
	}
	r.emit(partition.SeverityWarn, fmt.Sprintf("the batch at offset %d landed though its answers were lost: the destination's producer state shows sequence %d of producer id %d epoch %d (the batch's last is %d); %s; going on without realigning",
		f.base, lastSeq, h.ProducerID, h.ProducerEpoch, NextSequence(h.BaseSequence, h.RecordCount-1), seen))
	r.stats.clearError()
	return r.took(ctx, f, time.Now())
}

// producerState asks the destination partition's leader for the state it
// keeps of producer id on the partition; found is false when it keeps
// none.
func (r *Runner) producerState(ctx context.Context, id int64) (p kmsg.DescribeProducersResponseTopicPartitionActiveProducer, found bool, err error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic = r.topic
	rt.Partitions = []int32{r.partition}
	req.Topics = append(req.Topics, rt)
	resp, err := r.deps.Dest.Request(ctx, r.dst.Leader, req)
	if err != nil {
		return p, false, fmt.Errorf("describe producers of %s/%d on destination broker %d: %w", r.topic, r.partition, r.dst.Leader, err)
	}
	for _, t := range resp.(*kmsg.DescribeProducersResponse).Topics {
		for _, tp := range t.Partitions {
			if t.Topic != r.topic || tp.Partition != r.partition {
				continue
			}
			if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
				return p, false, fmt.Errorf("describe producers of %s/%d on destination broker %d: %w", r.topic, r.partition, r.dst.Leader, err)
			}
			for _, a := range tp.ActiveProducers {
				if a.ProducerID == id {
					return a, true, nil
				}
			}
			return p, false, nil
		}
	}
	return p, false, fmt.Errorf("describe producers of %s/%d on destination broker %d: %w", r.topic, r.partition, r.dst.Leader, errNoProducerState)
}

// seqAtOrAfter reports whether producer sequence a is b or comes after
// it, with sequences wrapping to 0 past math.MaxInt32 (NextSequence): a
// partition's sequences in flight span far less than half the range.
func seqAtOrAfter(a, b int32) bool {
	if a < 0 || b < 0 {
		return false
	}
	const span = int64(math.MaxInt32) + 1
	d := ((int64(a)-int64(b))%span + span) % span
	return d < span/2
}
