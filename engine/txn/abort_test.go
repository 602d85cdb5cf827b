package txn

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
)

// openTxnSource writes one source transaction of three data batches and a
// commit, and returns its batches.
func openTxnSource(e *env) [][]byte {
	a := e.txnProducer("src-a")
	e.begin(a)
	e.produce(a, "a1")
	e.produce(a, "a2")
	e.produce(a, "a3")
	e.end(a, true)
	return e.sourceBatches()
}

// abortBehindBack aborts a mapped transaction with a raw EndTxn, as the
// coordinator's timeout would, and returns where its marker landed.
func (e *env) abortBehindBack(p Producer) int64 {
	e.t.Helper()
	ctx := testCtx(e.t)
	at, err := New(e.config()).logEnd(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.TxnID, p.PID, p.Epoch
	resp, err := req.RequestWith(ctx, e.dstCl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		e.t.Fatalf("abort behind the mapper's back: %v", err)
	}
	return at
}

func wantAborted(t *testing.T, err error, txnID string, marker int64) {
	t.Helper()
	var ae *AbortedByCoordinatorError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAbortedByCoordinator) {
		t.Fatalf("err = %v, want *AbortedByCoordinatorError", err)
	}
	if ae.TxnID != txnID || ae.MarkerOffset != marker {
		t.Fatalf("aborted error names %s at %d, want %s at %d", ae.TxnID, ae.MarkerOffset, txnID, marker)
	}
	if !strings.Contains(err.Error(), txnID) {
		t.Fatalf("message %q does not name the transaction", err)
	}
}

func TestRestoreDetectsCoordinatorAbort(t *testing.T) {
	e := newEnv(t, "coord-abort")
	bs := openTxnSource(e)
	ctx := testCtx(t)
	m1 := New(e.config())
	app := e.appender(m1)
	app.applyAll(bs[:1])
	persisted := m1.Open()
	marker := e.abortBehindBack(persisted[0])

	m2 := New(e.config())
	wantAborted(t, m2.Restore(ctx, persisted), persisted[0].TxnID, marker)
	h1, _ := batch.ParseHeader(bs[1])
	_, _, err := m2.Writer(ctx, h1)
	wantAborted(t, err, persisted[0].TxnID, marker)
	hc, _ := batch.ParseHeader(bs[3])
	wantAborted(t, m2.End(ctx, hc, true, hc.BaseOffset), persisted[0].TxnID, marker)
	if open := m2.Open(); len(open) != 1 {
		t.Fatalf("the aborted producer must stay listed for persistence, got %+v", open)
	}
	m2.Forget(persisted[0].SourcePID)
	if open := m2.Open(); len(open) != 0 {
		t.Fatalf("Forget left %+v", open)
	}

	// The Mapper that lived through it learns it from the refused append.
	app.m = m1
	wantAborted(t, app.apply(ctx, bs[1]), persisted[0].TxnID, marker)
}

func TestEndDetectsTimedOutTransaction(t *testing.T) {
	e := newEnv(t, "timeout")
	bs := openTxnSource(e)
	ctx := testCtx(t)
	cfg := e.config()
	cfg.TxnTimeout = 200 * time.Millisecond
	m := New(cfg)
	e.appender(m).applyAll(bs[:3])
	txnID := m.Open()[0].TxnID
	enginetest.Wait(t, 10*time.Second, func() (bool, string) {
		d := e.describe(txnID)
		return d.state != stateOngoing, "transaction still " + d.state.String()
	})
	hc, _ := batch.ParseHeader(bs[3])
	wantAborted(t, m.End(ctx, hc, true, hc.BaseOffset), txnID, hc.BaseOffset)
	if n, err := m.AbortAll(ctx); n != 0 || !errors.Is(err, ErrAbortedByCoordinator) {
		t.Fatalf("AbortAll = %d, %v; want 0 and the coordinator's abort", n, err)
	}
}

func TestWriterAndEndRejectWrongBatches(t *testing.T) {
	e := newEnv(t, "wrong")
	plain := e.plainProducer()
	e.produce(plain, "p1")
	bs := append(e.sourceBatches(), openTxnSource(e)...)
	ctx := testCtx(t)
	m := New(e.config())
	ph, _ := batch.ParseHeader(bs[0])
	th, _ := batch.ParseHeader(bs[1])
	ch, _ := batch.ParseHeader(bs[len(bs)-1])
	if _, _, err := m.Writer(ctx, ph); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("Writer(plain) = %v", err)
	}
	if _, _, err := m.Writer(ctx, ch); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("Writer(control) = %v", err)
	}
	if err := m.End(ctx, th, true, th.BaseOffset); !errors.Is(err, ErrNotControl) {
		t.Fatalf("End(data) = %v", err)
	}
	// The destination is empty: a marker at offset 4 cannot land there.
	var me *MarkerError
	if err := m.End(ctx, ch, true, ch.BaseOffset); !errors.As(err, &me) || me.Sent || me.Expected != ch.BaseOffset || me.Actual != 0 {
		t.Fatalf("End on a misaligned destination = %v", err)
	}
	if len(m.Open()) != 0 {
		t.Fatalf("a refused End opened a transaction: %+v", m.Open())
	}
}

