package explore

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
)

// Values the explorer writes start with these, so the oracle tells a
// source record from a foreign one by its value alone, and every value is
// unique within a scenario (the step and the index name it).
const (
	srcValue     = "s|"
	foreignValue = "f|"
)

// do carries out one step; the model is updated only when it went through,
// as far as the world can tell. An error is a violation of what the step
// itself promises (I4: a stop that does not complete); a refusal by a
// cluster is a note.
func (w *world) do(s step) error {
	switch s.Kind {
	case kProduce:
		cl := w.plain
		if s.Mode == "idem" {
			cl = w.idem
		}
		w.produce(cl, s, srcValue)
	case kTxnCommit, kTxnAbort:
		if err := w.transaction(s, s.Kind == kTxnCommit); err != nil {
			w.note("%s: %v", s, err)
		}
	case kTxnOpen:
		if err := w.openTxn(s); err != nil {
			w.note("%s: %v", s, err)
			return nil
		}
	case kTxnClose:
		if err := w.closeTxn(s.Mode == "commit"); err != nil {
			w.note("%s: %v", s, err)
		}
	case kTxnTimeout:
		w.txnTimeout(s)
	case kStop, kPause, kResume, kRecover, kRebuild:
		return w.command(s)
	case kRebuildStop:
		if err := w.command(step{Kind: kRebuild, Topic: s.Topic}); err != nil {
			return err
		}
		return w.command(step{Kind: kStop, Topic: s.Topic})
	case kKill:
		if err := w.killInstance(int(s.P)); err != nil {
			w.m.apply(s)
			return err
		}
	case kStart:
		if err := w.startInstance(int(s.P)); err != nil {
			w.note("%s: %v", s, err)
			return nil
		}
	case kZombie:
		if err := w.zombie(s); err != nil {
			return err
		}
	case kThaw:
		w.thaw()
	case kSrcDown:
		w.srcNet.Down("")
	case kSrcUp:
		w.srcNet.Up()
		w.orc.upAt = time.Now()
	case kDstDown:
		if err := w.brokerDown(s.P); err != nil {
			w.note("%s: %v", s, err)
			return nil
		}
	case kDstUp:
		if err := w.brokerUp(); err != nil {
			w.note("%s: %v", s, err)
		}
		w.orc.upAt = time.Now()
	case kForeign:
		w.produce(w.foreign, s, foreignValue)
	case kDelRec:
		w.deleteRecords(s)
	case kGrow:
		ctx, cancel := w.timeout(15 * time.Second)
		defer cancel()
		if _, err := w.srcAdm.CreatePartitions(ctx, 1, s.Topic); err != nil {
			w.note("%s: %v", s, err)
			return nil
		}
	case kMoveSrc, kMoveDst:
		c := w.src
		if s.Kind == kMoveDst {
			c = w.dst
		}
		// A topic deleted by a rebuild has no leader to move.
		if l := c.LeaderFor(s.Topic, s.P); l >= 0 {
			if err := c.MoveTopicPartition(s.Topic, s.P, (l+1)%3); err != nil {
				w.note("%s: %v", s, err)
			}
		}
	}
	w.m.apply(s)
	return nil
}

// records builds the records of a produce, transaction or foreign step.
func (w *world) records(s step, prefix string) []*kgo.Record {
	parts := []int32{s.P}
	if s.P < 0 {
		parts = nil
		for p := range w.m.parts[s.Topic] {
			parts = append(parts, p)
		}
	}
	var recs []*kgo.Record
	for _, p := range parts {
		for i := range s.N {
			recs = append(recs, &kgo.Record{
				Topic: s.Topic, Partition: p,
				Key:   fmt.Appendf(nil, "k%d", i%7),
				Value: fmt.Appendf(nil, "%s%d|%d|%d", prefix, w.stepNo, p, i),
			})
		}
	}
	return recs
}

