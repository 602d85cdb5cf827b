package views

import (
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// Summary aggregates partitions for the header and the mirrors view. It is
// computed once per snapshot, not per frame: with ten thousand partitions the
// difference is visible.
type Summary struct {
	Partitions    int
	Counts        map[partition.State]int
	TotalLag      int64
	WorstLagTime  time.Duration
	WorstAt       string // "mirror/topic/partition" of the worst lag time
	BytesPerSec   float64
	BatchesPerSec float64
}

func (s *Summary) add(p *engine.PartitionSnapshot) {
	if s.Counts == nil {
		s.Counts = map[partition.State]int{}
	}
	s.Partitions++
	s.Counts[p.State]++
	s.TotalLag += p.Lag
	if p.LagTime > s.WorstLagTime {
		s.WorstLagTime = p.LagTime
		s.WorstAt = p.Mirror + "/" + p.Topic + "/" + itoa32(p.Partition)
	}
	s.BytesPerSec += p.BytesPerSec
	s.BatchesPerSec += p.BatchesPerSec
}

// SummarizeMirror aggregates one mirror.
func SummarizeMirror(m *engine.MirrorSnapshot) Summary {
	var s Summary
	for i := range m.Partitions {
		s.add(&m.Partitions[i])
	}
	return s
}

// Summarize aggregates every mirror of a snapshot.
func Summarize(snap *engine.Snapshot) Summary {
	var s Summary
	for i := range snap.Mirrors {
		for j := range snap.Mirrors[i].Partitions {
			s.add(&snap.Mirrors[i].Partitions[j])
		}
	}
	return s
}

// stateItems renders the non-zero state counts in display order, each
// label in its state style: ["MIRRORING 12", "PAUSED 3", "FAILED 1"].
func stateItems(skin *Skin, counts map[partition.State]int) []string {
	var items []string
	for _, st := range partition.States {
		if n := counts[st]; n > 0 {
			items = append(items, skin.RenderState(st)+" "+itoa(n))
		}
	}
	return items
}
