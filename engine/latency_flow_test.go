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

// TestMirrorLatencyCounted: every batch the destination acknowledged is
// counted once in the destination Produce histogram, and every fetched
// batch in the engine histogram, with positive durations.
func TestMirrorLatencyCounted(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "lat", 3, nil)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "lat", 3, 300, "a")
	e.startMirror("lat")
	e.waitCaughtUp("lat")
	// The last acknowledgements may still be on their way to the runners
	// when the destination already holds the records.
	var m engine.MirrorSnapshot
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		m = e.eng.Snapshot().Mirrors[0]
		var batches uint64
		for _, p := range m.Partitions {
			batches += uint64(p.BatchesCopied)
		}
		prod, eng := m.Latency.DestinationProduce.Total(), m.Latency.Engine.Total()
		return batches > 0 && prod == batches && eng == batches,
			fmt.Sprintf("histograms count %d Produce round trips and %d engine times, want the %d batches copied", prod, eng, batches)
	})
	prod, eng := m.Latency.DestinationProduce, m.Latency.Engine
	if prod.Quantile(0.5) <= 0 || eng.Quantile(0.5) <= 0 || prod.Quantile(1) < prod.Quantile(0.5) {
		t.Fatalf("quantiles: produce p50 %v max %v, engine p50 %v", prod.Quantile(0.5), prod.Quantile(1), eng.Quantile(0.5))
	}
}

// TestLatencyBlamesThrottleOnEngine: a throttled mirror waits before it
// sends, with acknowledgements already in; those waits are the engine's
// (fetch answer → Produce sent), never the destination's round trip,
// which is timed to the arrival of the answer, not to when the runner
// next looks.
func TestLatencyBlamesThrottleOnEngine(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "slow", 1, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("none", true)...)
	value := make([]byte, 1000)
	for range 20 { // one batch each
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "slow", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const rate = 10_000 // bytes per second: about 100ms per batch
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.ThrottleRate = rate }, "slow")
	e.waitCaughtUp("slow")
	var m engine.MirrorSnapshot
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		m = e.eng.Snapshot().Mirrors[0]
		n := m.Latency.DestinationProduce.Total()
		return n >= 20, fmt.Sprintf("%d round trips counted", n)
	})
	perBatch := time.Second * 1000 / rate
	if p50 := m.Latency.DestinationProduce.Quantile(0.5); p50 >= perBatch/2 {
		t.Errorf("destination Produce round trip p50 %v: the throttle's %v per batch was counted as the destination's", p50, perBatch)
	}
	if p99 := m.Latency.Engine.Quantile(0.99); p99 < perBatch {
		t.Errorf("engine time p99 %v, want the throttle's waits (%v per batch) in it", p99, perBatch)
	}
}
