package engine

import (
	"context"
	"fmt"
	"sync"
)

// eventQueue delivers events in order without ever blocking the goroutine
// that emits them. It holds at most limit undelivered events; past that it
// drops the oldest and says so in the next event delivered.
type eventQueue struct {
	mu      sync.Mutex
	q       []Event
	dropped int
	limit   int
	notify  chan struct{}
	out     chan Event
}

func newEventQueue(ctx context.Context, wg *sync.WaitGroup, limit int) *eventQueue {
	eq := &eventQueue{limit: limit, notify: make(chan struct{}, 1), out: make(chan Event, 64)}
	wg.Go(func() { eq.pump(ctx) })
	return eq
}

func (eq *eventQueue) push(ev Event) {
	eq.mu.Lock()
	if len(eq.q) >= eq.limit {
		eq.q = eq.q[1:]
		eq.dropped++
	}
	eq.q = append(eq.q, ev)
	eq.mu.Unlock()
	select {
	case eq.notify <- struct{}{}:
	default:
	}
}

func (eq *eventQueue) pop() (Event, bool) {
	eq.mu.Lock()
	defer eq.mu.Unlock()
	if len(eq.q) == 0 {
		return Event{}, false
	}
	ev := eq.q[0]
	eq.q = eq.q[1:]
	if eq.dropped > 0 {
		ev.Message = fmt.Sprintf("%s (%d earlier events dropped: nobody was reading)", ev.Message, eq.dropped)
		eq.dropped = 0
	}
	return ev, true
}

func (eq *eventQueue) pump(ctx context.Context) {
	for {
		ev, ok := eq.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-eq.notify:
				continue
			}
		}
		select {
		case eq.out <- ev:
		case <-ctx.Done():
			return
		}
	}
}