// produce writes a step's records and waits for their acks; records a
// cluster refused are a note (they may be in the log anyway: the oracle
// reads what is there).
func (w *world) produce(cl *kgo.Client, s step, prefix string) {
	ctx, cancel := w.timeout(20 * time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, w.records(s, prefix)...).FirstErr(); err != nil {
		w.note("%s: %v", s, err)
	}
}

// txnClient is a transactional source producer with a transactional id of
// its own.
func (w *world) txnClient() *kgo.Client {
	return w.src.Client(w.t, kgo.TransactionalID(fmt.Sprintf("explore-txn-%d", w.stepNo)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.TransactionTimeout(time.Minute), kgo.RetryTimeout(10*time.Second))
}

// transaction writes a step's records in one source transaction and ends it.
func (w *world) transaction(s step, commit bool) error {
	cl := w.txnClient()
	defer cl.Close()
	ctx, cancel := w.timeout(20 * time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	perr := cl.ProduceSync(ctx, w.records(s, srcValue)...).FirstErr()
	return errors.Join(perr, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit && perr == nil)))
}

// openTxn begins a source transaction and leaves it open with its records.
func (w *world) openTxn(s step) error {
	cl := w.txnClient()
	ctx, cancel := w.timeout(20 * time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return err
	}
	if err := cl.ProduceSync(ctx, w.records(s, srcValue)...).FirstErr(); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		cl.Close()
		return err
	}
	w.txn, w.txnTopic, w.txnP = cl, s.Topic, s.P
	return nil
}

// closeTxn ends the open source transaction.
func (w *world) closeTxn(commit bool) error {
	if w.txn == nil {
		return nil
	}
	ctx, cancel := w.timeout(20 * time.Second)
	defer cancel()
	err := w.txn.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	w.txn.Close()
	w.txn = nil
	return err
}

// txnTimeout opens a source transaction on a mirrored partition, waits
// until the destination aborts the mirrored transaction on its own (its
// marker takes the destination's log end past the source's), then commits
// the source's: a marker and an outcome the source does not have.
func (w *world) txnTimeout(s step) {
	if err := w.openTxn(s); err != nil {
		w.note("%s: %v", s, err)
		return
	}
	ok, msg := w.wait(10*shortTxnTimeout, func() (bool, string) {
		ctx, cancel := w.timeout(5 * time.Second)
		defer cancel()
		se, err1 := enginetest.Ends(ctx, w.srcCl, s.Topic)
		de, err2 := enginetest.Ends(ctx, w.dstCl, s.Topic)
		if err := errors.Join(err1, err2); err != nil {
			return false, err.Error()
		}
		if int(s.P) >= len(se) || int(s.P) >= len(de) {
			return false, fmt.Sprintf("source ends %v, destination ends %v", se, de)
		}
		return de[s.P] > se[s.P], fmt.Sprintf("source end %d, destination end %d", se[s.P], de[s.P])
	})
	if !ok {
		w.note("%s: the destination did not abort the mirrored transaction: %s", s, msg)
	}
	if err := w.closeTxn(true); err != nil {
		w.note("%s: %v", s, err)
	}
}

// deleteRecords moves a source partition's log start N% of the way to its
// high watermark.
func (w *world) deleteRecords(s step) {
	ctx, cancel := w.timeout(15 * time.Second)
	defer cancel()
	start, end, err := enginetest.Offsets(ctx, w.srcAdm, s.Topic, s.P)
	if err != nil {
		w.note("%s: %v", s, err)
		return
	}
	to := start + (end-start)*int64(s.N)/100
	if to <= start {
		return
	}
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: s.Topic, Partition: s.P, At: to})
	resp, err := w.srcAdm.DeleteRecords(ctx, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		w.note("%s: %v", s, err)
	}
}

var commandOf = map[kind]engine.CommandKind{kStop: engine.CmdStop, kPause: engine.CmdPause, kResume: engine.CmdResume,
	kRecover: engine.CmdRecover, kRebuild: engine.CmdRecover}

