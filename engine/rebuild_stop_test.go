package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// TestStopDuringRebuildRecreatesTheTopic: a stop (failover) that lands
// while a rebuild has deleted the destination topic and not recreated it
// yet finishes the recreate from the rebuild record before the partitions
// report STOPPED, with no LME of the deleted topic; the record ends done.
// Before, the stop reported STOPPED on a topic that no longer existed and
// the record stayed at "deleted" for good: clients failed over to nothing.
func TestStopDuringRebuildRecreatesTheTopic(t *testing.T) {
	e, adm, _ := rebuildEnv(t)
	ctx := context.Background()
	f := &rebuildInterrupt{point: engine.RebuildFaultDeleted, held: true}
	t.Cleanup(engine.SetRebuildFault(f.at, 5))
	uncleanEnds(e, "rb", map[int32]int64{0: 10, 1: 35})
	sel, err := engine.ParseTopics("rb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Control(ctx, engine.CmdPause, "a-to-b", &sel, false); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, adm, "rb", 2, partition.Paused, "one")
	if _, err := adm.Control(ctx, engine.CmdResume, "a-to-b", &sel, false); err != nil {
		t.Fatal(err)
	}
	waitStep(t, e, adm, store.RebuildDeleted)
	if topicExists(t, e, "rb") {
		t.Fatal("the rebuild recorded the delete and the topic is there")
	}

	if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", &sel, false); err != nil {
		t.Fatal(err)
	}
	// The stop ends the rebuild first: until the recreate can go on, no
	// partition reports STOPPED.
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		for _, ps := range e.partitions() {
			if ps.Topic == "rb" && ps.State == partition.Stopped && !topicExists(t, e, "rb") {
				t.Fatalf("rb/%d STOPPED while the destination topic does not exist (rebuild record at step deleted)", ps.Partition)
			}
		}
		for {
			select {
			case ev := <-e.eng.Events():
				if strings.Contains(ev.Message, "stopping during the rebuild of rb") {
					return true, ""
				}
				continue
			default:
			}
			return false, "no stop during the rebuild yet: " + e.describe()
		}
	})
	f.release()
	for p := range int32(2) {
		ps := e.waitState("rb", p, partition.Stopped)
		if ps.LastOffset != -1 {
			t.Errorf("rb/%d STOPPED with last mirrored offset %d, an offset of the deleted topic; want none", p, ps.LastOffset)
		}
	}
	if !topicExists(t, e, "rb") {
		t.Fatal("STOPPED, and the destination topic does not exist")
	}
	rec := waitStep(t, e, adm, store.RebuildDone)
	if id := topicID(t, e.dst, "rb"); rec.DestTopicID != id {
		t.Errorf("destination rb has id %s, the rebuild record names %s", id, rec.DestTopicID)
	}
	recs := waitPersisted(t, adm, "rb", 2, partition.Stopped, "one")
	for p, r := range recs {
		if r.LastOffset != -1 {
			t.Errorf("rb/%d STOPPED record names last mirrored offset %d; want none", p, r.LastOffset)
		}
	}
}
