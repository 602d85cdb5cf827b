package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/wire"
)

const (
	testMirror = "m1"
	testPart   = int32(0)
)

// env is a source and a destination cluster with one single-partition
// topic on each.
type env struct {
	t        *testing.T
	topic    string
	src, dst *enginetest.Cluster
	srcCl    *kgo.Client
	dstCl    *kgo.Client // raw requests only, like the engine's client
	dstID    [16]byte
}

// newEnv starts the clusters; dstOpts shape the destination (for example
// an older Kafka version).
func newEnv(t *testing.T, topic string, dstOpts ...kfake.Opt) *env {
	t.Helper()
	e := &env{t: t, topic: topic}
	e.src = enginetest.NewCluster(t, "txn-test-source")
	e.dst = enginetest.NewCluster(t, "txn-test-destination", dstOpts...)
	e.src.CreateTopic(t, topic, 1, nil)
	e.dst.CreateTopic(t, topic, 1, nil)
	e.srcCl = e.src.Client(t)
	e.dstCl = e.dst.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	ctx := testCtx(t)
	_, id, err := New(Config{Topic: topic, Partition: testPart, Client: e.dstCl}).leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.dstID = id
	return e
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) config() Config {
	return Config{Mirror: testMirror, Topic: e.topic, Partition: testPart, TopicID: e.dstID, Client: e.dstCl}
}

// plainProducer is an idempotent, non-transactional source producer.
func (e *env) plainProducer() *kgo.Client {
	return e.src.Client(e.t, kgo.DefaultProduceTopic(e.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// txnProducer is a transactional source producer.
func (e *env) txnProducer(id string) *kgo.Client {
	return e.src.Client(e.t, kgo.DefaultProduceTopic(e.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(id))
}

// produce writes one batch holding values to the source partition.
func (e *env) produce(cl *kgo.Client, values ...string) {
	e.t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Partition: testPart, Key: []byte("k-" + v), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "v", Value: []byte(v)}}})
	}
	if err := cl.ProduceSync(testCtx(e.t), recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce %v: %v", values, err)
	}
}

func (e *env) begin(cl *kgo.Client) {
	e.t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) end(cl *kgo.Client, commit bool) {
	e.t.Helper()
	how := kgo.TryAbort
	if commit {
		how = kgo.TryCommit
	}
	if err := cl.EndTransaction(testCtx(e.t), how); err != nil {
		e.t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// sourceBatches reads every source batch of the partition as raw bytes.
func (e *env) sourceBatches() [][]byte {
	e.t.Helper()
	return rawBatches(e.t, e.srcCl, e.topic)
}

func rawBatches(t *testing.T, cl *kgo.Client, topic string) [][]byte {
	t.Helper()
	rbs, err := enginetest.ReadBatches(testCtx(t), cl, topic, testPart)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(rbs))
	for i, rb := range rbs {
		out[i] = encodeBatch(rb)
	}
	return out
}

// encodeBatch rebuilds the bytes of a fetched batch from its header and
// payload.
func encodeBatch(rb enginetest.RawBatch) []byte {
	h := rb.Header
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(rb.Payload))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[8:], uint32(h.Length))
	be.PutUint32(b[12:], uint32(h.LeaderEpoch))
	b[16] = byte(h.Magic)
	be.PutUint16(b[21:], uint16(h.Attributes))
	be.PutUint32(b[23:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[27:], uint64(h.BaseTimestamp))
	be.PutUint64(b[35:], uint64(h.MaxTimestamp))
	be.PutUint64(b[43:], uint64(h.ProducerID))
	be.PutUint16(b[51:], uint16(h.ProducerEpoch))
	be.PutUint32(b[53:], uint32(h.BaseSequence))
	be.PutUint32(b[57:], uint32(h.RecordCount))
	b = append(b, rb.Payload...)
	be.PutUint32(b[17:], batch.Checksum(b))
	return b
}

// appender is a test-only stand-in for the engine's runner: it replays
// source batches onto the destination one at a time at identical offsets,
// transactional and control batches through the Mapper, plain batches with
// the partition's own idempotent writer identity.
type appender struct {
	e     *env
	m     *Mapper
	plain batch.Writer
}

func (e *env) appender(m *Mapper) *appender {
	e.t.Helper()
	txnID := fmt.Sprintf("kmirror/%s/%s/%d", testMirror, e.topic, testPart)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txnID
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(testCtx(e.t), e.dstCl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		e.t.Fatalf("init plain writer: %v", err)
	}
	return &appender{e: e, m: m, plain: batch.Writer{ProducerID: resp.ProducerID, ProducerEpoch: resp.ProducerEpoch}}
}

