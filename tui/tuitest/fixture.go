// Package tuitest holds deterministic data and a fake engine for the
// console's tests: a fixed snapshot (fixed times, no wall clock) and a
// Controller that simulates the partition state changes commands cause.
package tuitest

import (
	"fmt"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// T0 is the time of the fixture snapshot. Everything rendered from the
// fixture is relative to it, never to the wall clock.
var T0 = time.Date(2025, 3, 14, 12, 0, 5, 0, time.UTC)

// Clock returns T0 plus d: tests inject it as the console's clock.
func Clock(d time.Duration) func() time.Time { return func() time.Time { return T0.Add(d) } }

// Mirror names used by the fixture.
const (
	MirrorAB = "a-to-b"
	MirrorCB = "c-to-b"
)

func healthy(mirror, topic string, p int32, hwm, lag int64) engine.PartitionSnapshot {
	return engine.PartitionSnapshot{
		Mirror: mirror, Topic: topic, Partition: p, Owner: "kmirror-1",
		State: partition.Mirroring, PrevState: partition.Unknown,
		SourceLogStart: 0, SourceHWM: hwm, DestLogEnd: hwm - lag, Lag: lag,
		LagTime:     time.Duration(lag) * 20 * time.Millisecond,
		SourceEpoch: 7, SourceLeader: 1 + p%3, LastOffset: hwm - lag - 1, LastEpoch: 7,
		Lineage:     []engine.EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 7, StartOffset: 100}},
		WriterEpoch: 2,
		BytesPerSec: 250_000, BatchesPerSec: 40,
		BytesCopied: hwm * 512, BatchesCopied: hwm / 10,
	}
}

func with(p engine.PartitionSnapshot, f func(*engine.PartitionSnapshot)) engine.PartitionSnapshot {
	f(&p)
	return p
}

