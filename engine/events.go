package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// eventQueue delivers events in order without ever blocking the goroutine
// that emits them. It holds at most limit undelivered events; past that it
// drops the oldest and says so in the next event delivered.
//
// Nobody may read for a long time, and starting thousands of partitions
// emits several transitions each, so the queue holds events compactly: the
// mirror and topic once per topic, and one copy of a message many
// partitions emit alike.
type eventQueue struct {
	mu      sync.Mutex
	q       []queuedEvent
	dropped int
	limit   int
	notify  chan struct{}
	out     chan Event

	origins  map[eventOrigin]*eventOrigin // recent origins, to share
	messages map[string]string            // recent messages, to share
}

// queuedEvent is an Event as the queue holds it.
type queuedEvent struct {
	time      time.Time
	origin    *eventOrigin
	message   string
	partition int32
	level     EventLevel
}

// eventOrigin is what an event is about, shared by the events of a topic.
type eventOrigin struct{ mirror, topic string }

// maxShared bounds the origins and messages remembered for sharing; past
// it they are forgotten and sharing starts over, so a message emitted once
// is not kept for the queue's lifetime.
const maxShared = 256

func newEventQueue(ctx context.Context, wg *sync.WaitGroup, limit int) *eventQueue {
	eq := &eventQueue{limit: limit, notify: make(chan struct{}, 1), out: make(chan Event, 64),
		origins: make(map[eventOrigin]*eventOrigin), messages: make(map[string]string)}
	wg.Go(func() { eq.pump(ctx) })
	return eq
}

func (eq *eventQueue) push(ev Event) {
	eq.mu.Lock()
	if len(eq.q) >= eq.limit {
		eq.q = eq.q[1:]
		eq.dropped++
	}
	eq.q = append(eq.q, eq.compact(ev))
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
	qe := eq.q[0]
	eq.q = eq.q[1:]
	ev := Event{Time: qe.time, Level: qe.level, Mirror: qe.origin.mirror, Topic: qe.origin.topic, Partition: qe.partition, Message: qe.message}
	if eq.dropped > 0 {
		ev.Message = fmt.Sprintf("%s (%d earlier events dropped: nobody was reading)", ev.Message, eq.dropped)
		eq.dropped = 0
	}
	return ev, true
}

// compact returns ev as the queue holds it, sharing its origin and message
// with earlier events. eq.mu is held.
func (eq *eventQueue) compact(ev Event) queuedEvent {
	key := eventOrigin{mirror: ev.Mirror, topic: ev.Topic}
	origin, ok := eq.origins[key]
	if !ok {
		if len(eq.origins) >= maxShared {
			clear(eq.origins)
		}
		origin = &key
		eq.origins[key] = origin
	}
	msg, ok := eq.messages[ev.Message]
	if !ok {
		if len(eq.messages) >= maxShared {
			clear(eq.messages)
		}
		msg = ev.Message
		eq.messages[msg] = msg
	}
	return queuedEvent{time: ev.Time, origin: origin, message: msg, partition: ev.Partition, level: ev.Level}
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
