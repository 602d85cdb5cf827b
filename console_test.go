package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/tui"
)

// instanceGroup describes the instance group: its state and each member's
// instance (client id) with the __mirror_state shards assigned to it.
func instanceGroup(t *testing.T, adm *kadm.Client) (state string, members map[string][]int32, ids map[string]string) {
	t.Helper()
	gs, err := adm.DescribeGroups(t.Context(), engine.GroupID)
	if err != nil {
		t.Fatal(err)
	}
	g := gs[engine.GroupID]
	members, ids = map[string][]int32{}, map[string]string{}
	for _, m := range g.Members {
		var shards []int32
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range a.Topics {
				shards = append(shards, tp.Partitions...)
			}
		}
		slices.Sort(shards)
		members[m.MemberID], ids[m.MemberID] = shards, m.ClientID
	}
	return g.State, members, ids
}

// shardOwners maps each assigned __mirror_state shard to the client id of
// the instance-group member it is assigned to.
func shardOwners(t *testing.T, adm *kadm.Client) map[int32]string {
	t.Helper()
	_, members, ids := instanceGroup(t, adm)
	out := map[int32]string{}
	for m, shards := range members {
		for _, p := range shards {
			out[p] = ids[m]
		}
	}
	return out
}

// groupShape is the instance group as one comparable line: its state and
// each member's id, instance and shards.
func groupShape(t *testing.T, adm *kadm.Client) string {
	t.Helper()
	state, members, ids := instanceGroup(t, adm)
	var out []string
	for m, shards := range members {
		out = append(out, fmt.Sprintf("%s %s %v", m, ids[m], shards))
	}
	slices.Sort(out)
	return state + " " + strings.Join(out, "; ")
}

// stateEnds are the end offsets of every __mirror_state shard.
func stateEnds(t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(t.Context(), store.Topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// keysSince returns the keys of the records written to __mirror_state
// between two ends, decoded, with the owner of each partition record.
func keysSince(t *testing.T, dst *enginetest.Cluster, from, to map[int32]int64) []string {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	want := 0
	for p, end := range to {
		if end > from[p] {
			offs[p] = kgo.NewOffset().At(from[p])
			want += int(end - from[p])
		}
	}
	if want == 0 {
		return nil
	}
	cl := dst.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{store.Topic: offs}))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []string
	for seen := 0; seen < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records added to %s", seen, want, store.Topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to[r.Partition] {
				return
			}
			seen++
			k, v, err := store.Decode(r.Key, r.Value)
			if err != nil {
				t.Fatalf("record %q: %v", r.Key, err)
			}
			desc := k.String()
			if pr, ok := v.(store.PartitionRecord); ok {
				desc += " owner " + pr.Owner
			}
			out = append(out, desc)
		})
	}
	return out
}

// consoleRun is one `kmirror console` as the command builds it: its
// observer and its model, run headless by teatest.
type consoleRun struct {
	o  *engine.Observer
	tm *teatest.TestModel
}

func startConsole(t *testing.T, dst *enginetest.Cluster, readOnly bool) *consoleRun {
	t.Helper()
	a := observerArgs{bootstrap: dst.Addrs(), readOnly: readOnly, theme: "dark", logFile: filepath.Join(t.TempDir(), "console.log"),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o, err := newConsoleObserver(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	opts := consoleOptions(a)
	opts.Tick = tui.MinTick
	tm := teatest.NewTestModel(t, tui.NewModel(o, opts), teatest.WithInitialTermSize(160, 48))
	return &consoleRun{o: o, tm: tm}
}

func (c *consoleRun) quit(t *testing.T) {
	t.Helper()
	c.tm.Send(tea.KeyPressMsg{Code: 'q', Text: "q"})
	c.tm.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))
	c.o.Close()
}

// observedByInstances waits until the console's observer shows every
// partition MIRRORING under one of the instances, with both ends known,
// and returns the destination ends it shows.
func observedByInstances(t *testing.T, o *engine.Observer, parts int) map[string]int64 {
	t.Helper()
	ends := map[string]int64{}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		snap := o.Snapshot()
		n := 0
		clear(ends)
		for _, m := range snap.Mirrors {
			for _, p := range m.Partitions {
				if p.State == partition.Mirroring && (p.Owner == "one" || p.Owner == "two") && p.SourceHWM >= 0 && p.DestLogEnd >= 0 {
					n++
					ends[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.DestLogEnd
				}
			}
		}
		return n == parts && snap.Unowned.Partitions == 0 && len(snap.Lost) == 0, fmt.Sprintf("snapshot %+v", snap)
	})
	return ends
}

