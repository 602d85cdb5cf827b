package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/backoff"
)

// batcher merges lookups made at the same time into shared rounds, one
// round at a time: a lookup made while no round runs starts one at once
// (alone it costs what it did unbatched), and every lookup made while a
// round is in flight goes into the next, whatever their number. Thousands
// of partitions aligning at once then cost a few requests, not thousands.
//
// The lookup that starts a round sends it and the rounds after it, until
// none is queued; its caller waits that long. A round runs on a context
// of its own (the starter's values, not its end), so a caller that gives
// up stops waiting without failing the others.
//
// The zero value is ready: do names the round function (which answers the
// keys of one round; a key it leaves out gets errBatchMissing).
type batcher[K comparable, V any] struct {
	mu      sync.Mutex
	waiting map[K][]chan batchResult[V]
	order   []K // queued keys, in the order first asked
	running bool
}

// batchResult is one key's answer in a round.
type batchResult[V any] struct {
	v   V
	err error
}

// roundFunc answers the keys of one round.
type roundFunc[K comparable, V any] func(ctx context.Context, keys []K) map[K]batchResult[V]

// batchRoundTimeout bounds one round.
const batchRoundTimeout = 30 * time.Second

// errBatchMissing is a key's answer when its round left it out.
var errBatchMissing = errors.New("no answer for it in the batched request")

// do looks up k in the next round of round.
func (b *batcher[K, V]) do(ctx context.Context, k K, round roundFunc[K, V]) (V, error) {
	res := b.doAll(ctx, []K{k}, round)
	return res[0].v, res[0].err
}

// doAll looks up keys in the next round of round, and returns their
// answers in their order.
func (b *batcher[K, V]) doAll(ctx context.Context, keys []K, round roundFunc[K, V]) []batchResult[V] {
	chs := make([]chan batchResult[V], len(keys))
	b.mu.Lock()
	if b.waiting == nil {
		b.waiting = make(map[K][]chan batchResult[V])
	}
	for i, k := range keys {
		chs[i] = make(chan batchResult[V], 1)
		if _, ok := b.waiting[k]; !ok {
			b.order = append(b.order, k)
		}
		b.waiting[k] = append(b.waiting[k], chs[i])
	}
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		b.rounds(context.WithoutCancel(ctx), round)
	}
	out := make([]batchResult[V], len(keys))
	for i, ch := range chs {
		select {
		case out[i] = <-ch:
		case <-ctx.Done():
			out[i].err = ctx.Err()
		}
	}
	return out
}

// batchLinger is how long a round waits for the lookups made right after
// the one that started it (partitions starting together reach the same
// step microseconds apart): one round then, not two, each a round trip to
// a cluster that may be far.
const batchLinger = time.Millisecond

// rounds runs rounds until nothing is queued.
func (b *batcher[K, V]) rounds(ctx context.Context, round roundFunc[K, V]) {
	for {
		_ = backoff.Sleep(ctx, batchLinger) // ctx has no end: see do
		b.mu.Lock()
		keys, waiting := b.order, b.waiting
		b.order, b.waiting = nil, nil
		if len(keys) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, batchRoundTimeout)
		results := round(rctx, keys)
		cancel()
		for _, k := range keys {
			res, ok := results[k]
			if !ok {
				res.err = errBatchMissing
			}
			for _, ch := range waiting[k] {
				ch <- res // buffered, one answer each
			}
		}
	}
}
