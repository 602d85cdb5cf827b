package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// TestCheckEndJudgesByWhatWasAckedWhenRead: a destination log end read
// before an append was acknowledged is not a loss; an end below what was
// acknowledged before it was read is, and a realignment follows; an end
// beyond every append is a foreign write.
func TestCheckEndJudgesByWhatWasAckedWhenRead(t *testing.T) {
	clock := time.Unix(1000, 0)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	base := clock
	r := &Runner{deps: &Deps{Now: func() time.Time { return clock }, SinceBase: func(t time.Time) time.Duration { return t.Sub(base) }},
		stats: NewStats("a-to-b", "t", 0)}
	r.stats.ps.State = partition.Mirroring
	r.alignedAt = 0
	r.pos, r.acked = 100, 100

	observe := func(end int64, at time.Time) error {
		r.observeEnd(observedEnd{end: end, at: r.deps.SinceBase(at)})
		return r.checkEnd()
	}
	// The check is read at 100; an append to 120 is acknowledged before
	// the runner looks at it.
	read := tick()
	r.pos, r.acked = 120, 120
	tick()
	if err := observe(100, read); err != nil {
		t.Fatalf("end read before the ack: %v", err)
	}
	// The next check reads 110 although 120 was acknowledged before.
	read = tick()
	tick()
	err := observe(110, read)
	if !errors.Is(err, errRealign) {
		t.Fatalf("end below what was acknowledged before it was read: err = %v, want a realignment", err)
	}
	// Beyond every append: somebody else writes to the partition.
	read = tick()
	tick()
	var mismatch *OffsetMismatchError
	if err := observe(121, read); !errors.As(err, &mismatch) || !errors.Is(err, ErrForeignWrite) {
		t.Fatalf("end beyond the appends: err = %v, want a foreign write", err)
	}
}
