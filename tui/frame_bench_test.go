package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/tui/tuitest"
)

// BenchmarkFrame is one tick of the console at 1,000 and 10,000 partitions:
// a snapshot arrives (summaries, catch-up estimates, topic aggregation and
// the partitions index are rebuilt) and the root model draws the frame. The
// goal is 16 ms at 10,000 partitions (a frame at 60 Hz); it is reported as
// ns/frame, not asserted, since CI machines vary.
func BenchmarkFrame(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, sc := range []Screen{ScreenTopics, ScreenPartitions} {
			b.Run(fmt.Sprintf("%d/%s", n, sc), func(b *testing.B) {
				m := largeFixture(b, 160, 48, Options{})
				m.screen, m.picked = sc, true
				// Two snapshots with different offsets, taken a tick apart,
				// so every frame has estimates to compute.
				snaps := [2]engine.Snapshot{tuitest.Big(n), tuitest.Big(n)}
				for i := range snaps[1].Mirrors[0].Partitions {
					p := &snaps[1].Mirrors[0].Partitions[i]
					p.DestLogEnd += 5
					p.Lag = max(p.Lag-5, 0)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					s := snaps[i%2]
					s.Taken = tuitest.T0.Add(time.Duration(i) * time.Second)
					m.Update(snapshotMsg{snap: s})
					_ = m.View()
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			})
		}
	}
}

// BenchmarkView is the frame alone, as drawn between snapshots (a key, the
// wheel): it must not depend on the number of partitions.
func BenchmarkView(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, sc := range []Screen{ScreenTopics, ScreenPartitions} {
			b.Run(fmt.Sprintf("%d/%s", n, sc), func(b *testing.B) {
				m := largeFixture(b, 160, 48, Options{})
				m.screen, m.picked = sc, true
				m.Update(snapshotMsg{snap: tuitest.Big(n)})
				b.ReportAllocs()
				for b.Loop() {
					_ = m.View()
				}
			})
		}
	}
}
