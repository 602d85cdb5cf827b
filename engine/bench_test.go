package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
)

// BenchmarkPartitionInFlight measures one partition's mirroring rate with
// one batch in flight against five: the same pre-loaded source partition is
// copied to a fresh destination each iteration.
func BenchmarkPartitionInFlight(b *testing.B) {
	for _, inflight := range []int{1, 5} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			src, _ := enginetest.Pair(b)
			src.CreateTopic(b, "load", 1, nil)
			cl := src.Client(b, enginetest.ProducerOpts("zstd", true)...)
			cl2 := src.Client(b, append(enginetest.ProducerOpts("zstd", true), kgo.ProducerBatchMaxBytes(16<<10))...)
			_ = cl
			for i := range 20 {
				enginetest.Produce(b, cl2, "load", 1, 2000, fmt.Sprintf("r%d", i))
			}
			srcEnd, err := enginetest.Ends(context.Background(), cl2, "load")
			if err != nil {
				b.Fatal(err)
			}
			var batches int64
			var total time.Duration
			for b.Loop() {
				dst := enginetest.NewCluster(b, fmt.Sprintf("bench-dst-%d", time.Now().UnixNano()))
				eng, err := engine.New(context.Background(), engine.Config{Destination: dst.Addrs()})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := eng.StartMirror(context.Background(), engine.MirrorConfig{Name: "bench", SourceBootstrap: src.Addrs(), Topics: []string{"load"}, MaxInFlight: inflight}); err != nil {
					b.Fatal(err)
				}
				dcl := dst.Client(b)
				enginetest.Wait(b, 120*time.Second, func() (bool, string) {
					ends, err := enginetest.Ends(context.Background(), dcl, "load")
					return err == nil && len(ends) == 1 && ends[0] == srcEnd[0], fmt.Sprintf("ends %v", ends)
				})
				total += time.Since(start)
				batches += eng.Snapshot().Mirrors[0].Partitions[0].BatchesCopied
				eng.Close()
				dst.Close()
			}
			b.ReportMetric(float64(batches)/total.Seconds(), "batches/s")
		})
	}
}

// BenchmarkThrottledMirror reports the rate a throttled mirror achieves
// against its mirror.replication.throttled.rate (after the one-second
// burst the bucket starts with).
func BenchmarkThrottledMirror(b *testing.B) {
	const rate = 256 << 10
	src, _ := enginetest.Pair(b)
	src.CreateTopic(b, "paced", 2, nil)
	cl := src.Client(b, enginetest.ProducerOpts("none", true)...)
	for i := range 8 {
		enginetest.Produce(b, cl, "paced", 2, 1000, fmt.Sprintf("r%d", i))
	}
	var ratio float64
	for b.Loop() {
		dst := enginetest.NewCluster(b, fmt.Sprintf("throttle-dst-%d", time.Now().UnixNano()))
		eng, err := engine.New(context.Background(), engine.Config{Destination: dst.Addrs()})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := eng.StartMirror(context.Background(), engine.MirrorConfig{Name: "paced", SourceBootstrap: src.Addrs(), Topics: []string{"paced"}, ThrottleRate: rate}); err != nil {
			b.Fatal(err)
		}
		var copied int64
		enginetest.Wait(b, 120*time.Second, func() (bool, string) {
			copied = 0
			lag := int64(0)
			for _, p := range eng.Snapshot().Mirrors[0].Partitions {
				copied += p.BytesCopied
				lag += p.Lag
			}
			return lag == 0 && copied > 0, fmt.Sprintf("lag %d", lag)
		})
		ratio = float64(copied-rate) / time.Since(start).Seconds() / rate
		eng.Close()
		dst.Close()
	}
	b.ReportMetric(ratio, "achieved/configured")
}
