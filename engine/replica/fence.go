package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/internal/backoff"
)

// A stop's fence (DESIGN §5.1). A real broker learns a producer epoch on a
// partition only from a write with it: the InitProducerID bump a stop (or
// an alignment) makes reaches the coordinator, and a partition nobody
// wrote to since still takes a zombie's append with the old epoch, or a
// late one of this instance, after STOPPED, among the clients' own
// writes. So the stop writes with the epoch on every partition, without
// writing a record: the topic's writer identity adds the stopping
// partitions to a transaction and aborts it, and the coordinator writes an
// abort marker with the epoch (a transaction of version 1, which keeps it)
// on each. From that marker on, the partition's leader refuses the older
// epochs. The marker is no source record: the STOPPED LME never names it
// (settleLME passes over it), and a failback mirrors it as the lone marker
// of an empty transaction.
//
// The writer id has one transaction at a time, and a stop of a topic
// stops its partitions at once: the partitions that reach the fence
// together share one transaction (a round), the first of them running it.

// fenceRound is one transaction of a topic's stop fence.
type fenceRound struct {
	parts []int32
	done  chan struct{}
	w     batch.Writer // the identity the round wrote
	err   error
}

// markEpoch writes the topic's current writer epoch on partition p with
// the next round of the topic's stop fence, which run performs for the
// partitions gathered, and returns the identity it wrote.
// run is given the writer id's transaction coordinator as the topic's
// bumps found it (-1 unknown).
func (t *TopicWriter) markEpoch(ctx context.Context, p int32, run func(w batch.Writer, coord int32, parts []int32) error) (batch.Writer, error) {
	t.mu.Lock()
	if t.next == nil {
		t.next = &fenceRound{done: make(chan struct{})}
	}
	rd := t.next
	rd.parts = append(rd.parts, p)
	lead := !t.fencing
	t.fencing = true
	t.mu.Unlock()
	if lead {
		// A round waits until the partitions whose stops began have
		// drained: an append still in flight when the round ends the
		// epoch would be refused, its outcome unknown. Rounds follow
		// each other until no partition waits: the partitions that came
		// during one go in the next.
		if err := t.waitDrained(ctx); err != nil {
			// The round fails for all its partitions: each stop is
			// tried again.
			t.mu.Lock()
			cur := t.next
			t.next, t.fencing = nil, false
			cur.err = err
			t.mu.Unlock()
			close(cur.done)
			return batch.Writer{}, err
		}
		for {
			t.mu.Lock()
			cur := t.next
			t.next = nil
			if cur == nil {
				t.fencing = false
				t.mu.Unlock()
				break
			}
			w, coord := t.w, t.coord-1
			t.mu.Unlock()
			err := run(w, coord, cur.parts)
			t.mu.Lock()
			cur.w, cur.err = w, err
			t.mu.Unlock()
			close(cur.done)
		}
	}
	select {
	case <-rd.done:
		return rd.w, rd.err
	case <-ctx.Done():
		return batch.Writer{}, ctx.Err()
	}
}

// stopBegins counts a partition's stop as draining until it reaches the
// fence (markEpoch) or gives up (the func returned, called either way).
func (t *TopicWriter) stopBegins() (ends func()) {
	t.mu.Lock()
	t.draining++
	t.mu.Unlock()
	reached := false
	return func() {
		if reached {
			return
		}
		reached = true
		t.mu.Lock()
		t.draining--
		t.signalLocked()
		t.mu.Unlock()
	}
}

// signalLocked wakes waitDrained. t.mu is held.
func (t *TopicWriter) signalLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// A round waits for the drains because the in-memory broker refuses a
// non-transactional append of the producer on any partition while its
// transaction is open (INVALID_TXN_STATE, fatal for an append); a real
// broker refuses it only on the partitions the transaction holds, which
// are drained.
//
// drainWait bounds a round's wait for the other partitions' drains: a
// partition whose drain hangs (a destination leader that never answers)
// does not hold the others' stops for ever.
const drainWait = 30 * time.Second

