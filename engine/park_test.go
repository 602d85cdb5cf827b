package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestIdlePartitionsParkAndWake: idle mirrored partitions keep no
// goroutine of their own, and a parked partition still wakes for
// everything it is handed: new source records, a pause, a resume, a stop.
func TestIdlePartitionsParkAndWake(t *testing.T) {
	const parts = 600
	e := newEnv(t)
	e.src.CreateTopic(t, "idle", parts, nil)
	enginetest.Produce(t, e.srcCl, "idle", parts, 1, "first")
	base := runtime.NumGoroutine()
	e.startMirror("idle")
	e.waitCaughtUp("idle")

	// Goroutines per broker, connection and mirror (the in-process
	// brokers' included), not per partition: under one for every
	// three partitions once they are idle.
	parked := func(what string) {
		t.Helper()
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			n := runtime.NumGoroutine() - base
			return n < parts/3, fmt.Sprintf("%s: %d goroutines more than before the mirror for %d partitions", what, n, parts)
		})
	}
	parked("caught up")

	// New records wake the parked runners through the fetcher.
	enginetest.Produce(t, e.srcCl, "idle", parts, 2, "second")
	e.waitCaughtUp("idle")
	parked("caught up again")

	// Commands wake them too.
	states := func(want partition.State) {
		t.Helper()
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			for _, p := range e.partitions() {
				if p.State != want {
					return false, fmt.Sprintf("idle/%d is %s, want %s", p.Partition, p.State, want)
				}
			}
			return true, ""
		})
	}
	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	states(partition.Paused)
	parked("paused")
	enginetest.Produce(t, e.srcCl, "idle", parts, 1, "while-paused")
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("idle")
	parked("resumed and caught up")
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	states(partition.Stopped)
	srcEnds, err := enginetest.Ends(ctx, e.srcCl, "idle")
	if err != nil {
		t.Fatal(err)
	}
	dstEnds, err := enginetest.Ends(ctx, e.dstCl, "idle")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for p := range parts {
		// One more on the destination: the stop's fence marker.
		if srcEnds[p]+1 != dstEnds[p] {
			t.Fatalf("idle/%d ends at %d on the source and %d on the destination, want the source's end and the stop's fence marker", p, srcEnds[p], dstEnds[p])
		}
		total += srcEnds[p]
	}
	if total != 4*parts {
		t.Fatalf("the destination holds %d records, want %d", total, 4*parts)
	}
	for _, p := range []int32{0, parts / 2, parts - 1} {
		if _, err := enginetest.CompareBatches(ctx, e.srcCl, e.dstCl, "idle", p); err != nil {
			t.Fatalf("idle/%d: %v", p, err)
		}
	}
}
