package replica

import (
	"context"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/partition"
)

// inbox is what other goroutines hand a runner: operator events, a failure
// found outside it and the fetcher's answer. woken is set whenever
// something was added since the runner last looked, and a token is left
// in wake, the channel a running runner blocks on besides its context; a
// waiter looks into the inbox before it blocks, and a wake that came after
// the look ends the wait. A parked runner keeps no channel (park.go).
//
// Thousands of idle partitions each keep one, so it is fields rather than
// a channel per kind of message.
type inbox struct {
	mu         sync.Mutex
	rare       *inboxRare    // operator events and a failure found outside the runner; nil when there are none
	result     *fetch.Result // the fetcher's newest answer, nil when none (an idle runner keeps none)
	exited     bool          // run has returned: events are dropped
	checkpoint bool          // the mirror asks for the last mirrored offset to be written
	retryDue   bool          // the retry timer of retrySeq fired
	stopQueued bool          // a stop was handed over and no start since (topicStopped)
	woken      bool          // something was handed over since the runner last looked
	parked     bool          // no goroutine runs the runner: the next wake starts one
	retrySeq   uint32        // the retry scheduled last
	// end is the destination log end last observed by the mirror's
	// watcher, for the runner, which alone can tell a foreign write
	// from its own appends; end.end is -1 once the runner took it.
	end        observedEnd
	cancelWork context.CancelFunc // interrupts the work in progress for a command
	wake       chan struct{}      // capacity 1; nil until the runner blocks, and while it is parked
}

// poke wakes the runner: it starts a goroutine for a parked runner, or
// leaves a token for a running one.
func (r *Runner) poke() {
	r.in.mu.Lock()
	r.pokeLocked()
	r.in.mu.Unlock()
}

// pokeLocked is poke with r.in.mu held.
func (r *Runner) pokeLocked() {
	r.in.woken = true
	if r.in.wake != nil {
		select {
		case r.in.wake <- struct{}{}:
		default:
		}
	}
	r.unparkLocked()
}

// wakeChan returns the channel to block on until the runner is woken: an
// always ready one when a wake came since the runner last looked. A
// receive from it is followed by woke.
func (r *Runner) wakeChan() <-chan struct{} {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.woken {
		r.in.woken = false
		return closedChan
	}
	if r.in.wake == nil {
		r.in.wake = make(chan struct{}, 1)
	}
	return r.in.wake
}

// woke takes the wake received from wakeChan's channel.
func (r *Runner) woke() {
	r.in.mu.Lock()
	r.in.woken = false
	r.in.mu.Unlock()
}

// Send delivers an operator event to the runner, interrupting alignment,
// fencing or the handling of a fetch answer so it is seen at once. An
// event sent after the runner has exited is dropped.
func (r *Runner) Send(ev partition.Event) {
	r.in.mu.Lock()
	r.in.noteCommand(ev)
	if !r.in.exited {
		rare := r.in.more()
		rare.events = append(rare.events, ev)
		if r.in.cancelWork != nil {
			r.in.cancelWork()
		}
	}
	r.in.mu.Unlock()
	r.poke()
}

// Inject reports a failure found outside the runner; it fails the partition
// whatever it is doing (a FAILED, PAUSED or STOPPED partition keeps its
// state: the state machine ignores errors there). Only the first failure
// not yet taken is kept.
func (r *Runner) Inject(err error) {
	r.in.mu.Lock()
	if r.in.rare == nil || r.in.rare.fault == nil {
		r.in.more().fault = err
		// MIRRORING may be blocked on what failed (a fetcher that
		// cannot reach the source takes no more wants). Other work
		// (alignment, a rebuild) ends by itself and is not cut short.
		if r.in.cancelWork != nil && r.stats.state() == partition.Mirroring {
			r.in.cancelWork()
		}
	}
	r.in.mu.Unlock()
	r.poke()
}

// deliver hands the runner the fetcher's answer to one of its wants,
// without ever blocking the fetcher, which serves other partitions too. A
// runner cares only about the answer to its newest want: an unread answer
// to an older want is replaced, and an unread answer to a newer one is
// kept (answers to a want abandoned by a realignment may arrive after
// those to its successor, on another connection or from another fetcher).
func (r *Runner) deliver(res fetch.Result) {
	r.in.mu.Lock()
	if r.in.result == nil || res.Gen >= r.in.result.Gen {
		r.in.result = &res
	}
	r.in.mu.Unlock()
	r.poke()
}

// The runner is its wants' fetch.Receiver.

// Topic is the runner's topic.
func (r *Runner) Topic() string { return r.topic }

// Deliver is deliver.
func (r *Runner) Deliver(res fetch.Result) { r.deliver(res) }

// Exited is hasExited.
func (r *Runner) Exited() bool { return r.hasExited() }

// SetSource publishes the source offsets of an answer the runner is not
// woken for.
func (r *Runner) SetSource(hwm, logStart int64) { r.stats.SetSource(hwm, logStart) }

