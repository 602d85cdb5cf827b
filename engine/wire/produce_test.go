package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const maxInFlight = 5

// pipeline issues one Produce per batch to c with up to inFlight requests
// outstanding, waiting on the oldest when the window is full, and returns
// the base offsets in issue order.
func pipeline(ctx context.Context, c *Conn, info partitionInfo, topic string, batches [][]byte, inFlight int) ([]int64, error) {
	var (
		window  []*Pending
		offsets []int64
		peak    int
	)
	waitOldest := func() error {
		raw, err := window[0].Wait(ctx)
		window = window[1:]
		if err != nil {
			return err
		}
		off, err := ProduceAnswer(raw)
		if err != nil {
			return fmt.Errorf("batch %d: %w", len(offsets), err)
		}
		offsets = append(offsets, off)
		return nil
	}
	for _, b := range batches {
		if len(window) == inFlight {
			if err := waitOldest(); err != nil {
				return offsets, err
			}
		}
		p, err := c.Issue(ProduceRequest(topic, info.topicID, 0, b, 10*time.Second, nil))
		if err != nil {
			return offsets, err
		}
		window = append(window, p)
		peak = max(peak, len(window))
	}
	for len(window) > 0 {
		if err := waitOldest(); err != nil {
			return offsets, err
		}
	}
	if len(batches) >= inFlight && peak != inFlight {
		return offsets, fmt.Errorf("peak in flight %d, want %d", peak, inFlight)
	}
	return offsets, nil
}

func TestPipelinedIdempotentProduce(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	boot := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})
	info, _, err := metadata(ctx, boot, testTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := initTxnProducer(ctx, boot, info.brokers, "kmirror/test/t/0")
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	leader := dialTest(t, ctx, info.leaderAddr, Options{})

	const n = 50
	ts := time.Now().UnixMilli()
	batches := make([][]byte, n)
	for i := range batches {
		batches[i] = buildBatch(pid, epoch, int32(i), ts+int64(i), fmt.Appendf(nil, "rec-%d", i))
	}
	offsets, err := pipeline(ctx, leader, info, testTopic, batches, maxInFlight)
	if err != nil {
		t.Fatalf("pipelined produce: %v (offsets so far %v)", err, offsets)
	}
	for i, off := range offsets {
		if off != int64(i) {
			t.Fatalf("batch %d: base offset %d, want %d (all: %v)", i, off, i, offsets)
		}
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	for i, r := range got {
		want := fmt.Sprintf("rec-%d", i)
		if r.Offset != int64(i) || string(r.Value) != want || r.ProducerID != pid || r.ProducerEpoch != epoch {
			t.Fatalf("record %d: offset %d value %q pid %d/%d; want offset %d value %q pid %d/%d",
				i, r.Offset, r.Value, r.ProducerID, r.ProducerEpoch, i, want, pid, epoch)
		}
	}
}

// TestProduceOutOfOrderIsRejected shows that the pipelining test would
// notice reordering: kfake answers OUT_OF_ORDER_SEQUENCE_NUMBER when a
// producer's sequence arrives out of order.
func TestProduceOutOfOrderIsRejected(t *testing.T) {
	cluster := newCluster(t, kfake.SeedTopics(1, "u"))
	ctx := testCtx(t)
	boot := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})
	info, _, err := metadata(ctx, boot, "u", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := dialTest(t, ctx, info.leaderAddr, Options{})

	const pid, epoch = 4242, 0
	ts := time.Now().UnixMilli()
	for _, step := range []struct {
		seq  int32
		want error
	}{
		{0, nil},
		{2, kerr.OutOfOrderSequenceNumber}, // 1 skipped, as if two requests swapped
		{1, nil},
		{2, nil},
	} {
		raw, err := leader.Request(ctx, ProduceRequest("u", info.topicID, 0, buildBatch(pid, epoch, step.seq, ts, []byte("x")), 10*time.Second, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ProduceAnswer(raw); !errors.Is(err, step.want) {
			t.Fatalf("seq %d: err = %v, want %v", step.seq, err, step.want)
		}
	}
}

// BenchmarkPipelinedProduce produces one-record idempotent batches to one
// partition with 1 and with 5 requests in flight on a single connection.
func BenchmarkPipelinedProduce(b *testing.B) {
	for _, inFlight := range []int{1, maxInFlight} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			cluster := newCluster(b)
			ctx := testCtx(b)
			boot := dialTest(b, ctx, cluster.ListenAddrs()[0], Options{})
			info, _, err := metadata(ctx, boot, testTopic, 0)
			if err != nil {
				b.Fatal(err)
			}
			leader := dialTest(b, ctx, info.leaderAddr, Options{})
			ip := kmsg.NewPtrInitProducerIDRequest() // idempotent: any broker, fresh pid
			raw, err := boot.Request(ctx, ip)
			if err != nil {
				b.Fatal(err)
			}
			ipResp := raw.(*kmsg.InitProducerIDResponse)
			if err := kerr.ErrorForCode(ipResp.ErrorCode); err != nil {
				b.Fatalf("init producer id: %v", err)
			}
			pid, epoch := ipResp.ProducerID, ipResp.ProducerEpoch

			batches := make([][]byte, b.N)
			ts := time.Now().UnixMilli()
			for i := range batches {
				batches[i] = buildBatch(pid, epoch, int32(i), ts, []byte("0123456789abcdef0123456789abcdef"))
			}
			b.ResetTimer()
			offsets, err := pipeline(ctx, leader, info, testTopic, batches, inFlight)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if len(offsets) != b.N || offsets[b.N-1] != int64(b.N-1) {
				b.Fatalf("got %d offsets, last %v", len(offsets), offsets[len(offsets)-1:])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
		})
	}
}
