package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// rebuildInterrupt fails every rebuild at one point while held; with
// after > 0 it lets that many calls at the point pass first (a copy
// interrupted after its first writes).
type rebuildInterrupt struct {
	mu    sync.Mutex
	point string
	after int
	held  bool
	hits  int
}

func (f *rebuildInterrupt) at(point string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if point != f.point || !f.held {
		return nil
	}
	if f.hits++; f.hits <= f.after {
		return nil
	}
	return errors.New("interrupted by the test at " + point)
}

func (f *rebuildInterrupt) release() {
	f.mu.Lock()
	f.held = false
	f.mu.Unlock()
}

// rebuildEnv is a joined instance mirroring rb (2 partitions, 5 batches
// of 10 records each) with unclean-election recovery on, from a source
// whose network the test can take down.
func rebuildEnv(t *testing.T) (*env, *engine.Admin, *enginetest.Network) {
	t.Helper()
	n := enginetest.NewNetwork()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(n.Listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	settings := maps.Clone(fastCheckpoints)
	settings["mirror.unclean.leader.election.enable"] = "true"
	e, adm := newStateEnvWith(t, src, dst, "rb", 2, settings)
	prod := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	for _, tag := range []string{"a", "b", "c", "d", "e"} {
		enginetest.Produce(t, prod, "rb", 2, 10, tag)
	}
	e.waitCaughtUp("rb")
	waitPersisted(t, adm, "rb", 2, partition.Mirroring, "one")
	return e, adm, n
}

// rebuildRec returns the rebuild record of rb, if any.
func rebuildRec(t *testing.T, adm *engine.Admin) (store.RebuildRecord, bool) {
	t.Helper()
	cat, err := adm.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := cat.Rebuilds[store.TopicRef{Mirror: "a-to-b", Topic: "rb"}]
	return rec, ok
}

// waitStep waits until __mirror_state records rb's rebuild at step.
func waitStep(t *testing.T, e *env, adm *engine.Admin, step store.RebuildStep) store.RebuildRecord {
	t.Helper()
	var rec store.RebuildRecord
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		var ok bool
		rec, ok = rebuildRec(t, adm)
		return ok && rec.Step == step, fmt.Sprintf("rebuild record %+v (present %v), want step %s; %s", rec, ok, step, e.describe())
	})
	return rec
}

// quarantines lists the quarantine topics of rb.
func quarantines(t *testing.T, e *env) []string {
	t.Helper()
	topics, err := e.dst.Admin(t).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range topics.Names() {
		if strings.HasPrefix(n, "rb.kmirror-quarantine-") {
			out = append(out, n)
		}
	}
	return out
}

// TestRebuildResumesFromItsRecord interrupts a rebuild between each pair of
// its steps (after planning, mid-copy, after the quarantine, after the
// delete) and lets it be continued by the same instance's retry, or by a
// new instance once the first is closed. Every time the destination has
// the topic again (another id, recorded), one quarantine holds exactly
// each partition's destination-only records, the topic mirrors identical,
// and __mirror_state and describe show the rebuild done.
func TestRebuildResumesFromItsRecord(t *testing.T) {
	points := []struct {
		point string
		after int // calls let through first
		step  store.RebuildStep
	}{
		{engine.RebuildFaultPlanned, 0, store.RebuildPlanned},
		{engine.RebuildFaultCopy, 4, store.RebuildPlanned},
		{engine.RebuildFaultQuarantined, 0, store.RebuildQuarantined},
		{engine.RebuildFaultDeleted, 0, store.RebuildDeleted},
	}
	for _, pt := range points {
		for _, by := range []string{"retry", "new instance"} {
			t.Run(pt.point+" then "+by, func(t *testing.T) {
				testRebuildResume(t, pt.point, pt.after, pt.step, by == "new instance", false)
			})
		}
	}
}

// TestRebuildRecreatesWithSourceGone: a rebuild interrupted after the
// delete is continued by a new instance while the source does not answer:
// the topic is recreated from the record alone; once the source is back it
// mirrors identical.
func TestRebuildRecreatesWithSourceGone(t *testing.T) {
	testRebuildResume(t, engine.RebuildFaultDeleted, 0, store.RebuildDeleted, true, true)
}

