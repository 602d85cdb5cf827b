package engine_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// newStateEnv is an env whose mirror a-to-b is recorded in the destination's
// __mirror_state (created and started as the CLI does) and run by an
// instance that joined it, as `kmirror run` does.
func newStateEnv(t *testing.T, topic string, partitions int32) (*env, *engine.Admin) {
	t.Helper()
	src, dst := enginetest.Pair(t)
	return newStateEnvOn(t, src, dst, topic, partitions)
}

// newStateEnvOn is newStateEnv on clusters the test started.
func newStateEnvOn(t *testing.T, src, dst *enginetest.Cluster, topic string, partitions int32) (*env, *engine.Admin) {
	t.Helper()
	return newStateEnvWith(t, src, dst, topic, partitions, nil)
}

// newStateEnvWith is newStateEnvOn with more mirror settings.
func newStateEnvWith(t *testing.T, src, dst *enginetest.Cluster, topic string, partitions int32, settings map[string]string) (*env, *engine.Admin) {
	t.Helper()
	e := envOn(t, src, dst)
	ctx := context.Background()
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	src.CreateTopic(t, topic, partitions, nil)
	cfg := map[string]string{
		"bootstrap.servers":                      strings.Join(src.Addrs(), ","),
		"mirror.failed.retry.initial.backoff.ms": "20",
		"mirror.failed.retry.max.backoff.ms":     "1000",
	}
	maps.Copy(cfg, settings)
	if _, err := adm.CreateMirror(ctx, "a-to-b", props.FromMap(cfg), false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics(topic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	e.eng = e.joinInstance("one")
	return e, adm
}

// joinInstance starts an engine instance on the destination's
// __mirror_state; it is closed when the test ends (closing twice is fine).
func (e *env) joinInstance(name string) *engine.Engine {
	e.t.Helper()
	eng, err := engine.New(context.Background(), engine.Config{Destination: e.dst.Addrs(), Instance: name})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(eng.Close)
	if err := eng.Join(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return eng
}

// waitAll waits until the engine runs every partition of the mirror in
// state (runners of this instance, not records of others).
func (e *env) waitAll(partitions int, state partition.State) {
	e.t.Helper()
	enginetest.Wait(e.t, 60*time.Second, func() (bool, string) {
		n := 0
		for _, p := range e.partitions() {
			if p.Owner == e.eng.Snapshot().Instance && p.State == state {
				n++
			}
		}
		return n == partitions, fmt.Sprintf("%d of %d partitions %s here: %s", n, partitions, state, e.describe())
	})
}

// waitPersisted waits until __mirror_state holds every partition of topic
// in state, written by owner.
func waitPersisted(t *testing.T, adm *engine.Admin, topic string, partitions int, state partition.State, owner string) map[int32]store.PartitionRecord {
	t.Helper()
	var recs map[int32]store.PartitionRecord
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		cat, err := adm.Catalog(context.Background())
		if err != nil {
			return false, err.Error()
		}
		recs = map[int32]store.PartitionRecord{}
		var got []string
		for _, r := range cat.PartitionsOf("a-to-b", topic) {
			got = append(got, fmt.Sprintf("%d:%s@%s", r.Partition, r.State, r.Owner))
			if r.State == state && r.Owner == owner {
				recs[r.Partition] = r
			}
		}
		return len(recs) == partitions, fmt.Sprintf("persisted %v, want %d partitions %s by %s", got, partitions, state, owner)
	})
	return recs
}

// moveStateLeaders moves the leadership of every __mirror_state partition to
// the next broker, and the group and transaction coordinators with it.
func moveStateLeaders(t *testing.T, c *enginetest.Cluster) {
	t.Helper()
	for p := range int32(store.Partitions) {
		if err := c.MoveTopicPartition(store.Topic, p, otherNode(c.LeaderFor(store.Topic, p))); err != nil {
			t.Fatal(err)
		}
	}
	c.RehashCoordinators()
}

// TestStateLeadershipMoves moves the leadership of every __mirror_state
// partition (and the instances' group coordinator) while records flow, and
// again while paused. The instance keeps mirroring, reads the operator's
// pause and resume from the moved partitions, persists each transition
// there, and the data stays identical.
func TestStateLeadershipMoves(t *testing.T) {
	e, adm := newStateEnv(t, "state", 3)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "state", 3, 100, "first")
	e.waitCaughtUp("state")
	before := waitPersisted(t, adm, "state", 3, partition.Mirroring, "one")

	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "state")
	e.waitProgress("state", 3, 100)
	moveStateLeaders(t, e.dst)
	e.waitProgress("state", 3, 100)
	close(stop)
	wg.Wait()
	e.waitCaughtUp("state")

	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitAll(3, partition.Paused)
	waitPersisted(t, adm, "state", 3, partition.Paused, "one")

	moveStateLeaders(t, e.dst)
	enginetest.Produce(t, cl, "state", 3, 100, "while-paused")
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("state")
	after := waitPersisted(t, adm, "state", 3, partition.Mirroring, "one")
	for p, r := range after {
		if r.StateEpoch <= before[p].StateEpoch {
			t.Errorf("state/%d: persisted state epoch %d, not above %d from before the moves", p, r.StateEpoch, before[p].StateEpoch)
		}
	}
	e.assertIdentical("state")
}

// eventLog collects an engine's events until the test ends.
type eventLog struct {
	mu  sync.Mutex
	evs []engine.Event
}

