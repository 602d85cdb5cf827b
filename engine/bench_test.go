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
