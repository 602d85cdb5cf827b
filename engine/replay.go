package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/internal/backoff"
)

// replayStall bounds the wait for a shard's replay once the reader stops
// advancing on it short of the end listed at assignment. The reader's
// fetches return whatever lies beyond its position within a fetch wait, so
// a reader that got nothing for this long will not reach that end: the last
// records were removed (compaction drops a tail tombstone) or the
// destination does not serve them.
const replayStall = 10 * time.Second

// replayBarrier keeps newly assigned shards from being owned before the
// reader has read them up to the end they had when they were assigned: a
// partition started from a replay that stops short starts from an older
// record (or none, UNKNOWN at state epoch 0), and every reader then ignores
// the records it writes, whose state epochs are lower than the last one.
// It belongs to the coordinator's loop.
type replayBarrier struct {
	readTo  map[int32]int64 // per shard, the offset after the last record read
	pending map[int32]*shardReplay
	gen     uint64 // counts assignments, so a late listing cannot serve a newer one
}

// shardReplay is an assigned shard being replayed.
type shardReplay struct {
	gen   uint64
	end   int64     // the offset to read up to; -1 until listed
	since time.Time // when the end was listed or the reader last advanced
}

// listedEnds answers the listing of the ends of an assignment's shards.
type listedEnds struct {
	gen  uint64
	ends map[int32]int64
}

func newReplayBarrier() replayBarrier {
	return replayBarrier{readTo: make(map[int32]int64), pending: make(map[int32]*shardReplay)}
}

// assign starts the replay of shards and returns the assignment's
// generation, for listing their ends.
func (b *replayBarrier) assign(shards []int32, now time.Time) uint64 {
	b.gen++
	for _, s := range shards {
		b.pending[s] = &shardReplay{gen: b.gen, end: -1, since: now}
	}
	return b.gen
}

// read notes a record the reader read.
func (b *replayBarrier) read(shard int32, offset int64, now time.Time) {
	if offset+1 > b.readTo[shard] {
		b.readTo[shard] = offset + 1
	}
	if r := b.pending[shard]; r != nil {
		r.since = now
	}
}

// listed sets the ends of the shards still replaying for that assignment.
func (b *replayBarrier) listed(l listedEnds, now time.Time) {
	for s, end := range l.ends {
		if r := b.pending[s]; r != nil && r.gen == l.gen {
			r.end, r.since = end, now
		}
	}
}

func (b *replayBarrier) revoke(shard int32) { delete(b.pending, shard) }

// stalledShard is a shard whose replay gave up short of its end.
type stalledShard struct {
	shard     int32
	readTo    int64
	end       int64
	stalledAt time.Time
}

// ready takes the shards read up to their ends, and those whose reader
// stalled for replayStall before it.
func (b *replayBarrier) ready(now time.Time) (done []int32, stalled []stalledShard) {
	for s, r := range b.pending {
		switch {
		case r.end < 0:
			continue
		case b.readTo[s] >= r.end:
			done = append(done, s)
		case now.Sub(r.since) >= replayStall:
			stalled = append(stalled, stalledShard{shard: s, readTo: b.readTo[s], end: r.end, stalledAt: r.since})
		default:
			continue
		}
		delete(b.pending, s)
	}
	slices.Sort(done)
	slices.SortFunc(stalled, func(a, b stalledShard) int { return int(a.shard - b.shard) })
	return done, stalled
}

// listEnds lists the end offsets of __mirror_state for an assignment's
// shards, until it succeeds or ctx ends, and hands them to the loop. A
// shard whose log is empty has nothing to replay: its end is 0.
func (c *coordinator) listEnds(ctx context.Context, gen uint64, shards []int32) {
	bo := backoff.Backoff{Policy: backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}}
	for attempt := 1; ; attempt++ {
		ends, err := c.listShardEnds(ctx, shards)
		if err == nil {
			c.deliver(coordMsg{ends: &listedEnds{gen: gen, ends: ends}})
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 1 || attempt%10 == 0 {
			c.e.emit(LevelWarn, "", store.Topic, -1, fmt.Sprintf("the partitions of %d newly assigned shards wait: listing their ends failed (attempt %d): %v", len(shards), attempt, err))
		}
		if backoff.Sleep(ctx, bo.Next(c.e.jitter)) != nil {
			return
		}
	}
}

func (c *coordinator) listShardEnds(ctx context.Context, shards []int32) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ends, err := c.e.dst.adm.ListEndOffsets(lctx, store.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", store.Topic, err)
	}
	starts, err := c.e.dst.adm.ListStartOffsets(lctx, store.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", store.Topic, err)
	}
	out := make(map[int32]int64, len(shards))
	for _, s := range shards {
		end, ok := ends.Lookup(store.Topic, s)
		if !ok {
			return nil, fmt.Errorf("list end offsets of %s: no answer for shard %d", store.Topic, s)
		}
		out[s] = end.Offset
		if start, ok := starts.Lookup(store.Topic, s); ok && start.Offset >= end.Offset {
			out[s] = 0
		}
	}
	return out, nil
}

// promote owns the shards whose replay is done; their partitions start at
// the next reconcile.
func (c *coordinator) promote() {
	done, stalled := c.replay.ready(c.e.now())
	for _, s := range done {
		c.owned[s] = true
	}
	for _, st := range stalled {
		c.owned[st.shard] = true
		c.e.emit(LevelWarn, "", store.Topic, st.shard, fmt.Sprintf(
			"shard %d: read up to offset %d, short of its end %d, and nothing more arrived since %s (its last records were compacted away, or the destination does not serve them): starting its partitions from what was read",
			st.shard, st.readTo, st.end, st.stalledAt.Format(time.RFC3339)))
	}
	if n := len(done) + len(stalled); n > 0 {
		c.e.emit(LevelInfo, "", store.Topic, -1, fmt.Sprintf("replayed %d assigned shards of %s: starting their partitions; owning %d of %d", n, store.Topic, len(c.owned), store.Partitions))
	}
}