// Snapshot returns the fixture: two mirrors into one destination, with
// every partition state present at least once.
func Snapshot() engine.Snapshot {
	ab := []engine.PartitionSnapshot{
		healthy(MirrorAB, "audit-log", 0, 88_210, 0),
		healthy(MirrorAB, "audit-log", 1, 87_954, 3),
		with(healthy(MirrorAB, "inventory", 0, 5_120, 0), func(p *engine.PartitionSnapshot) {
			p.State = partition.ULERecovery
			p.Error = "source unclean leader election: epoch 9 starts at 5100, below LME 8:5119"
			p.BytesPerSec, p.BatchesPerSec = 0, 0
		}),
		with(healthy(MirrorAB, "inventory", 1, -1, 0), func(p *engine.PartitionSnapshot) {
			p.State, p.Owner = partition.Unknown, ""
			p.SourceLogStart, p.DestLogEnd, p.Lag, p.LagTime = -1, -1, 0, 0
			p.SourceEpoch, p.SourceLeader, p.LastOffset, p.LastEpoch = -1, -1, -1, -1
			p.Lineage, p.WriterEpoch = nil, 0
			p.BytesPerSec, p.BatchesPerSec, p.BytesCopied, p.BatchesCopied = 0, 0, 0, 0
		}),
		with(healthy(MirrorAB, "inventory", 2, 9_000, 0), func(p *engine.PartitionSnapshot) {
			p.State, p.PrevState, p.Attempt, p.Retryable = partition.Failed, partition.LogAlignment, 1, false
			p.Error = "destination diverged at offset 8750 (epoch 6): destination holds records the source does not"
			p.DestLogEnd, p.Lag = 9_012, 0
			p.BytesPerSec, p.BatchesPerSec = 0, 0
		}),
		healthy(MirrorAB, "orders", 0, 1_520_400, 12),
		healthy(MirrorAB, "orders", 1, 1_519_877, 0),
		healthy(MirrorAB, "orders", 2, 1_522_003, 250),
		with(healthy(MirrorAB, "orders", 3, 1_520_120, 4_200), func(p *engine.PartitionSnapshot) {
			p.State, p.PrevState, p.Attempt, p.Retryable = partition.Failed, partition.Mirroring, 3, true
			p.NextRetry = T0.Add(4 * time.Second)
			p.Error = "append orders/3: destination log end 1515920 != batch base offset 1515918 (foreign write?)"
			p.LagTime = 84 * time.Second
			p.Lineage = []engine.EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 410}, {Epoch: 6, StartOffset: 980}, {Epoch: 7, StartOffset: 1_205}}
			p.BytesPerSec, p.BatchesPerSec = 0, 0
			p.FillerBatches = 2
		}),
		healthy(MirrorAB, "orders", 4, 1_518_000, 0),
		with(healthy(MirrorAB, "orders", 5, 1_521_555, 1_521_555), func(p *engine.PartitionSnapshot) {
			p.State = partition.LogAlignment
			p.DestLogEnd, p.LastOffset, p.LastEpoch = 0, -1, -1
			p.LagTime = 0
			p.BytesPerSec, p.BatchesPerSec, p.BytesCopied, p.BatchesCopied = 0, 0, 0, 0
		}),
		with(healthy(MirrorAB, "payments", 0, 240_118, 40), func(p *engine.PartitionSnapshot) {
			p.State, p.BytesPerSec, p.BatchesPerSec = partition.Paused, 0, 0
		}),
		with(healthy(MirrorAB, "payments", 1, 239_990, 38), func(p *engine.PartitionSnapshot) {
			p.State, p.BytesPerSec, p.BatchesPerSec = partition.Paused, 0, 0
		}),
		with(healthy(MirrorAB, "payments", 2, 240_501, 2), func(p *engine.PartitionSnapshot) {
			p.State = partition.Pausing
		}),
		with(healthy(MirrorAB, "payments", 3, 241_007, 0), func(p *engine.PartitionSnapshot) {
			p.OpenTxns = 2
		}),
		with(healthy(MirrorAB, "shipments", 0, 61_000, 0), func(p *engine.PartitionSnapshot) {
			p.State, p.WriterEpoch, p.BytesPerSec, p.BatchesPerSec = partition.Stopped, 3, 0, 0
		}),
		with(healthy(MirrorAB, "shipments", 1, 60_870, 5), func(p *engine.PartitionSnapshot) {
			p.State = partition.Stopping
		}),
		with(healthy(MirrorAB, "shipments", 2, 60_912, 0), func(p *engine.PartitionSnapshot) {
			p.State, p.WriterEpoch = partition.EpochFencing, 3
		}),
	}
	cb := []engine.PartitionSnapshot{
		healthy(MirrorCB, "telemetry", 0, 9_001_200, 1_800),
		healthy(MirrorCB, "telemetry", 1, 9_000_870, 1_750),
	}
	return engine.Snapshot{
		Taken:       T0,
		Instance:    "kmirror-1",
		Destination: engine.ClusterInfo{ID: "dst-9Zq3kT2mQ0yK", Bootstrap: []string{"b-1.dr.example:9092"}},
		Mirrors: []engine.MirrorSnapshot{
			{Name: MirrorAB, Source: engine.ClusterInfo{ID: "src-4hV7pLxN2cRw", Bootstrap: []string{"a-1.prod.example:9092"}}, Partitions: ab,
				Groups: []engine.GroupSnapshot{
					{Group: "billing", LastSync: T0.Add(-3 * time.Second), Partitions: []engine.GroupPartition{
						{Topic: "orders", Partition: 0, Source: 1200, Destination: 1200},
						{Topic: "orders", Partition: 1, Source: 1190, Destination: 1185},
					}},
					{Group: "fraud-check", SkipReason: "active on the destination (2 members): it consumes there already"},
					{Group: "pickers", Kind: engine.GroupShare, LastSync: T0.Add(-4 * time.Second), Partitions: []engine.GroupPartition{
						{Topic: "orders", Partition: 0, Source: 1150, Destination: 1150},
					}},
				}},
			{Name: MirrorCB, Source: engine.ClusterInfo{ID: "src-Lm8dQ1wYt5Ez", Bootstrap: []string{"c-1.edge.example:9092"}}, Partitions: cb,
				ShareGroupsSkipped: "the source cluster does not support share groups (broker 1 lacks DescribeShareGroupOffsets)"},
		},
	}
}

// Events returns the fixture's event history, oldest first.
func Events() []engine.Event {
	at := func(s int) time.Time { return T0.Add(time.Duration(s-60) * time.Second) }
	return []engine.Event{
		{Time: at(0), Level: engine.LevelInfo, Mirror: MirrorAB, Partition: -1, Message: "mirror started by kmirror-1: 17 partitions"},
		{Time: at(3), Level: engine.LevelInfo, Mirror: MirrorCB, Partition: -1, Message: "mirror started by kmirror-1: 2 partitions"},
		{Time: at(12), Level: engine.LevelInfo, Mirror: MirrorAB, Topic: "payments", Partition: -1, Message: "pause requested by operator"},
		{Time: at(20), Level: engine.LevelWarn, Mirror: MirrorAB, Topic: "inventory", Partition: 0, Message: "unclean leader election on source: entering ULE_RECOVERY"},
		{Time: at(31), Level: engine.LevelError, Mirror: MirrorAB, Topic: "inventory", Partition: 2, Message: "destination diverged at offset 8750: waiting for recover"},
		{Time: at(40), Level: engine.LevelInfo, Mirror: MirrorAB, Topic: "shipments", Partition: -1, Message: "stop requested by operator"},
		{Time: at(52), Level: engine.LevelError, Mirror: MirrorAB, Topic: "orders", Partition: 3, Message: "append failed: destination log end 1515920 != batch base 1515918; retry 3 in 4s"},
		{Time: at(58), Level: engine.LevelInfo, Mirror: MirrorAB, Topic: "orders", Partition: 5, Message: "log alignment: fresh start at 0"},
	}
}

