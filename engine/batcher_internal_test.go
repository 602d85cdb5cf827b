package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// TestBatcherSharesRounds: a lookup made while no round runs starts one at
// once; the lookups made while it is in flight all go into the next one;
// a key the round leaves out gets errBatchMissing; a caller that gives up
// does not fail the others.
func TestBatcherSharesRounds(t *testing.T) {
	var (
		b       batcher[int, int]
		mu      sync.Mutex
		rounds  [][]int
		release = make(chan struct{})
		entered = make(chan struct{}, 10)
	)
	round := func(ctx context.Context, keys []int) map[int]batchResult[int] {
		mu.Lock()
		rounds = append(rounds, append([]int(nil), keys...))
		first := len(rounds) == 1
		mu.Unlock()
		entered <- struct{}{}
		if first {
			<-release // hold the first round in flight
		}
		out := map[int]batchResult[int]{}
		for _, k := range keys {
			if k != 13 {
				out[k] = batchResult[int]{v: k * 10}
			}
		}
		return out
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make(map[int]batchResult[int])
	var gotMu sync.Mutex
	lookup := func(ctx context.Context, k int) {
		v, err := b.do(ctx, k, round)
		gotMu.Lock()
		got[k] = batchResult[int]{v: v, err: err}
		gotMu.Unlock()
	}
	wg.Go(func() { lookup(ctx, 1) })
	<-entered // the first round is in flight with key 1 alone
	queued := func() (bool, string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.order) == 4, fmt.Sprintf("%d of the 4 lookups made during the round queued", len(b.order))
	}
	for _, k := range []int{2, 3, 13} {
		wg.Go(func() { lookup(ctx, k) })
	}
	gaveUp, cancel := context.WithCancel(ctx)
	wg.Go(func() { lookup(gaveUp, 4) })
	enginetest.Wait(t, 10*time.Second, queued)
	cancel()
	close(release)
	wg.Wait()

	if len(rounds) != 2 || len(rounds[0]) != 1 || len(rounds[1]) != 4 {
		t.Fatalf("rounds %v, want [1] then the four keys queued meanwhile", rounds)
	}
	for k, want := range map[int]int{1: 10, 2: 20, 3: 30} {
		if r := got[k]; r.err != nil || r.v != want {
			t.Errorf("key %d: %d, %v; want %d", k, r.v, r.err, want)
		}
	}
	if r := got[13]; !errors.Is(r.err, errBatchMissing) {
		t.Errorf("key 13 left out of its round: %v, want errBatchMissing", r.err)
	}
	if r := got[4]; !errors.Is(r.err, context.Canceled) {
		t.Errorf("key 4, whose caller gave up: %v, want context.Canceled", r.err)
	}
}
