package engine_test

import (
	"fmt"
	"testing"
	"time"

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