// Big returns a snapshot of one mirror with n partitions spread over topics
// of 50 partitions each, for benchmarks.
func Big(n int) engine.Snapshot {
	ps := make([]engine.PartitionSnapshot, n)
	for i := range ps {
		topic := fmt.Sprintf("topic-%04d", i/50)
		ps[i] = healthy(MirrorAB, topic, int32(i%50), int64(1_000_000+i*7), int64(i%97))
		if i%113 == 0 {
			ps[i].State = partition.Paused
		}
	}
	snap := Snapshot()
	snap.Mirrors = []engine.MirrorSnapshot{{Name: MirrorAB, Source: snap.Mirrors[0].Source, Partitions: ps}}
	return snap
}

// largeTopics are the many-topics fixture's topics of mirror a-to-b, with
// their partition counts; c-to-b mirrors the last three names below.
var largeTopics = []struct {
	name  string
	parts int
}{
	{"audit-log", 12}, {"billing.invoices", 6}, {"billing.payments", 24}, {"cart-events", 32},
	{"checkout", 16}, {"clickstream.raw", 48}, {"customer-profile", 3}, {"email-outbox", 4},
	{"fraud-signals", 8}, {"inventory", 12}, {"ledger", 6}, {"notifications", 10},
	{"orders", 24}, {"orders.dlq", 1}, {"pricing", 8}, {"recommendations", 20},
	{"returns", 4}, {"search-queries", 16}, {"sessions", 30}, {"shipments", 12},
	{"stock-levels", 6}, {"support-tickets", 2}, {"user-activity", 40}, {"warehouse.scans", 18},
}

var largeEdgeTopics = []struct {
	name  string
	parts int
}{{"edge.metrics", 24}, {"edge.logs", 12}, {"telemetry", 8}}

// Large returns the many-topics fixture at a step: two mirrors, 406
// partitions over 27 topics, 2 s of engine time per step (so two steps
// give catch-up estimates). Topic i behaves by i%5: in sync, catching up,
// falling behind, paused, or catching up slowly; a few partitions are
// FAILED (their destination stands still) or recovering.
func Large(step int) engine.Snapshot {
	at := int64(step)
	var ab, cb []engine.PartitionSnapshot
	build := func(mirror string, i int, name string, parts int) []engine.PartitionSnapshot {
		out := make([]engine.PartitionSnapshot, 0, parts)
		for p := range parts {
			hwm := int64(1_000_000+i*10_000+p*37) + at*400
			var lag int64
			switch i % 5 {
			case 0: // in sync
			case 1: // catching up: 300 records per 2 s step
				lag = max(int64(6_000+p*150)-at*300, 0)
			case 2: // falling behind: the lag grows 50 per step
				lag = int64(800+p*10) + at*50
			case 3: // paused
				lag = int64(120+p) + at*400
			case 4: // catching up slowly
				lag = max(int64(90_000+p*500)-at*200, 0)
			}
			ps := healthy(mirror, name, int32(p), hwm, lag)
			ps.LagTime = time.Duration(lag) * 5 * time.Millisecond
			if i%5 == 3 {
				ps.State, ps.BytesPerSec, ps.BatchesPerSec = partition.Paused, 0, 0
			}
			out = append(out, ps)
		}
		return out
	}
	for i, tp := range largeTopics {
		ab = append(ab, build(MirrorAB, i, tp.name, tp.parts)...)
	}
	for i, tp := range largeEdgeTopics {
		cb = append(cb, build(MirrorCB, i+1, tp.name, tp.parts)...)
	}
	// orders/5 is FAILED: its destination stops where step 0 left it.
	for j := range ab {
		p := &ab[j]
		switch {
		case p.Topic == "orders" && p.Partition == 5:
			p.State, p.PrevState, p.Attempt, p.Retryable = partition.Failed, partition.Mirroring, 2, true
			p.Error = "append orders/5: NOT_ENOUGH_REPLICAS"
			p.DestLogEnd = p.SourceHWM - at*400 - 500
			p.Lag = p.SourceHWM - p.DestLogEnd
			p.LagTime = 40*time.Second + time.Duration(at)*2*time.Second
			p.BytesPerSec, p.BatchesPerSec = 0, 0
		case p.Topic == "inventory" && p.Partition == 2:
			p.State = partition.ULERecovery
		}
	}
	snap := Snapshot()
	snap.Taken = T0.Add(time.Duration(step) * 2 * time.Second)
	snap.Mirrors[0].Partitions = ab
	snap.Mirrors[1].Partitions = cb
	return snap
}
