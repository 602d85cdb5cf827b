package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestDeliverKeepsNewestAnswer: an answer to an abandoned want never
// replaces an unread answer to its successor, whatever order they arrive
// in; an unread older answer is replaced by a newer one.
func TestDeliverKeepsNewestAnswer(t *testing.T) {
	r := &Runner{in: newInbox()}
	take := func() fetch.Result {
		t.Helper()
		if !r.takeWoken() {
			t.Fatal("an answer left no wake")
		}
		var res fetch.Result
		if !r.takeResult(&res) {
			t.Fatal("no answer waiting")
		}
		return res
	}
	r.deliver(fetch.Result{Gen: 2, Offset: 20})
	r.deliver(fetch.Result{Gen: 1, Offset: 10}) // late answer to the abandoned want
	if got := take(); got.Gen != 2 || got.Offset != 20 {
		t.Fatalf("got the answer to gen %d at %d, want gen 2 at 20", got.Gen, got.Offset)
	}
	r.deliver(fetch.Result{Gen: 3, Offset: 30})
	r.deliver(fetch.Result{Gen: 4, Offset: 40})
	if got := take(); got.Gen != 4 {
		t.Fatalf("got the answer to gen %d, want 4", got.Gen)
	}
	var res fetch.Result
	if r.takeResult(&res) {
		t.Fatalf("an answer taken twice: %+v", res)
	}
}

// TestInboxWakesForEverything: events, failures and answers each wake the
// runner; events come out in order, and a waiter that takes one event
// while more wait leaves a wake for the rest.
func TestInboxWakesForEverything(t *testing.T) {
	r := &Runner{in: newInbox()}
	woken := r.takeWoken
	r.Send(partition.Pause{})
	r.Send(partition.Resume{})
	if !woken() {
		t.Fatal("send left no wake")
	}
	if ev, ok := r.takeEvent(); !ok || ev != (partition.Pause{}) {
		t.Fatalf("first event %v, want Pause", ev)
	}
	if !woken() {
		t.Fatal("taking one of two events left no wake for the second")
	}
	if ev, ok := r.takeEvent(); !ok || ev != (partition.Resume{}) {
		t.Fatalf("second event %v, want Resume", ev)
	}
	if r.in.rare != nil {
		t.Fatal("an inbox whose events were all taken still keeps their part (every idle partition would)")
	}
	r.Inject(errors.New("first"))
	r.Inject(errors.New("second"))
	if !woken() {
		t.Fatal("inject left no wake")
	}
	if err := r.takeFault(); err == nil || err.Error() != "first" {
		t.Fatalf("fault %v, want the first", err)
	}
	if err := r.takeFault(); err != nil {
		t.Fatalf("fault taken twice: %v", err)
	}
	if r.in.rare != nil {
		t.Fatal("an inbox whose failure was taken still keeps its part")
	}
	ctx, cancel := r.startWork(context.Background())
	defer cancel()
	r.Send(partition.Stop{})
	if ctx.Err() == nil {
		t.Fatal("an event did not interrupt the work in progress")
	}
	r.endWork(cancel)
	r.takeEvent()

	// The end of the runner's context ends its work, which is not a
	// child of that context, and wakes it.
	parent, end := context.WithCancel(context.Background())
	ctx, cancel = r.startWork(parent)
	woken()
	end()
	r.ContextEnded()
	if ctx.Err() == nil || !woken() {
		t.Fatalf("the end of the runner's context left its work running (%v) or the runner asleep", ctx.Err())
	}
	r.endWork(cancel)
	ctx, cancel = r.startWork(parent)
	if ctx.Err() == nil {
		t.Fatal("work started under an ended context is not cancelled")
	}
	r.endWork(cancel)
	r.markExited()
	r.Send(partition.Start{})
	if r.eventPending() {
		t.Fatal("an event sent after exit was kept")
	}
}

// TestObservedEndTakenOnce: a destination end left by the watcher waits in
// the runner's inbox until the runner takes it, once, and wakes it.
func TestObservedEndTakenOnce(t *testing.T) {
	r := &Runner{in: newInbox(), stats: NewStats("a-to-b", "t", 0)}
	if r.endWaiting() {
		t.Fatal("an end waits before any was observed")
	}
	r.observeEnd(observedEnd{end: 0, at: time.Second})
	if !r.endWaiting() {
		t.Fatal("an observed end of 0 does not wait")
	}
	if !r.takeWoken() {
		t.Fatal("an observed end left no wake")
	}
	if o, ok := r.takeEnd(); !ok || o.end != 0 || o.at != time.Second {
		t.Fatalf("takeEnd = %+v %v, want end 0 at 1s", o, ok)
	}
	if _, ok := r.takeEnd(); ok || r.endWaiting() {
		t.Fatal("an end taken twice")
	}
	// A MIRRORING partition whose log ends where its appends do is not
	// woken: nothing foreign, nothing lost.
	r.stats.ps.State = partition.Mirroring
	r.stats.setDestEnd(5)
	r.observeEnd(observedEnd{end: 5, at: 2 * time.Second})
	if r.endWaiting() {
		t.Fatal("an end equal to the published one woke a MIRRORING partition")
	}
}

// takeWoken reports whether the runner was woken since it last looked,
// and takes the wake.
func (r *Runner) takeWoken() bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	w := r.in.woken
	r.in.woken = false
	return w
}
