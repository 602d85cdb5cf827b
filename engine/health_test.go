package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestCountsByCause: a destination Produce error a MIRRORING partition
// gets past by realigning (a writer error: OUT_OF_ORDER_SEQUENCE_NUMBER)
// counts as a realignment, and a partition going
// FAILED counts as a failure of its cause.
func TestCountsByCause(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "counted", 1, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "counted", 1, 50, "first")
	e.startMirror("counted")
	e.waitCaughtUp("counted")
	mirror := func() engine.MirrorSnapshot { return e.eng.Snapshot().Mirrors[0] }
	if m := mirror(); len(m.Failures) != 0 || len(m.Realignments) != 0 {
		t.Fatalf("counts before any fault: failures %v, realignments %v", m.Failures, m.Realignments)
	}

	h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counted", Err: kerr.OutOfOrderSequenceNumber, Count: 1})
	enginetest.Produce(t, cl, "counted", 1, 50, "second")
	e.waitCaughtUp("counted")
	h.Remove()
	enginetest.Wait(t, 10*time.Second, func() (bool, string) {
		m := mirror()
		return m.Realignments[partition.CauseTransient] >= 1, fmt.Sprintf("realignments %v", m.Realignments)
	})
	if m := mirror(); len(m.Failures) != 0 {
		t.Errorf("failures %v after realignments only", m.Failures)
	}

	e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "counted", Err: kerr.InvalidRecord, Count: -1})
	enginetest.Produce(t, cl, "counted", 1, 10, "refused")
	failed := e.waitState("counted", 0, partition.Failed)
	if n := mirror().Failures[failed.Cause]; n < 1 {
		t.Errorf("failures %v, want one of cause %s", mirror().Failures, failed.Cause)
	}
}

// TestGroupSyncLastRound: the end of each group offset sync round without
// error is published, also when there is no group to sync.
func TestGroupSyncLastRound(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "orders", 1, nil)
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncGroups(50*time.Millisecond, []string{".*"}, nil) }, "orders")
	var first time.Time
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		first = e.eng.Snapshot().Mirrors[0].GroupSyncLast
		return !first.IsZero(), "no group sync round ended"
	})
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		last := e.eng.Snapshot().Mirrors[0].GroupSyncLast
		return last.After(first), fmt.Sprintf("last round %s, first %s", last, first)
	})
}