// A marker that lands, but with something else next to it, is reported.
func TestEndReportsMarkerBeyondItsOffset(t *testing.T) {
	e := newEnv(t, "beyond")
	bs := openTxnSource(e)
	ctx := testCtx(t)
	m := New(e.config())
	e.appender(m).applyAll(bs[:3])
	hc, _ := batch.ParseHeader(bs[3])

	// The second ListOffsets of End (after EndTxn) sees one record too many.
	var calls atomic.Int32
	e.dst.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if calls.Add(1) == 1 {
			return nil, nil, false
		}
		req := kr.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.Offset = hc.BaseOffset + 2
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var me *MarkerError
	err := m.End(ctx, hc, true, hc.BaseOffset)
	if !errors.As(err, &me) || !errors.Is(err, ErrMarkerMisplaced) || !me.Sent || me.Expected != hc.BaseOffset+1 || me.Actual != hc.BaseOffset+2 {
		t.Fatalf("End = %v, want a MarkerError after EndTxn", err)
	}
}

// A source marker with no data behind it on the partition is reproduced
// with an empty destination transaction.
func TestLoneMarkerIsReproduced(t *testing.T) {
	e := newEnv(t, "lone")
	plain := e.plainProducer()
	e.produce(plain, "p1")
	ctx := testCtx(t)
	// A source producer adds the partition and ends without writing.
	txnID := "src-lone"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = 60_000
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir, err := init.RequestWith(ctx, e.srcCl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("init: %v %v", err, ir)
	}
	for _, commit := range []bool{false, true} {
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, ir.ProducerID, ir.ProducerEpoch
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = e.topic, []int32{testPart}
		add.Topics = append(add.Topics, at)
		if _, err := add.RequestWith(ctx, e.srcCl); err != nil {
			t.Fatal(err)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, ir.ProducerID, ir.ProducerEpoch, commit
		er, err := end.RequestWith(ctx, e.srcCl)
		if err != nil || er.ErrorCode != 0 {
			t.Fatalf("end: %v %v", err, er)
		}
		if er.Version >= 5 {
			ir.ProducerEpoch = er.ProducerEpoch
		}
	}
	e.produce(plain, "p2")

	m := New(e.config())
	e.appender(m).applyAll(e.sourceBatches())
	if got := e.compareLogs(); got != 2 {
		t.Fatalf("%d markers, want the source's two", got)
	}
	if len(m.Open()) != 0 {
		t.Fatalf("open after lone markers: %+v", m.Open())
	}
}

func TestTxnTimeoutComesFromDestination(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		cfg  time.Duration
		want time.Duration
	}{
		{"broker default", nil, 0, 15 * time.Minute},
		{"broker setting", []kfake.Opt{kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "120000"})}, 0, 2 * time.Minute},
		{"configured", nil, 90 * time.Second, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "timeout-config", tc.opts...)
			cfg := e.config()
			cfg.TxnTimeout = tc.cfg
			got, err := New(cfg).txnTimeout(testCtx(t))
			if err != nil || got != tc.want {
				t.Fatalf("txnTimeout = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestTxnTimeoutFallsBackWhenUnreadable(t *testing.T) {
	e := newEnv(t, "timeout-fallback")
	e.dst.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		req := kr.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		resp.Version = req.Version
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	got, err := New(e.config()).txnTimeout(testCtx(t))
	if err != nil || got != DefaultTimeout {
		t.Fatalf("txnTimeout = %v, %v; want the %v fallback", got, err, DefaultTimeout)
	}
}

// End is safe to repeat, and accepts a marker that is already where the
// source has it: its own EndTxn whose answer was lost, or the coordinator's
// abort of a transaction the source aborted too.
func TestEndAcceptsMarkerAlreadyInPlace(t *testing.T) {
	e := newEnv(t, "in-place")
	a := e.txnProducer("src-a")
	e.begin(a)
	e.produce(a, "a1")
	e.end(a, true)
	e.begin(a)
	e.produce(a, "a2")
	e.end(a, true)
	bs := e.sourceBatches() // a1 commit a2 commit
	ctx := testCtx(t)
	m := New(e.config())
	app := e.appender(m)

	app.applyAll(bs[:1])
	p := m.Open()[0]
	req := kmsg.NewPtrEndTxnRequest() // the EndTxn whose answer "was lost"
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.TxnID, p.PID, p.Epoch, true
	if resp, err := req.RequestWith(ctx, e.dstCl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("end behind the back: %v %v", err, resp)
	}
	app.applyAll(bs[1:])
	hc, _ := batch.ParseHeader(bs[3])
	if err := m.End(ctx, hc, true, hc.BaseOffset); err != nil {
		t.Fatalf("repeated End: %v", err)
	}
	if got := e.compareLogs(); got != 2 {
		t.Fatalf("%d markers, want 2", got)
	}
}

func TestTimedOutTransactionThatTheSourceAbortedToo(t *testing.T) {
	e := newEnv(t, "timeout-abort")
	a := e.txnProducer("src-a")
	e.begin(a)
	e.produce(a, "a1")
	e.end(a, false)
	bs := e.sourceBatches()
	cfg := e.config()
	cfg.TxnTimeout = 200 * time.Millisecond
	m := New(cfg)
	app := e.appender(m)
	app.applyAll(bs[:1])
	txnID := m.Open()[0].TxnID
	enginetest.Wait(t, 10*time.Second, func() (bool, string) {
		d := e.describe(txnID)
		return d.state != stateOngoing, "transaction still " + d.state.String()
	})
	app.applyAll(bs[1:])
	if e.compareLogs() != 1 || len(m.Open()) != 0 {
		t.Fatalf("want the coordinator's abort to stand for the source's; open %+v", m.Open())
	}
}