// apply appends one source batch (it is rewritten in place).
func (a *appender) apply(ctx context.Context, b []byte) error {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return err
	}
	switch {
	case h.IsControl():
		commit, err := ParseControl(b)
		if err != nil {
			return err
		}
		return a.m.End(ctx, h, commit, h.BaseOffset)
	case h.IsTransactional():
		w, txnID, err := a.m.Writer(ctx, h)
		if err != nil {
			return err
		}
		batch.Transform(b, w)
		if err := a.e.rawProduce(ctx, b, h.BaseOffset, &txnID); err != nil {
			return a.m.ProduceFailed(ctx, h, err)
		}
		return nil
	default:
		batch.Transform(b, a.plain)
		a.plain.BaseSequence = nextSequence(a.plain.BaseSequence, h.LastOffsetDelta+1)
		return a.e.rawProduce(ctx, b, h.BaseOffset, nil)
	}
}

func (a *appender) applyAll(bs [][]byte) {
	a.e.t.Helper()
	for _, b := range bs {
		if err := a.apply(testCtx(a.e.t), b); err != nil {
			a.e.t.Fatalf("replay: %v", err)
		}
	}
}

// appendPlain writes one fresh record with the plain writer identity.
func (a *appender) appendPlain(ctx context.Context, value string) (int64, error) {
	b, err := batch.Build(kgo.NoCompression(), time.Now().UnixMilli(), a.plain, []batch.Record{{Value: []byte(value)}})
	if err != nil {
		return 0, err
	}
	m := New(a.e.config())
	end, err := m.logEnd(ctx)
	if err != nil {
		return 0, err
	}
	a.plain.BaseSequence = nextSequence(a.plain.BaseSequence, 1)
	return end, a.e.rawProduce(ctx, b, end, nil)
}

// rawProduce sends one batch to the destination leader and checks it
// landed at want.
func (e *env) rawProduce(ctx context.Context, b []byte, want int64, txnID *string) error {
	leader, _, err := New(e.config()).leader(ctx)
	if err != nil {
		return err
	}
	resp, err := e.dstCl.Broker(int(leader)).Request(ctx, wire.ProduceRequest(e.topic, e.dstID, testPart, b, 10*time.Second, txnID))
	if err != nil {
		return err
	}
	base, err := wire.ProduceAnswer(resp)
	if err != nil {
		return fmt.Errorf("produce at %d: %w", want, err)
	}
	if base != want {
		return fmt.Errorf("produce landed at %d, want %d", base, want)
	}
	return nil
}

// compareLogs checks that both partitions hold the same batches at the same
// offsets: data batches byte for byte (payload, counts, timestamps), control
// batches by offset and marker type. It returns the number of control
// batches.
func (e *env) compareLogs() int {
	e.t.Helper()
	src, dst := rawBatches(e.t, e.srcCl, e.topic), rawBatches(e.t, e.dstCl, e.topic)
	if len(src) != len(dst) {
		e.t.Fatalf("source has %d batches, destination %d", len(src), len(dst))
	}
	controls := 0
	for i := range src {
		sh, _ := batch.ParseHeader(src[i])
		dh, _ := batch.ParseHeader(dst[i])
		if sh.BaseOffset != dh.BaseOffset || sh.LastOffsetDelta != dh.LastOffsetDelta || sh.RecordCount != dh.RecordCount ||
			sh.Attributes&^batch.AttrLogAppendTime != dh.Attributes {
			e.t.Fatalf("batch %d: source %+v, destination %+v", i, sh, dh)
		}
		if sh.IsControl() {
			controls++
			sc, err1 := ParseControl(src[i])
			dc, err2 := ParseControl(dst[i])
			if err := errors.Join(err1, err2); err != nil || sc != dc {
				e.t.Fatalf("marker at %d: source commit=%v, destination commit=%v (%v)", sh.BaseOffset, sc, dc, err)
			}
			continue
		}
		if sh.BaseTimestamp != dh.BaseTimestamp || sh.MaxTimestamp != dh.MaxTimestamp ||
			string(src[i][batch.HeaderSize:]) != string(dst[i][batch.HeaderSize:]) {
			e.t.Fatalf("data batch at %d differs", sh.BaseOffset)
		}
	}
	return controls
}

// committed reads n records with a READ_COMMITTED consumer.
func committed(t *testing.T, c *enginetest.Cluster, topic string, n int) []enginetest.Record {
	t.Helper()
	cl := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {testPart: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := testCtx(t)
	var out []enginetest.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read committed on %s: %d of %d records: %v", c.ID, len(out), n, err)
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			out = append(out, enginetest.Record{Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Timestamp: r.Timestamp.UnixMilli(),
				Headers: fmt.Sprint(r.Headers)})
		}
	}
	return out
}

// offsets returns a partition's high watermark and last stable offset.
func offsets(t *testing.T, cl *kgo.Client, topic string) (hwm, lso int64) {
	t.Helper()
	get := func(isolation int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = testPart
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatal(err)
		}
		return p.Offset
	}
	return get(0), get(1)
}

// describe returns the destination coordinator's view of txnID.
func (e *env) describe(txnID string) txnDesc {
	e.t.Helper()
	d, err := New(e.config()).describeTxn(testCtx(e.t), txnID)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}