// command records an operator command in __mirror_state as the CLI does;
// the instances owning the topics carry it out.
func (w *world) command(s step) error {
	var sel *engine.TopicSelector
	if s.Topic != "*" {
		ts, err := engine.ParseTopics(s.Topic)
		if err != nil {
			return err
		}
		sel = &ts
	}
	ctx, cancel := w.timeout(30 * time.Second)
	defer cancel()
	if _, err := w.adm.Control(ctx, commandOf[s.Kind], mirrorName, sel, s.Kind == kRebuild); err != nil {
		w.note("%s: %v", s, err)
		return nil
	}
	w.m.apply(s)
	if s.Kind == kStop {
		w.orc.stopAsked(topicsOf(s))
	}
	return nil
}

// brokerDown takes destination broker node off the network and out of
// the cluster, as a crashed broker whose session expired: the cluster
// moves its partitions' leadership and its coordinators to the other
// brokers (kfake alone would keep naming it leader, so nothing it led
// would ever answer again, which no real cluster does).
//
// The controller stays: kfake keeps answering CreateTopics and
// DeleteTopics from the broker it was first given, so with it gone no
// topic could be created again (a real cluster elects another); a step
// that names it takes the next broker down instead.
func (w *world) brokerDown(node int32) error {
	ctx, cancel := w.timeout(10 * time.Second)
	defer cancel()
	meta, err := w.dstAdm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if node == meta.Controller {
		node = (node + 1) % int32(len(w.dstAddr))
	}
	w.dstNet.Down(w.dstAddr[node])
	if err := w.dst.RemoveNode(node); err != nil {
		w.dstNet.Up()
		return err
	}
	w.dstGone = node
	return nil
}

// brokerUp brings the broker brokerDown took away back on its address.
func (w *world) brokerUp() error {
	node := w.dstGone
	w.dstGone = -1
	w.dstNet.Up()
	if node < 0 {
		return nil
	}
	_, port, err := net.SplitHostPort(w.dstAddr[node])
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	_, _, err = w.dst.AddNode(node, p)
	return err
}

// zombie holds the next Produce of s.Topic in the destination's network
// and kills the instance in slot s.P, the only one running: its request
// is a zombie's write on its way, delivered by thaw. A new owner takes
// the topic over with an epoch bump only the coordinator learns until the
// owner writes (enginetest.EpochBroker); a stop must fence the partitions
// with a write of the new epoch, or the zombie's batch lands after it.
func (w *world) zombie(s step) error {
	for _, t := range topicNames {
		if ti := w.dst.TopicInfo(t); ti != nil {
			w.brk.Name(t, ti.TopicID)
		}
	}
	w.brk.Hold(s.Topic)
	w.produce(w.plain, step{Kind: kProduce, Topic: s.Topic, P: -1, N: 3, Mode: "plain"}, srcValue)
	deadline := time.Now().Add(10 * time.Second)
	for w.brk.Held() == 0 && time.Now().Before(deadline) {
		timer := time.NewTimer(20 * time.Millisecond)
		select {
		case <-w.ctx.Done():
			timer.Stop()
			return w.ctx.Err()
		case <-timer.C:
		}
	}
	if w.brk.Held() == 0 {
		w.note("%s: no Produce of %s to hold within 10s", s, s.Topic)
	}
	return w.killInstance(int(s.P))
}

// thaw delivers a zombie's held Produce as a real broker would: refused
// where the partition learnt a newer epoch of its producer, applied
// otherwise (at the log end: an offset check or a verification then finds
// it, loudly).
func (w *world) thaw() {
	if !w.brk.Holding() {
		return
	}
	ctx, cancel := w.timeout(15 * time.Second)
	defer cancel()
	d, err := w.brk.Release(ctx)
	if err != nil {
		w.note("thaw: %v", err)
		return
	}
	w.note("thaw: the zombie's batches: %d applied, %d refused", d.Applied, d.Refused)
}
