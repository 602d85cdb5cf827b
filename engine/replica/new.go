package replica

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/engine/txn"
)

// What the engine sees of a runner: New builds one, Starter.Start runs it,
// and the mirror hands it commands (Send), failures found elsewhere
// (Inject), the destination end its watcher read (ObserveEnd) and
// checkpoint requests (RequestCheckpoints); its fetchers hand it their
// answers (Deliver). What it publishes is in its Stats.

// Init is how a new runner starts: its persisted status, the events it is
// fed first, and the mirrored transactions it must continue.
type Init struct {
	Status partition.Status
	Events []partition.Event
	Txns   []txn.Producer

	// The durable position of the last owner, so a new one can tell a
	// source that lost mirrored records.
	LastOffset int64
	LastEpoch  int32
	Lineage    []EpochStart
	Writer     batch.Writer // the writer identity last recorded (producer id 0: none), for verification
	DestTopic  [16]byte     // the destination topic id last recorded (zero: unknown)
	// StopAborted are the recorded first offsets of the transactions the
	// stop aborted: rewriting the record must not lose them.
	StopAborted []int64
}

// New returns the runner of partition p of topic, publishing into stats
// and persisting its records through persist (nil: nothing is persisted).
func New(d *Deps, topic string, p int32, stats *Stats, persist *StateSink, init Init) *Runner {
	r := &Runner{
		deps: d, topic: topic, partition: p, stats: stats, st: init.Status,
		in:       newInbox(),
		maxBytes: d.FetchBytes,
		position: position{lastEpoch: -1, mirrored: -1, mirroredEpoch: -1},
		srcHWM:   -1,
		persist:  persist,
	}
	r.restore(init.LastOffset, init.LastEpoch, init.Lineage)
	// Before run publishes it, the status and the initial events
	// already say whether the partition is (to be) stopped.
	stats.SetStatus(init.Status)
	for _, ev := range init.Events {
		r.in.noteCommand(ev)
	}
	if init.Writer.ProducerID > 0 {
		r.writer = init.Writer
	}
	// Kept until alignment: a record written before it names the
	// topic the LME was mirrored into, not none.
	r.dst.TopicID = init.DestTopic
	if len(init.Txns) > 0 {
		r.rarely().restoredTxns = init.Txns
	}
	if len(init.StopAborted) > 0 {
		r.rarely().stopAborted = init.StopAborted
	}
	return r
}

// Partition is the runner's partition.
func (r *Runner) Partition() int32 { return r.partition }

// Stats is what the runner publishes.
func (r *Runner) Stats() *Stats { return r.stats }

// Persists reports whether the runner writes partition records.
func (r *Runner) Persists() bool { return r.persist != nil }

// ObserveEnd hands the runner a destination log end its mirror's watcher
// read from a request sent at at (Deps.SinceBase).
func (r *Runner) ObserveEnd(end int64, at time.Duration) {
	r.observeEnd(observedEnd{end: end, at: at})
}

// NewStateSink is a StateSink writing through w.
//
// lease bounds each write by the instance's right to write (nil: none).
func NewStateSink(w *store.Writer, lease func(context.Context) (context.Context, context.CancelFunc)) *StateSink {
	return &StateSink{w: w, lease: lease}
}