// waitDrained waits until no partition of the topic is between the start
// of its stop and its fence, at most drainWait.
func (t *TopicWriter) waitDrained(ctx context.Context) error {
	deadline := time.NewTimer(drainWait)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		if t.draining <= 0 {
			t.mu.Unlock()
			return nil
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fenceRetries and fencePolicy bound the retries of one round's requests.
const fenceRetries = 8

var fencePolicy = backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second}

// errNoEmptyTxn: the destination has no client form of AddPartitionsToTxn,
// so it cannot take an empty transaction.
var errNoEmptyTxn = errors.New("the destination cannot open a transaction without a write")

// writeEpoch writes the topic writer's epoch on this partition (see the
// stop's fence above) and takes the identity after it.
// drained tells the topic's rounds that this partition's appends are
// settled.
func (r *Runner) writeEpoch(ctx context.Context, drained func()) error {
	if err := r.deps.Gate.Wait(ctx); err != nil {
		return err
	}
	txnID := writerID(r.deps.Mirror, r.topic)
	cl := r.deps.Dest.Client()
	drained()
	w, err := r.tc.Writer.markEpoch(ctx, r.partition, func(w batch.Writer, coord int32, parts []int32) error {
		return epochMarkers(ctx, cl, txnID, r.topic, w, coord, parts, r.deps.Jitter)
	})
	if errors.Is(err, errNoEmptyTxn) {
		r.emit(partition.SeverityWarn, "stopping: "+err.Error()+": the stop's epoch reaches the partition only with the next write (a zombie's append with the old epoch is refused only on brokers that check it at every append)")
		return nil
	}
	if err != nil {
		return fmt.Errorf("fence %s/%d with the writer's epoch: %w", r.topic, r.partition, err)
	}
	if !sameWriter(w, r.writer) {
		r.writer = w
		r.stats.setWriter(w.ProducerEpoch)
	}
	return nil
}

// The fence's transaction is one of transaction version 1: the client
// form of AddPartitionsToTxn (v3 at most, the only one that opens a
// transaction without data) and EndTxn v4 at most, which keeps the epoch.
// EndTxn v5 bumps it, and a broker that checks the coordinator's epoch at
// every append (the in-memory one) would then refuse the appends of the
// topic's partitions still settling their last batches. These requests
// carry their own version caps, so they go to the coordinator directly.
type (
	addPartitionsV3 struct {
		*kmsg.AddPartitionsToTxnRequest
	}
	endTxnV4 struct{ *kmsg.EndTxnRequest }
)

func (addPartitionsV3) MaxVersion() int16 { return 3 }
func (endTxnV4) MaxVersion() int16        { return 4 }

// epochMarkers adds parts of topic to a transaction of the writer id
// txnID with the identity w and aborts it, then waits until the
// coordinator wrote the markers (with w's epoch). coord is the id's
// transaction coordinator, -1 unknown (found with FindCoordinator).
func epochMarkers(ctx context.Context, cl *kgo.Client, txnID, topic string, w batch.Writer, coord int32, parts []int32, jitter func() float64) error {
	// Each request has its retries of its own.
	retry := func(op func(broker *kgo.Broker) error) error {
		b := backoff.Backoff{Policy: fencePolicy}
		for {
			err := coordinator(ctx, cl, txnID, &coord)
			if err == nil {
				err = op(cl.Broker(int(coord)))
			}
			if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) {
				coord = -1
			}
			if err == nil || !fenceRetriable(err) || b.Attempt() >= fenceRetries {
				return err
			}
			if werr := backoff.Sleep(ctx, b.Next(jitter)); werr != nil {
				return fmt.Errorf("%w (last error: %w)", werr, err)
			}
		}
	}
	err := retry(func(br *kgo.Broker) error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, w.ProducerID, w.ProducerEpoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
		kr, err := br.Request(ctx, addPartitionsV3{req})
		if err != nil {
			return err
		}
		resp := kr.(*kmsg.AddPartitionsToTxnResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("%s/%d: %w", t.Topic, rp.Partition, err)
				}
			}
		}
		return nil
	})
	if errors.Is(err, kerr.UnsupportedVersion) {
		return fmt.Errorf("%w (%w)", errNoEmptyTxn, err)
	}
	if err != nil {
		return fmt.Errorf("add %s %v to transaction %s: %w", topic, parts, txnID, err)
	}
	err = retry(func(br *kgo.Broker) error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, w.ProducerID, w.ProducerEpoch, false
		kr, err := br.Request(ctx, endTxnV4{req})
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(kr.(*kmsg.EndTxnResponse).ErrorCode)
	})
	if err != nil {
		return fmt.Errorf("abort the fence transaction of %s: %w", txnID, err)
	}
	// A real coordinator writes the markers after it answers: the fence
	// holds once the transaction is complete.
	err = retry(func(br *kgo.Broker) error {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		kr, err := br.Request(ctx, req)
		if err != nil {
			return err
		}
		for _, st := range kr.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			if st.TransactionalID != txnID {
				continue
			}
			if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
				return err
			}
			if st.State == "PrepareAbort" || st.State == "PrepareEpochFence" {
				return errMarkersPending
			}
			return nil
		}
		return fmt.Errorf("transaction %s missing from the answer", txnID)
	})
	if err != nil {
		return fmt.Errorf("wait for the fence markers of %s: %w", txnID, err)
	}
	return nil
}

// coordinator finds the transaction coordinator of txnID into *coord
// unless it is known (>= 0).
func coordinator(ctx context.Context, cl *kgo.Client, txnID string, coord *int32) error {
	if *coord >= 0 {
		return nil
	}
	resp, ok := kadm.NewClient(cl).FindTxnCoordinators(ctx, txnID)[txnID]
	if !ok {
		return fmt.Errorf("no coordinator of %s in the answer", txnID)
	}
	if resp.Err != nil {
		return fmt.Errorf("coordinator of %s: %w", txnID, resp.Err)
	}
	*coord = resp.NodeID
	return nil
}

// errMarkersPending: the coordinator has not written a round's markers yet.
var errMarkersPending = errors.New("the coordinator is still writing the markers")

// fenceRetriable reports a fence request worth sending again.
func fenceRetriable(err error) bool {
	return errors.Is(err, errMarkersPending) || errors.Is(err, kerr.ConcurrentTransactions) || Retriable(err)
}
