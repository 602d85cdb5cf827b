package replica

import (
	"errors"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// A runner with nothing to do parks: its goroutine ends instead of
// waiting, so an idle partition costs its fields and no goroutine (a
// goroutine's stack is 4 KiB at least, and the garbage collector scans
// every one each cycle). Everything a runner is handed goes through poke,
// which starts a goroutine for a parked runner; the goroutine goes on with
// the loop where the parked one left it, all the runner's state being in
// its fields.
//
// Ownership passes with the parked flag, under the inbox's mutex: a
// goroutine parks only when no wake came since it last looked, and a wake
// of a parked runner clears the flag and starts the goroutine, so exactly
// one goroutine runs the runner, and no wake is lost. A parked runner
// keeps no wake channel: 96 bytes less per idle partition.

// errParked ends MIRRORING's loop while the runner parks.
var errParked = errors.New("runner parked")

// park parks the runner and reports whether the goroutine must end; false
// when a wake arrived meanwhile and the goroutine goes on itself.
func (r *Runner) park() bool {
	r.deps.Starter.started(r)
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.woken { // a wake came after the inbox was looked into: go on
		r.in.woken = false
		return false
	}
	r.in.parked, r.in.wake = true, nil
	return true
}

// unparkLocked starts a goroutine for the runner if it is parked; r.in.mu
// is held.
func (r *Runner) unparkLocked() {
	if r.in.parked {
		r.in.parked = false
		go r.loop(r.tc.Ctx) // counted since addTopic, see exit
	}
}

// scheduleRetry arranges for the state machine's Tick after d: the timer
// leaves a wake, so a FAILED partition waiting for its retry parks too.
func (r *Runner) scheduleRetry(d time.Duration) {
	rare := r.rarely()
	if rare.retry != nil {
		rare.retry.Stop()
	}
	r.in.mu.Lock()
	r.in.retrySeq++
	seq := r.in.retrySeq
	r.in.retryDue = false
	r.in.mu.Unlock()
	rare.retry = time.AfterFunc(d, func() {
		r.in.mu.Lock()
		if r.in.retrySeq == seq {
			r.in.retryDue = true
		}
		r.in.mu.Unlock()
		r.poke()
	})
}

// takeRetryDue reports whether the scheduled retry is due, once.
func (r *Runner) takeRetryDue() bool {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	due := r.in.retryDue
	r.in.retryDue = false
	return due
}

// maxStarting bounds the runners starting at once: aligning and fencing,
// before their first MIRRORING, first park or exit. Thousands of
// partitions starting together would each hold a goroutine while they wait
// for their start-up requests, and the runtime keeps the descriptor of
// every goroutine it ever ran (about 0.4 KiB) for good; the shared requests
// (batcher) are as full with a thousand at a time.
const maxStarting = 1024

// Starter starts runners, at most maxStarting at once; the others wait
// their turn in order.
type Starter struct {
	mu      sync.Mutex
	running int
	queue   []pendingStart
}

type pendingStart struct {
	r       *Runner
	initial []partition.Event
}

// Start runs r, one of tc's runners (counted in the engine's and the
// topic's wait groups by the caller), now or once a start slot frees.
func (s *Starter) Start(r *Runner, tc *TopicCancel, initial []partition.Event) {
	r.tc = tc
	s.mu.Lock()
	if s.running >= maxStarting {
		s.queue = append(s.queue, pendingStart{r, initial})
		s.mu.Unlock()
		return
	}
	s.running++
	s.mu.Unlock()
	r.starting = true
	go r.run(r.tc.Ctx, initial...)
}

// started gives back the start slot of r, if it holds one, to the next
// runner waiting for one.
func (s *Starter) started(r *Runner) {
	if !r.starting {
		return
	}
	r.starting = false
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.running--
		s.mu.Unlock()
		return
	}
	next := s.queue[0]
	s.queue[0] = pendingStart{}
	s.queue = s.queue[1:]
	s.mu.Unlock()
	next.r.starting = true
	go next.r.run(next.r.tc.Ctx, next.initial...)
}
