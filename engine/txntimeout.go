package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/txn"
)

// txnLimit is the destination's transaction.max.timeout.ms, read once per
// engine: every mirrored transactional producer gets it as its timeout (a
// mirrored transaction lives as long as the source's plus the mirror's lag
// and pauses, so it gets the longest the destination allows), and the
// partitions' writer identities stay within it.
type txnLimit struct {
	mu sync.Mutex
	d  time.Duration // 0 until read
}

// txnTimeout returns the timeout of mirrored transactions. When the
// destination does not say (no DESCRIBE_CONFIGS on the cluster, say), it is
// txn.DefaultTimeout and a warning says so once: a destination whose limit is
// lower refuses the producers, one whose limit is higher aborts mirrored
// transactions sooner than it would have to.
func (e *Engine) txnTimeout(ctx context.Context) (time.Duration, error) {
	e.txnMax.mu.Lock()
	defer e.txnMax.mu.Unlock()
	if e.txnMax.d > 0 {
		return e.txnMax.d, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := txn.MaxTimeout(rctx, e.dst.cl)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		d = txn.DefaultTimeout
		e.emit(LevelWarn, "", "", -1, fmt.Sprintf("%v; mirrored transactions get a %s timeout instead", err, d))
	}
	e.txnMax.d = d
	return d, nil
}

// writerTimeout is the transaction timeout of a partition's writer
// identity. It never opens a transaction, but the destination refuses an
// InitProducerID whose timeout is above its limit.
func (e *Engine) writerTimeout(ctx context.Context) (int32, error) {
	d, err := e.txnTimeout(ctx)
	if err != nil {
		return 0, err
	}
	return int32(min(d, time.Minute).Milliseconds()), nil
}
