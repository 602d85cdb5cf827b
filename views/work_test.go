package views

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
)

// workSnapshot has orders/0 and orders/1 quarantining for a rebuild, and
// orders/2 waiting for its turn.
func workSnapshot() engine.Snapshot {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	taken := t0.Add(40 * time.Second)
	part := func(p int32, done, total int64, eta time.Duration) engine.PartitionSnapshot {
		return engine.PartitionSnapshot{
			Mirror: "a-to-b", Topic: "orders", Partition: p, Owner: "east-1", State: partition.LogAlignment,
			SourceLogStart: 0, SourceHWM: 2_000, DestLogEnd: 2_400, SourceEpoch: 3, SourceLeader: 1, LastOffset: 1_999, LastEpoch: 3,
			Progress: &engine.Progress{Kind: engine.WorkQuarantine, Step: "orders.kmirror-quarantine-20250301T120000.000-a-to-b",
				Done: done, Total: total, StartedAt: t0, ETA: eta},
		}
	}
	return engine.Snapshot{
		Taken: taken, Instance: "east-1",
		Destination: engine.ClusterInfo{ID: "dst", Bootstrap: []string{"b-1:9092"}},
		Mirrors: []engine.MirrorSnapshot{{Name: "a-to-b", Source: engine.ClusterInfo{ID: "src"}, Partitions: []engine.PartitionSnapshot{
			part(0, 320, 400, 10*time.Second),
			part(1, 100, 400, 2*time.Minute),
			part(2, 0, 400, -1),
		}}},
	}
}

func TestDetailShowsLongWork(t *testing.T) {
	for _, w := range []int{80, 160} {
		v := NewDetail(testSkin(), keymap.New(false))
		v.SetSize(w, 30)
		v.SetSnapshot(workSnapshot())
		v.Show(PartKey{Mirror: "a-to-b", Topic: "orders", Partition: 0})
		out := ansi.Strip(v.View())
		for _, want := range []string{"rebuild: copying destination-only records to", "orders.kmirror-quarantine-20250301T120000.000-a-to-b", " 80%  ETA 10s", "320 of 400 offsets, started 12:00:00 UTC (40s ago)"} {
			if !strings.Contains(out, want) {
				t.Errorf("detail at %d columns lacks %q:\n%s", w, want, out)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if ansi.StringWidth(l) > w {
				t.Errorf("line wider than %d: %q", w, l)
			}
		}
		t.Run(itoa(w), func(t *testing.T) { golden.RequireEqual(t, out) })
	}
	v := NewDetail(testSkin(), keymap.New(false))
	v.SetSize(120, 30)
	v.SetSnapshot(workSnapshot())
	v.Show(PartKey{Mirror: "a-to-b", Topic: "orders", Partition: 2})
	if out := ansi.Strip(v.View()); !strings.Contains(out, "  0%  ETA unknown") {
		t.Errorf("work not started yet:\n%s", out)
	}
}

// TestHeaderShowsLongWork: one compact line sums a topic's partitions,
// its ETA from their rate since the earliest start (420 of 1,200 in 40s:
// the 780 left take 1m14s).
func TestHeaderShowsLongWork(t *testing.T) {
	skin := testSkin()
	snap := workSnapshot()
	sum := Summarize(&snap)
	if len(sum.Work) != 1 || sum.Work[0].Done != 420 || sum.Work[0].Total != 1200 || sum.Work[0].Partitions != 3 {
		t.Fatalf("summary of the work: %+v", sum.Work)
	}
	h := NewHeader(skin)
	h.SetSize(100)
	h.SetSnapshot(snap, sum)
	out := ansi.Strip(h.View())
	lines := strings.Split(out, "\n")
	last := strings.TrimRight(lines[len(lines)-1], " ")
	if !strings.HasPrefix(last, "rebuilding orders: quarantine (3 partitions) ") || !strings.HasSuffix(last, " 35%  ETA 1m14s") {
		t.Fatalf("header's work line %q:\n%s", last, out)
	}
	if h.Height() != len(lines) {
		t.Fatalf("height %d, view has %d lines", h.Height(), len(lines))
	}
	snap.Mirrors[0].Partitions = snap.Mirrors[0].Partitions[:0]
	idle := Summarize(&snap)
	h.SetSnapshot(snap, idle)
	if strings.Contains(ansi.Strip(h.View()), "rebuilding") {
		t.Fatal("the work line stays without work")
	}
}
