// Package states waits, in tests, until the partitions an engine runs are
// in a state. It is apart from enginetest because it imports the engine,
// and enginetest must not: the engine's own packages test with it.
package states

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// Snapshotter is what publishes partitions: *engine.Engine, *engine.Observer.
type Snapshotter interface{ Snapshot() engine.Snapshot }

// Select picks the partitions to wait for.
type Select struct {
	Mirror string // "" any
	Topic  string // "" any
	// N is how many partitions must be picked, so that a wait does not end
	// while some have yet to start; 0 means at least one.
	N int
}

// Wait waits up to timeout until the partitions of s that sel picks are in
// st, and returns them as the last snapshot showed them.
func Wait(t testing.TB, timeout time.Duration, s Snapshotter, sel Select, st partition.State) []engine.PartitionSnapshot {
	t.Helper()
	var got []engine.PartitionSnapshot
	enginetest.Wait(t, timeout, func() (bool, string) {
		got = got[:0]
		in := 0
		var b strings.Builder
		for _, m := range s.Snapshot().Mirrors {
			if sel.Mirror != "" && m.Name != sel.Mirror {
				continue
			}
			for _, p := range m.Partitions {
				if sel.Topic != "" && p.Topic != sel.Topic {
					continue
				}
				got = append(got, p)
				if p.State == st {
					in++
				}
				fmt.Fprintf(&b, "%s/%d %s", p.Topic, p.Partition, p.State)
				if p.Error != "" {
					fmt.Fprintf(&b, " %q", p.Error)
				}
				b.WriteString("; ")
			}
		}
		want := sel.N
		if want == 0 {
			want = max(1, len(got))
		}
		return in == len(got) && len(got) == want, fmt.Sprintf("%d of %d partitions %s (%+v): %s", in, want, st, sel, b.String())
	})
	return got
}
