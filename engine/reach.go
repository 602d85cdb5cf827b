package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/engine/store"
)

// reachState is what the engine last learned about reaching one cluster:
// whether its last request there (metadata, a fetch, a heartbeat) was
// answered. Any goroutine that talks to the cluster records into it; the
// heartbeat reads it. Atomics, as for the other published metrics: a
// successful request (the hot path) only stores a time.
type reachState struct {
	okAt, failAt atomic.Int64 // unix nanoseconds, 0 never
	lastErr      atomic.Pointer[string]
}

// observe records the outcome of one request. A request cut short by its
// own context (the engine closing, a caller giving up) says nothing about
// the cluster.
func (s *reachState) observe(ctx context.Context, err error) {
	if s == nil {
		return
	}
	now := time.Now().UnixNano()
	switch {
	case err == nil:
		s.okAt.Store(now)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
	default:
		msg := err.Error()
		s.lastErr.Store(&msg)
		s.failAt.Store(now)
	}
}

// get returns the last outcome as a heartbeat reports it.
func (s *reachState) get() store.Reach {
	ok, fail := s.okAt.Load(), s.failAt.Load()
	switch {
	case ok == 0 && fail == 0:
		return store.Reach{State: store.ReachUnknown}
	case fail > ok:
		r := store.Reach{State: store.ReachUnreachable, At: time.Unix(0, fail).UTC()}
		if e := s.lastErr.Load(); e != nil {
			r.Error = *e
		}
		return r
	}
	return store.Reach{State: store.ReachReachable, At: time.Unix(0, ok).UTC()}
}
