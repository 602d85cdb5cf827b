package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

func startObserver(t *testing.T, dst *enginetest.Cluster, readOnly bool) *engine.Observer {
	t.Helper()
	o, err := engine.NewObserver(context.Background(), engine.ObserverConfig{Destination: dst.Addrs(), ReadOnly: readOnly,
		Interval: 200 * time.Millisecond, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

// waitSnapshot waits until the observer publishes a snapshot cond accepts.
func waitSnapshot(t *testing.T, o *engine.Observer, cond func(engine.Snapshot) (bool, string)) engine.Snapshot {
	t.Helper()
	var snap engine.Snapshot
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		snap = o.Snapshot()
		if snap.Taken.IsZero() {
			return false, "no snapshot yet"
		}
		return cond(snap)
	})
	return snap
}

func observedParts(snap engine.Snapshot) []engine.PartitionSnapshot {
	if len(snap.Mirrors) != 1 {
		return nil
	}
	return snap.Mirrors[0].Partitions
}

// TestObserverShowsAnInstancesPartitions: an observer that is no instance
// shows the partitions another instance runs, with live ends on both
// clusters, their lag and rate, source epochs and the owner; a command it
// records is executed by that instance; read-only it records nothing.
func TestObserverShowsAnInstancesPartitions(t *testing.T) {
	e, _ := newStateEnv(t, "orders", 2)
	e.waitAll(2, partition.Mirroring)
	enginetest.Produce(t, e.srcCl, "orders", 2, 40, "a")
	o := startObserver(t, e.dst, false)
	waitSnapshot(t, o, func(s engine.Snapshot) (bool, string) {
		ps := observedParts(s)
		ok := s.Observer && s.Instance == "" && len(ps) == 2 && s.Unowned.Partitions == 0 && !s.DestReach.Down && s.Destination.ID != ""
		for _, p := range ps {
			ok = ok && p.State == partition.Mirroring && p.Owner == "one" && p.SourceHWM > 0 && p.DestLogEnd == p.SourceHWM &&
				p.Lag == 0 && p.SourceEpoch >= 0 && p.SourceLeader >= 0 && p.LastOffset == p.DestLogEnd-1
		}
		return ok, fmt.Sprintf("snapshot %+v", s)
	})

	// Traffic shows as a rate from the destination's growth.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			enginetest.Produce(t, e.srcCl, "orders", 2, 20, "b")
		}
	}()
	waitSnapshot(t, o, func(s engine.Snapshot) (bool, string) {
		ps := observedParts(s)
		return len(ps) == 2 && ps[0].RecordsPerSec > 0 && ps[1].RecordsPerSec > 0, fmt.Sprintf("partitions %+v", ps)
	})
	close(stop)
	<-done

	if err := o.Control(context.Background(), engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, o, func(s engine.Snapshot) (bool, string) {
		ps := observedParts(s)
		ok := len(ps) == 2
		for _, p := range ps {
			ok = ok && p.State == partition.Paused && p.Owner == "one"
		}
		return ok, fmt.Sprintf("partitions %+v", ps)
	})

	ro := startObserver(t, e.dst, true)
	if err := ro.Control(context.Background(), engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("read-only Control = %v, want ErrReadOnly", err)
	}
}

// TestObserverSeesTheSourceGo: with the source stopped, the observer's own
// look says so within a few refreshes, the lag in records becomes unknown
// and the instance's partitions stay shown.
func TestObserverSeesTheSourceGo(t *testing.T) {
	e, _ := newStateEnv(t, "orders", 2)
	e.waitAll(2, partition.Mirroring)
	o := startObserver(t, e.dst, true)
	waitSnapshot(t, o, func(s engine.Snapshot) (bool, string) {
		ps := observedParts(s)
		return len(ps) == 2 && ps[0].SourceHWM >= 0 && !s.Mirrors[0].SourceReach.Down, fmt.Sprintf("snapshot %+v", s)
	})
	e.src.Close()
	snap := waitSnapshot(t, o, func(s engine.Snapshot) (bool, string) {
		return len(s.Mirrors) == 1 && s.Mirrors[0].SourceReach.Down, fmt.Sprintf("source reach %+v", s.Mirrors)
	})
	m := snap.Mirrors[0]
	if !strings.Contains(m.SourceReach.Error, "this console") && !strings.Contains(m.SourceReach.Error, "instance one") {
		t.Errorf("source error %q names no witness", m.SourceReach.Error)
	}
	for _, p := range m.Partitions {
		if p.SourceHWM != -1 || p.Lag != 0 || p.Owner != "one" {
			t.Errorf("partition during the outage %+v", p)
		}
	}
	if snap.DestReach.Down {
		t.Errorf("destination reported down: %+v", snap.DestReach)
	}
}
