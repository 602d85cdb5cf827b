package views

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

var etaT0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func TestEstimate(t *testing.T) {
	at := func(s int) int64 { return etaT0.Add(time.Duration(s) * time.Second).UnixNano() }
	for _, tc := range []struct {
		name     string
		old, cur etaSample
		want     ETA
	}{
		{"no lag", etaSample{at(0), 100, 50}, etaSample{at(10), 150, 0}, ETA{Kind: ETASynced}},
		{"one sample", etaSample{at(0), 100, 50}, etaSample{at(0), 100, 50}, ETA{Kind: ETAUnknown}},
		// 1,000 lag gone in 10 s: 100/s, 4,000 left is 40 s.
		{"catching up", etaSample{at(0), 0, 5_000}, etaSample{at(10), 3_000, 4_000}, ETA{Kind: ETACatching, In: 40 * time.Second}},
		{"keeping pace", etaSample{at(0), 0, 500}, etaSample{at(10), 2_000, 500}, ETA{Kind: ETAGrowing, Growing: 1}},
		{"falling behind", etaSample{at(0), 0, 500}, etaSample{at(10), 2_000, 900}, ETA{Kind: ETAGrowing, Growing: 1}},
		{"destination still", etaSample{at(0), 700, 500}, etaSample{at(10), 700, 600}, ETA{Kind: ETAStalled, Stalled: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := estimate(tc.old, tc.cur); got != tc.want {
				t.Errorf("estimate = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestETAText(t *testing.T) {
	for _, tc := range []struct {
		eta  ETA
		want string
	}{
		{ETA{}, "—"},
		{ETA{Kind: ETASynced}, "—"},
		{ETA{Kind: ETACatching, In: 90 * time.Second}, "1m30s"},
		{ETA{Kind: ETAGrowing}, "∞"},
		{ETA{Kind: ETAStalled}, "stalled"},
	} {
		if got := tc.eta.Text(); got != tc.want {
			t.Errorf("%v: Text = %q, want %q", tc.eta.Kind, got, tc.want)
		}
	}
}

// etaSnap is one mirror "m" at etaT0+sec with partitions given as
// (topic, partition, dest, lag, state).
type etaPart struct {
	topic string
	p     int32
	dest  int64
	lag   int64
	state partition.State
}

func etaSnap(sec int, ps ...etaPart) *engine.Snapshot {
	m := engine.MirrorSnapshot{Name: "m"}
	for _, p := range ps {
		m.Partitions = append(m.Partitions, engine.PartitionSnapshot{
			Mirror: "m", Topic: p.topic, Partition: p.p, State: p.state,
			SourceHWM: p.dest + p.lag, DestLogEnd: p.dest, Lag: p.lag,
		})
	}
	return &engine.Snapshot{Taken: etaT0.Add(time.Duration(sec) * time.Second), Mirrors: []engine.MirrorSnapshot{m}}
}

func TestCatchupObserve(t *testing.T) {
	const M = partition.Mirroring
	c := NewCatchup()
	at0 := []etaPart{{"a", 0, 0, 1_000, M}, {"a", 1, 0, 100, M}, {"b", 0, 50, 10, M}, {"c", 0, 0, 40, partition.Paused}}
	first := c.Observe(etaSnap(0, at0...))
	if e := first.Partition(PartKey{"m", "a", 0}); e.Kind != ETAUnknown {
		t.Fatalf("one snapshot gives %v, want unknown", e.Kind)
	}
	// The same snapshot polled again is not a second sample.
	c.Observe(etaSnap(0, at0...))
	e := c.Observe(etaSnap(10,
		etaPart{"a", 0, 500, 800, M}, etaPart{"a", 1, 100, 50, M}, etaPart{"b", 0, 50, 20, M}, etaPart{"c", 0, 0, 40, partition.Paused}))
	if got := e.Partition(PartKey{"m", "a", 0}); got.Kind != ETACatching || got.In != 40*time.Second {
		t.Errorf("a/0 = %+v, want catching up in 40s (800 at 20/s)", got)
	}
	if got := e.Partition(PartKey{"m", "a", 1}); got.Kind != ETACatching || got.In != 10*time.Second {
		t.Errorf("a/1 = %+v, want catching up in 10s", got)
	}
	// A topic is in sync when its slowest partition is.
	if got := e.Topic("m", "a"); got.Kind != ETACatching || got.In != 40*time.Second {
		t.Errorf("topic a = %+v, want 40s", got)
	}
	if got := e.Topic("m", "b"); got.Kind != ETAStalled || got.Stalled != 1 {
		t.Errorf("topic b = %+v, want stalled", got)
	}
	if got := e.Topic("m", "c"); got.Kind != ETAUnknown {
		t.Errorf("paused topic c = %+v, want unknown: a paused lag is not a stall", got)
	}
	synced := c.Observe(etaSnap(20, etaPart{"a", 0, 900, 0, M}, etaPart{"a", 1, 150, 0, M}, etaPart{"c", 0, 0, 40, partition.Paused}))
	if got := synced.Topic("m", "a"); got.Kind != ETASynced {
		t.Errorf("topic a without lag = %+v, want synced", got)
	}
	if got := synced.Mirror("m"); got.Kind != ETAUnknown {
		t.Errorf("mirror with a paused lag = %+v, want unknown, never in sync", got)
	}
	if got := e.Mirror("m"); got.Kind != ETAStalled || got.Stalled != 1 {
		t.Errorf("mirror = %+v, want stalled by one partition", got)
	}

	// Partitions gone from the snapshot are forgotten.
	c.Observe(etaSnap(30, etaPart{"a", 0, 900, 400, M}))
	if len(c.tracks) != 1 {
		t.Errorf("%d tracks kept, want 1", len(c.tracks))
	}
	var nilETAs *ETAs
	if nilETAs.Mirror("m").Kind != ETAUnknown {
		t.Error("nil ETAs must answer unknown")
	}
}

// TestCatchupWindow checks only recent samples decide: a fast start a
// minute ago does not make a stalled partition look like it catches up.
func TestCatchupWindow(t *testing.T) {
	c := NewCatchup()
	c.Observe(etaSnap(0, etaPart{"a", 0, 0, 10_000, partition.Mirroring}))
	c.Observe(etaSnap(5, etaPart{"a", 0, 5_000, 5_000, partition.Mirroring}))
	var e *ETAs
	for s := 40; s <= 80; s += 10 {
		e = c.Observe(etaSnap(s, etaPart{"a", 0, 5_000, 5_000, partition.Mirroring}))
	}
	if got := e.Partition(PartKey{"m", "a", 0}); got.Kind != ETAStalled {
		t.Errorf("got %+v, want stalled: the fast samples are older than %s", got, etaWindow)
	}
}

// TestCatchupRebuild checks a destination that went backwards (truncated,
// rebuilt) restarts the history instead of reading as a stall.
func TestCatchupRebuild(t *testing.T) {
	c := NewCatchup()
	c.Observe(etaSnap(0, etaPart{"a", 0, 9_000, 100, partition.Mirroring}))
	e := c.Observe(etaSnap(10, etaPart{"a", 0, 0, 9_100, partition.LogAlignment}))
	if got := e.Partition(PartKey{"m", "a", 0}); got.Kind != ETAUnknown {
		t.Errorf("after a truncation got %+v, want unknown", got)
	}
	e = c.Observe(etaSnap(20, etaPart{"a", 0, 4_550, 4_550, partition.Mirroring}))
	if got := e.Partition(PartKey{"m", "a", 0}); got.Kind != ETACatching || got.In != 10*time.Second {
		t.Errorf("got %+v, want 10s", got)
	}
}
