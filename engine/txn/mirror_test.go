package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/engine/batch"
)

// interleaved fills the source partition with plain idempotent writes and
// two transactional producers that commit and abort, and leaves one
// transaction open. It returns the number of committed records.
func interleaved(e *env) int {
	plain, a, b := e.plainProducer(), e.txnProducer("src-a"), e.txnProducer("src-b")
	e.produce(plain, "p1", "p2")
	e.begin(a)
	e.produce(a, "a1", "a2")
	e.begin(b)
	e.produce(b, "b1")
	e.produce(plain, "p3")
	e.produce(a, "a3")
	e.end(a, true)
	e.produce(b, "b2")
	e.end(b, false)
	e.produce(plain, "p4")
	e.begin(a)
	e.produce(a, "a4")
	e.end(a, false)
	e.begin(b)
	e.produce(b, "b3", "b4")
	e.end(b, true)
	e.begin(a)
	e.produce(a, "a5") // left open
	return 9           // p1 p2 a1 a2 p3 a3 p4 b3 b4
}

func TestMirrorInterleavedTransactions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
	}{
		// Produce v12+ and EndTxn v5: the epoch bumps at every EndTxn.
		{"latest destination", nil},
		// Produce v9, EndTxn v3: partitions must be added explicitly and
		// sequences continue across transactions under one epoch.
		{"kafka 3.6 destination", []kfake.Opt{kfake.MaxVersions(kversion.V3_6_0())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "interleaved", tc.opts...)
			n := interleaved(e)
			m := New(e.config())
			e.appender(m).applyAll(e.sourceBatches())

			if got := e.compareLogs(); got != 4 {
				t.Fatalf("%d markers compared, want 4", got)
			}
			srcHWM, srcLSO := offsets(t, e.srcCl, e.topic)
			dstHWM, dstLSO := offsets(t, e.dstCl, e.topic)
			if srcHWM != dstHWM || srcLSO != dstLSO {
				t.Fatalf("source hwm/lso %d/%d, destination %d/%d", srcHWM, srcLSO, dstHWM, dstLSO)
			}
			if srcLSO >= srcHWM {
				t.Fatalf("the open transaction should pin the LSO below the log end (lso %d, hwm %d)", srcLSO, srcHWM)
			}
			src, dst := committed(t, e.src, e.topic, n), committed(t, e.dst, e.topic, n)
			if !slices.Equal(src, dst) {
				t.Fatalf("read committed differs:\nsource      %v\ndestination %v", src, dst)
			}
			if open := m.Open(); len(open) != 1 || !open[0].Open || open[0].FirstOffset != srcLSO {
				t.Fatalf("open producers %+v, want one whose transaction starts at %d", open, srcLSO)
			}
		})
	}
}

func TestAbortAllReleasesLastStableOffset(t *testing.T) {
	e := newEnv(t, "abortall")
	n := interleaved(e)
	m := New(e.config())
	app := e.appender(m)
	app.applyAll(e.sourceBatches())
	ctx := testCtx(t)

	aborted, err := m.AbortAll(ctx)
	if err != nil || aborted != 1 {
		t.Fatalf("AbortAll = %d, %v; want 1, nil", aborted, err)
	}
	if len(m.Open()) != 0 {
		t.Fatalf("still open after AbortAll: %+v", m.Open())
	}
	hwm, lso := offsets(t, e.dstCl, e.topic)
	srcHWM, _ := offsets(t, e.srcCl, e.topic)
	if hwm != srcHWM+1 || lso != hwm {
		t.Fatalf("after AbortAll destination hwm %d lso %d; want hwm %d (one abort marker) and lso = hwm", hwm, lso, srcHWM+1)
	}
	// A record after the aborted transaction is readable committed: a
	// consumer gets past it to the log end.
	at, err := app.appendPlain(ctx, "after-abort")
	if err != nil {
		t.Fatal(err)
	}
	recs := committed(t, e.dst, e.topic, n+1)
	if last := recs[len(recs)-1]; last.Offset != at || last.Value != "after-abort" {
		t.Fatalf("last committed record %+v, want after-abort at %d", last, at)
	}
	if again, err := m.AbortAll(ctx); again != 0 || err != nil {
		t.Fatalf("second AbortAll = %d, %v", again, err)
	}
}

