package engine

import (
	"slices"
	"testing"
	"time"
)

// TestReplayBarrier: a shard is ready once read up to the end listed for
// its latest assignment; a listing of an older assignment does not count;
// a reader stalled short of the end gives up after replayStall.
func TestReplayBarrier(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newReplayBarrier()
	b.read(3, 9, t0) // read before the assignment: counts
	old := b.assign([]int32{1, 2, 3, 4}, t0)
	gen := b.assign([]int32{1, 2, 3, 4}, t0) // reassigned before the listing answered
	b.listed(listedEnds{gen: old, ends: map[int32]int64{1: 0, 2: 0, 3: 0, 4: 0}}, t0)
	if done, stalled := b.ready(t0.Add(time.Hour)); len(done)+len(stalled) != 0 {
		t.Fatalf("ready on an older assignment's listing: %v %v", done, stalled)
	}
	b.listed(listedEnds{gen: gen, ends: map[int32]int64{1: 0, 2: 20, 3: 10, 4: 5}}, t0)
	done, stalled := b.ready(t0)
	if !slices.Equal(done, []int32{1, 3}) || len(stalled) != 0 {
		t.Fatalf("ready: %v, stalled %v; want [1 3] (empty, and read to its end)", done, stalled)
	}
	b.revoke(4)
	b.read(2, 18, t0.Add(5*time.Second))
	if done, stalled := b.ready(t0.Add(replayStall)); len(done)+len(stalled) != 0 {
		t.Fatalf("shard 2 advanced %s ago: ready %v, stalled %v", replayStall-5*time.Second, done, stalled)
	}
	b.read(2, 19, t0.Add(6*time.Second))
	if done, _ := b.ready(t0.Add(7 * time.Second)); !slices.Equal(done, []int32{2}) {
		t.Fatalf("shard 2 read to offset 19 of end 20: ready %v", done)
	}
	b.assign([]int32{5}, t0)
	b.listed(listedEnds{gen: b.gen, ends: map[int32]int64{5: 7}}, t0)
	b.read(5, 4, t0.Add(time.Second))
	_, stalled = b.ready(t0.Add(time.Second + replayStall))
	if len(stalled) != 1 || stalled[0].shard != 5 || stalled[0].readTo != 5 || stalled[0].end != 7 {
		t.Fatalf("shard 5 stalled at 5 of 7: %+v", stalled)
	}
	if len(b.pending) != 0 {
		t.Fatalf("left pending: %v", b.pending)
	}
}