// TestConsoleObservesWithoutJoining: two `kmirror run` processes own every
// shard. `kmirror console --read-only` and then `kmirror console` open on
// the same destination: the instance group keeps its members and their
// shards, the read-only console writes no record at all, both show the
// instances' partitions with lag, rates and states that update, and a
// pause from the console is executed by the instance owning the topic.
func TestConsoleObservesWithoutJoining(t *testing.T) {
	s := newScript(t)
	// Their shards (10, 36, 27) fall in different quarters of the shard
	// space, so the two instances are likely to share them; which instance
	// owns which is the group's choice.
	topics := []string{"t0", "t4", "t9"}
	must := func(args ...string) {
		t.Helper()
		if err := s.command(args); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, s.stdout, s.stderr)
		}
	}
	for _, topic := range topics {
		must("topic", topic, "2")
		must("produce", topic, "30")
	}
	dst := strings.Join(s.dst.Addrs(), ",")
	must("file", "m.properties", "bootstrap.servers="+strings.Join(s.src.Addrs(), ","))
	must("exec", "--bootstrap-server", dst, "--create", "--mirror", "a-to-b", "--mirror-config", filepath.Join(s.work, "m.properties"))
	must("exec", "--bootstrap-server", dst, "--start", "--mirror", "a-to-b", "--topics", "t.*")
	must("instance", "one", "--heartbeat-interval", "500ms")
	must("instance", "two", "--heartbeat-interval", "500ms")
	adm := s.dst.Admin(t)
	// Each partition's owner is the instance the group assigned its shard
	// to. The assignment of shards to members is the balancer's choice, so
	// the test follows it rather than expecting a particular split.
	enginetest.Wait(t, 90*time.Second, func() (bool, string) {
		assigned := shardOwners(t, adm)
		owners := map[string]int{}
		wrong := 0
		for _, r := range describeRows(t, s.dst) {
			if r.State != partition.Mirroring.String() {
				continue
			}
			owners[r.Owner]++
			if want := assigned[store.Shard("a-to-b", r.Topic, r.Partition)]; r.Owner != want {
				wrong++
			}
		}
		g := groupShape(t, adm)
		members := map[string]bool{}
		for _, id := range assigned {
			members[id] = true
		}
		return wrong == 0 && owners["one"]+owners["two"] == 6 && len(members) == 2 && strings.HasPrefix(g, "Stable"),
			fmt.Sprintf("MIRRORING by owner %v (%d not the assigned owner); group %s", owners, wrong, g)
	})
	group := groupShape(t, adm)

	// Traffic all along, so the rates and lag have something to show.
	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, s.src.Client(t, enginetest.ProducerOpts("lz4", true)...), 2, 10, stop, topics...)
	defer func() { close(stop); wg.Wait() }()

	// Read-only: nothing written, the group untouched.
	before := stateEnds(t, adm)
	ro := startConsole(t, s.dst, true)
	first := observedByInstances(t, ro.o, 6)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		snap := ro.o.Snapshot()
		grown, rated := 0, 0
		for _, m := range snap.Mirrors {
			for _, p := range m.Partitions {
				if p.DestLogEnd > first[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] {
					grown++
				}
				if p.RecordsPerSec > 0 {
					rated++
				}
			}
		}
		return grown == 6 && rated > 0, fmt.Sprintf("%d partitions grew, %d with a rate", grown, rated)
	})
	teatest.WaitFor(t, ro.tm.Output(), func(b []byte) bool {
		return strings.Contains(string(b), "MIRRORING") && strings.Contains(string(b), "rec/s")
	}, teatest.WithDuration(30*time.Second))
	ro.quit(t)
	for _, k := range keysSince(t, s.dst, before, stateEnds(t, adm)) {
		if k != "instance/one" && k != "instance/two" && !strings.HasSuffix(k, " owner one") && !strings.HasSuffix(k, " owner two") {
			t.Errorf("a record the instances did not write appeared with the read-only console: %s", k)
		}
	}
	if g := groupShape(t, adm); g != group {
		t.Fatalf("the instance group changed with the read-only console:\nbefore %s\nafter  %s", group, g)
	}

	// Not read-only: a pause is recorded like --pause and run by the owner.
	before = stateEnds(t, adm)
	rw := startConsole(t, s.dst, false)
	observedByInstances(t, rw.o, 6)
	// The model shows what the observer saw at its next tick: the key
	// acts on the row under the cursor only once the rows are there.
	teatest.WaitFor(t, rw.tm.Output(), func(b []byte) bool {
		return strings.Contains(string(b), "t0") && strings.Contains(string(b), "MIRRORING")
	}, teatest.WithDuration(30*time.Second))
	rw.tm.Send(tea.KeyPressMsg{Code: 'p', Text: "p"}) // the cursor's topic, t0
	var owner string
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		snap := rw.o.Snapshot()
		paused := 0
		for _, p := range snap.Mirrors[0].Partitions {
			if p.Topic == "t0" && p.State == partition.Paused && (p.Owner == "one" || p.Owner == "two") {
				paused++
				owner = p.Owner
			}
		}
		return paused == 2, fmt.Sprintf("partitions %+v", snap.Mirrors[0].Partitions)
	})
	rw.quit(t)
	topicRecords := 0
	for _, k := range keysSince(t, s.dst, before, stateEnds(t, adm)) {
		switch {
		case k == "topic/a-to-b/t0":
			topicRecords++
		case k == "instance/one" || k == "instance/two" || strings.HasSuffix(k, " owner one") || strings.HasSuffix(k, " owner two"):
		default:
			t.Errorf("the console wrote %s, not only the pause", k)
		}
	}
	if topicRecords != 1 {
		t.Errorf("the pause wrote %d records of topic t0, want 1", topicRecords)
	}
	if g := groupShape(t, adm); g != group {
		t.Fatalf("the instance group changed with the console:\nbefore %s\nafter  %s", group, g)
	}
	t.Logf("t0 paused by its owner %s", owner)
}