func TestRestartMidTransaction(t *testing.T) {
	e := newEnv(t, "restart")
	plain, a := e.plainProducer(), e.txnProducer("src-a")
	e.produce(plain, "p1")
	e.begin(a)
	e.produce(a, "a1")
	e.produce(a, "a2", "a3")
	e.produce(plain, "p2")
	e.produce(a, "a4")
	e.end(a, true)
	e.produce(plain, "p3")
	bs := e.sourceBatches() // p1 a1 a2a3 p2 a4 commit p3
	if len(bs) != 7 {
		t.Fatalf("%d source batches, want 7", len(bs))
	}
	ctx := testCtx(t)

	m1 := New(e.config())
	app := e.appender(m1)
	app.applyAll(bs[:2])
	persisted := m1.Open() // stale: taken before the next batch
	app.applyAll(bs[2:4])
	before := e.describe(persisted[0].TxnID)

	m2 := New(e.config())
	if err := m2.Restore(ctx, persisted); err != nil {
		t.Fatalf("restore: %v", err)
	}
	after := e.describe(persisted[0].TxnID)
	if after.state != stateOngoing || after.epoch != before.epoch || after.pid != before.pid {
		t.Fatalf("restore re-initialised the producer: before %+v, after %+v", before, after)
	}
	restored := m2.Open()
	h, _ := batch.ParseHeader(bs[2])
	if len(restored) != 1 || restored[0].NextSeq != persisted[0].NextSeq+h.RecordCount || restored[0].FirstOffset != persisted[0].FirstOffset {
		t.Fatalf("restored %+v from %+v: the next sequence must come from the destination", restored, persisted)
	}
	app.m = m2
	app.applyAll(bs[4:])

	if got := e.compareLogs(); got != 1 {
		t.Fatalf("%d markers, want exactly the source's one", got)
	}
	src, dst := committed(t, e.src, e.topic, 7), committed(t, e.dst, e.topic, 7)
	if !slices.Equal(src, dst) {
		t.Fatalf("read committed differs:\nsource      %v\ndestination %v", src, dst)
	}
}

// A restart whose state was never persisted adopts the open transaction
// instead of re-initialising its producer.
func TestRestartWithoutPersistedStateAdopts(t *testing.T) {
	e := newEnv(t, "adopt")
	a := e.txnProducer("src-a")
	e.begin(a)
	e.produce(a, "a1")
	e.produce(a, "a2")
	e.end(a, false)
	bs := e.sourceBatches()

	m1 := New(e.config())
	app := e.appender(m1)
	app.applyAll(bs[:1])
	txnID := m1.Open()[0].TxnID
	before := e.describe(txnID)

	app.m = New(e.config())
	app.applyAll(bs[1:])
	if e.compareLogs() != 1 {
		t.Fatal("want exactly one marker")
	}
	if after := e.describe(txnID); after.pid != before.pid || after.epoch < before.epoch {
		t.Fatalf("producer %+v after, %+v before", after, before)
	}
}

func TestReleaseIdle(t *testing.T) {
	e := newEnv(t, "idle")
	a, b := e.txnProducer("src-a"), e.txnProducer("src-b")
	e.begin(a)
	e.produce(a, "a1")
	e.end(a, true)
	e.begin(b)
	e.produce(b, "b1")
	now := time.Unix(1_700_000_000, 0)
	cfg := e.config()
	cfg.Now = func() time.Time { return now }
	m := New(cfg)
	e.appender(m).applyAll(e.sourceBatches())

	if n := m.ReleaseIdle(now.Add(time.Minute), time.Hour); n != 0 {
		t.Fatalf("released %d producers used a minute ago", n)
	}
	if n := m.ReleaseIdle(now.Add(2*time.Hour), time.Hour); n != 1 {
		t.Fatalf("released %d, want the closed one only", n)
	}
	if len(m.producers) != 1 || len(m.Open()) != 1 {
		t.Fatalf("left %d producers, %d open", len(m.producers), len(m.Open()))
	}
}

// After a failed append the Mapper re-reads the next sequence from the
// destination, whether or not the failed batch landed.
func TestProduceFailedResyncs(t *testing.T) {
	e := newEnv(t, "resync")
	a := e.txnProducer("src-a")
	e.begin(a)
	for _, v := range []string{"a1", "a2", "a3"} {
		e.produce(a, v)
	}
	e.end(a, true)
	bs := e.sourceBatches()
	ctx := testCtx(t)
	m := New(e.config())
	app := e.appender(m)
	app.applyAll(bs[:1])

	// a2 is never sent: its reserved sequence must be given back.
	h2, _ := batch.ParseHeader(bs[1])
	if _, _, err := m.Writer(ctx, h2); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection reset")
	if err := m.ProduceFailed(ctx, h2, lost); !errors.Is(err, lost) {
		t.Fatalf("ProduceFailed = %v, want the cause back", err)
	}
	// a2 lands, but its answer is lost: the next batch follows it.
	if err := app.apply(ctx, bs[1]); err != nil {
		t.Fatal(err)
	}
	if err := m.ProduceFailed(ctx, h2, lost); !errors.Is(err, lost) {
		t.Fatal(err)
	}
	app.applyAll(bs[2:])
	if e.compareLogs() != 1 {
		t.Fatal("want one marker")
	}
}

// A commit that landed after the last persisted state (the engine stopped
// between EndTxn and persisting) is recognised as kmirror's own.
func TestRestoreAfterUnpersistedCommit(t *testing.T) {
	e := newEnv(t, "unpersisted-commit")
	plain, a := e.plainProducer(), e.txnProducer("src-a")
	e.begin(a)
	e.produce(a, "a1")
	e.end(a, true)
	e.produce(plain, "p1")
	bs := e.sourceBatches()
	m1 := New(e.config())
	app := e.appender(m1)
	app.applyAll(bs[:1])
	persisted := m1.Open()
	app.applyAll(bs[1:2])

	m2 := New(e.config())
	if err := m2.Restore(testCtx(t), persisted); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if len(m2.Open()) != 0 {
		t.Fatalf("still open: %+v", m2.Open())
	}
	app.m = m2
	app.applyAll(bs[2:])
	if e.compareLogs() != 1 {
		t.Fatal("want one marker")
	}
}