func testRebuildResume(t *testing.T, point string, after int, step store.RebuildStep, newInstance, sourceGone bool) {
	e, adm, n := rebuildEnv(t)
	ctx := context.Background()
	oldID := topicID(t, e.dst, "rb")
	before := map[int32][]enginetest.Record{}
	for p := range int32(2) {
		recs, err := enginetest.Consume(ctx, e.dstCl, "rb", p)
		if err != nil || len(recs) != 50 {
			t.Fatalf("destination rb/%d: %d records, %v", p, len(recs), err)
		}
		before[p] = recs
	}
	f := &rebuildInterrupt{point: point, after: after, held: true}
	t.Cleanup(engine.SetRebuildFault(f.at, 5))
	ends := map[int32]int64{0: 10, 1: 35}
	uncleanEnds(e, "rb", ends)
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
	rec := waitStep(t, e, adm, step)
	if point == engine.RebuildFaultCopy {
		// Interrupted after four writes of 5: what partition 0 keeps
		// below its divergence point, offsets 0..9, is in the retained
		// topic, and 10 of partition 1's 35.
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			_, end, err := enginetest.Offsets(ctx, kadm.NewClient(e.dstCl), rec.Retained, 1)
			return err == nil && end == 10, fmt.Sprintf("retained %s/1 ends at %d (%v), want 10 (a partial copy)", rec.Retained, end, err)
		})
	}
	if exists := topicExists(t, e, "rb"); exists != (step < store.RebuildDeleted) {
		t.Fatalf("at step %s the destination topic exists: %v (record %+v)", step, exists, rec)
	}
	if newInstance {
		e.eng.Close()
		if sourceGone {
			n.Down("")
		}
		f.release()
		e.eng = e.joinInstance("two")
	} else {
		f.release()
	}
	done := waitStep(t, e, adm, store.RebuildDone)
	if sourceGone {
		// Recreated from the record while the source still does not
		// answer.
		if newID := topicID(t, e.dst, "rb"); newID != done.DestTopicID {
			t.Fatalf("destination rb has id %s, the record names %s", newID, done.DestTopicID)
		}
		n.Up()
	}
	e.waitCaughtUp("rb")
	e.assertIdentical("rb")
	newID := topicID(t, e.dst, "rb")
	if newID == oldID || done.DestTopicID != newID || done.ReplacedTopicID != oldID {
		t.Errorf("topic ids: old %s, now %s; record replaced %s, recreated %s", oldID, newID, done.ReplacedTopicID, done.DestTopicID)
	}
	if qs := quarantines(t, e); len(qs) != 1 || qs[0] != done.Quarantine {
		t.Errorf("quarantine topics %v, want only %s", qs, done.Quarantine)
	}
	for p := range int32(2) {
		got, err := enginetest.Consume(ctx, e.dstCl, done.Quarantine, p)
		if err != nil {
			t.Fatal(err)
		}
		want := before[p][ends[p]:]
		if len(got) != len(want) || done.Ranges[p].Copied != int64(len(want)) || !done.Ranges[p].Checked {
			t.Fatalf("quarantine partition %d holds %d records, record says %+v; want the %d from offset %d", p, len(got), done.Ranges[p], len(want), ends[p])
		}
		for i := range got {
			if got[i].Key != want[i].Key || got[i].Value != want[i].Value || got[i].Timestamp != want[i].Timestamp {
				t.Fatalf("quarantine %d/%d is %+v, want destination rb/%d offset %d %+v", p, i, got[i], p, want[i].Offset, want[i])
			}
		}
	}
	owner := "one"
	if newInstance {
		owner = "two"
	}
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		rows, err := adm.Describe(ctx, "a-to-b")
		if err != nil {
			return false, err.Error()
		}
		ok := 0
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s/%d %s %s %s", r.Topic, r.Partition, r.State, r.DestinationTopicID, r.Owner))
			if r.Topic == "rb" && r.State == partition.Mirroring.String() && r.DestinationTopicID == newID && r.Owner == owner {
				ok++
			}
		}
		return ok == 2, fmt.Sprintf("describe %v, want both partitions MIRRORING into %s by %s", got, newID, owner)
	})
}

// topicExists reports whether the destination has topic (asking with a
// new client: a client's metadata may be cached).
func topicExists(t *testing.T, e *env, topic string) bool {
	t.Helper()
	td, err := e.dst.Admin(t).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := td[topic]
	return ok && d.Err == nil
}

// TestForeignRecreatedDestinationFails: a destination topic deleted and
// created again by someone else while no instance runs (no rebuild
// record) is not taken for a rebuild's: the new owner fails the partitions,
// non-retryable, naming both topic ids.
func TestForeignRecreatedDestinationFails(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "fr", 1, fastCheckpoints)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "fr", 1, 30, "a")
	e.waitCaughtUp("fr")
	oldID := topicID(t, e.dst, "fr")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		recs := waitPersisted(t, adm, "fr", 1, partition.Mirroring, "one")
		return recs[0].LastOffset == 29 && recs[0].DestTopicID == oldID, fmt.Sprintf("record %+v", recs[0])
	})
	e.eng.Close()
	if err := e.dst.DeleteTopic("fr"); err != nil {
		t.Fatal(err)
	}
	e.dst.CreateTopic(t, "fr", 1, nil)
	newID := topicID(t, e.dst, "fr")
	e.eng = e.joinInstance("two")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		for _, p := range e.partitions() {
			if p.State == partition.Failed && !p.Retryable && strings.Contains(p.Error, newID) && strings.Contains(p.Error, oldID) {
				return true, ""
			}
		}
		return false, e.describe()
	})
}