// inboxRare is what an inbox holds only now and then: an idle runner's
// inbox keeps none.
type inboxRare struct {
	events []partition.Event // operator events, oldest first
	fault  error             // a failure found outside the runner (a deleted source topic)
}

// more returns the inbox's rarely used part, allocating it; in.mu held.
func (in *inbox) more() *inboxRare {
	if in.rare == nil {
		in.rare = new(inboxRare)
	}
	return in.rare
}

// tidy drops the rarely used part once it holds nothing; in.mu held.
func (in *inbox) tidy() {
	if in.rare != nil && len(in.rare.events) == 0 && in.rare.fault == nil {
		in.rare = nil
	}
}

// pendingEvents is how many operator events wait; in.mu held.
func (in *inbox) pendingEvents() int {
	if in.rare == nil {
		return 0
	}
	return len(in.rare.events)
}

// newInbox returns an empty inbox.
func newInbox() inbox {
	return inbox{end: observedEnd{end: -1}}
}

// observedEnd is a destination log end read at a moment: an answer to a
// request sent before the runner's last alignment may describe a log that
// no longer exists (a rebuilt topic) and is ignored.
type observedEnd struct {
	end int64
	at  time.Duration // Deps.SinceBase of when the request was sent
}

// observeEnd hands the runner a destination log end read by the watcher,
// and wakes it, when the runner must look at it (Stats.endWanted).
func (r *Runner) observeEnd(o observedEnd) {
	if !r.stats.endWanted(o.end) {
		return
	}
	r.in.mu.Lock()
	r.in.end = o
	r.in.mu.Unlock()
	r.poke()
}

// endWaiting reports whether a destination log end waits for takeEnd.
func (r *Runner) endWaiting() bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	return r.in.end.end >= 0
}

// takeEnd returns the destination log end observed since the last call,
// if any.
func (r *Runner) takeEnd() (observedEnd, bool) {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	o, ok := r.in.end, r.in.end.end >= 0
	r.in.end.end = -1
	return o, ok
}

// takeEvent removes the oldest operator event, if any.
func (r *Runner) takeEvent() (partition.Event, bool) {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.pendingEvents() == 0 {
		return nil, false
	}
	rare := r.in.rare
	ev := rare.events[0]
	rare.events[0] = nil
	rare.events = rare.events[1:]
	if len(rare.events) == 0 {
		rare.events = nil
		r.in.tidy()
	} else {
		r.pokeLocked() // the next waiter takes the rest
	}
	return ev, true
}

// eventPending reports whether an operator event waits.
func (r *Runner) eventPending() bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	return r.in.pendingEvents() > 0
}

// takeFault removes the failure found outside the runner, nil if none.
func (r *Runner) takeFault() error {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.rare == nil {
		return nil
	}
	err := r.in.rare.fault
	r.in.rare.fault = nil
	r.in.tidy()
	return err
}

// resultPending reports whether a fetch answer waits, and whether it is
// empty: no records, no error, no divergence (an idle long-poll).
func (r *Runner) resultPending() (pending, empty bool) {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	res := r.in.result
	if res == nil {
		return false, false
	}
	return true, res.Empty()
}

// takeResult removes the waiting fetch answer into res.
func (r *Runner) takeResult(res *fetch.Result) bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.result == nil {
		return false
	}
	*res = *r.in.result
	r.in.result = nil
	return true
}

// startWork returns the context of one piece of work, which send cancels,
// and so does the end of ctx, the runner's context (its topic's, whose end
// calls ContextEnded; it is cancelled at once if ctx has ended or an event
// is already waiting). The work context is not registered with ctx: the
// runners of a topic all starting work at once would grow that context's
// map of children, which never shrinks, by a hundred bytes per partition.
func (r *Runner) startWork(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.in.mu.Lock()
	r.in.cancelWork = cancel
	if r.in.pendingEvents() > 0 || ctx.Err() != nil {
		cancel()
	}
	r.in.mu.Unlock()
	return wctx, cancel
}

// ContextEnded interrupts the work in progress, if any, and wakes the
// runner: its context has ended.
func (r *Runner) ContextEnded() {
	r.in.mu.Lock()
	if r.in.cancelWork != nil {
		r.in.cancelWork()
	}
	r.in.mu.Unlock()
	r.poke()
}

// endWork ends the context of startWork.
func (r *Runner) endWork(cancel context.CancelFunc) {
	r.in.mu.Lock()
	r.in.cancelWork = nil
	r.in.mu.Unlock()
	cancel()
}

// hasExited reports whether run has returned.
func (r *Runner) hasExited() bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	return r.in.exited
}

// markExited makes later events be dropped.
func (r *Runner) markExited() {
	r.in.mu.Lock()
	r.in.exited = true
	if r.in.rare != nil {
		r.in.rare.events = nil
		r.in.tidy()
	}
	r.in.mu.Unlock()
}