func collectEvents(t *testing.T, eng *engine.Engine) *eventLog {
	l := &eventLog{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case ev := <-eng.Events():
				l.mu.Lock()
				l.evs = append(l.evs, ev)
				l.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
	return l
}

// matching returns the events of level whose message contains every one
// of subs.
func (l *eventLog) matching(level engine.EventLevel, subs ...string) []engine.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []engine.Event
	for _, ev := range l.evs {
		if ev.Level != level {
			continue
		}
		all := true
		for _, s := range subs {
			all = all && strings.Contains(ev.Message, s)
		}
		if all {
			out = append(out, ev)
		}
	}
	return out
}

// TestCorruptStateRecordsSkipped writes records kmirror never wrote into
// __mirror_state while an instance runs: garbage under a key that is no
// kmirror key, a key with no value format, garbage under the key of a
// running partition, another partition's record under that key, and a
// record of a future format version. The instance reports each with an
// error event naming it and keeps mirroring and obeying operator commands.
// After compaction leaves the garbage as the partition key's only value, a
// newly started instance reports the records too, takes the mirror over and
// resumes from the destination log end: identical, nothing duplicated.
func TestCorruptStateRecordsSkipped(t *testing.T) {
	e, adm := newStateEnv(t, "guarded", 2)
	events := collectEvents(t, e.eng)
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	enginetest.Produce(t, cl, "guarded", 2, 100, "first")
	e.waitCaughtUp("guarded")
	recs := waitPersisted(t, adm, "guarded", 2, partition.Mirroring, "one")

	own := store.PartitionKey("a-to-b", "guarded", 0)
	other := recs[1]
	otherValue, err := store.EncodePartition(other)
	if err != nil {
		t.Fatal(err)
	}
	future := strings.Replace(string(otherValue), `"v":1`, `"v":99`, 1)
	if future == string(otherValue) {
		t.Fatalf("partition record %s has no version field to change", otherValue)
	}
	shard := own.Shard()
	bad := []struct {
		key, value []byte
		reported   string // the event names this
	}{
		{[]byte("not-a-kmirror-key"), []byte("\x00\xffgarbage"), "not-a-kmirror-key"},
		{nil, []byte("no key at all"), `skipped record ""`},
		{own.Bytes(), []byte("{half a json"), own.String()},
		{own.Bytes(), otherValue, "holds the value of partition/a-to-b/guarded/1"},
		{own.Bytes(), []byte(future), "version 99 is not supported"},
	}
	w := e.dst.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, b := range bad {
		r := &kgo.Record{Topic: store.Topic, Partition: shard, Key: b.key, Value: b.value}
		if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		var missing []string
		for _, b := range bad {
			if len(events.matching(engine.LevelError, "skipped record", b.reported)) == 0 {
				missing = append(missing, b.reported)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no error event for %q", missing)
	})

	// The instance goes on: it mirrors, and pauses and resumes on command.
	enginetest.Produce(t, cl, "guarded", 2, 100, "after-garbage")
	e.waitCaughtUp("guarded")
	ctx := context.Background()
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitAll(2, partition.Paused)
	if err := e.eng.Control(ctx, engine.Command{Kind: engine.CmdResume, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	e.waitAll(2, partition.Mirroring)

	// The foreign records go last on partition 0's key, then compaction
	// drops every valid value kmirror wrote under it.
	for _, b := range bad[2:] {
		r := &kgo.Record{Topic: store.Topic, Partition: shard, Key: b.key, Value: b.value}
		if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e.eng.Close()
	e.dst.Compact()
	enginetest.Produce(t, cl, "guarded", 2, 100, "between-instances")

	e.eng = e.joinInstance("two")
	events = collectEvents(t, e.eng)
	e.waitAll(2, partition.Mirroring)
	e.waitCaughtUp("guarded")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		n := len(events.matching(engine.LevelError, "skipped record", own.String()))
		return n > 0, "the new instance reported no skipped record"
	})
	enginetest.Produce(t, cl, "guarded", 2, 100, "second-instance")
	e.waitCaughtUp("guarded")
	e.assertIdentical("guarded")
	waitPersisted(t, adm, "guarded", 2, partition.Mirroring, "two")
}

// TestCloseWhileStateWritesHang: the destination stops answering writes to
// __mirror_state just as a partition fails and must persist that. Closing
// the instance (kmirror run on SIGTERM) still returns: the state write is
// given up with the runner, not retried until the destination answers.
func TestCloseWhileStateWritesHang(t *testing.T) {
	e, _ := newStateEnv(t, "frozen", 1)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "frozen", 1, 50, "first")
	e.waitCaughtUp("frozen")

	stateID := e.dst.TopicInfo(store.Topic).TopicID
	var swallowed atomic.Int32
	e.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			if t.Topic == store.Topic || t.TopicID == stateID {
				swallowed.Add(1)
				return nil, nil, true // never answered
			}
		}
		return nil, nil, false
	})
	e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "frozen", Err: kerr.InvalidRecord, Count: -1})
	enginetest.Produce(t, cl, "frozen", 1, 10, "refused")
	e.waitState("frozen", 0, partition.Failed)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return swallowed.Load() > 0, "no state write reached the destination"
	})

	closed := make(chan struct{})
	start := time.Now()
	go func() { e.eng.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("closed in %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Fatal("Close still waits for a state write the destination never answers")
	}
}
