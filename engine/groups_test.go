package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// committed returns a group's committed offsets on a cluster (empty while
// the group does not exist there).
func committed(t *testing.T, c *enginetest.Cluster, group string) map[string]map[int32]int64 {
	t.Helper()
	resp, err := kadm.NewClient(c.Client(t)).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[string]map[int32]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

// consumeAndCommit has a real consumer of group read n records from each
// partition of topic on c, commit them and leave.
func consumeAndCommit(t *testing.T, c *enginetest.Cluster, group, topic string, partitions, n int) {
	t.Helper()
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[int32]int{}
	done := func() bool {
		for p := range int32(partitions) {
			if seen[p] < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if seen[r.Partition] < n {
				seen[r.Partition]++
				if err := cl.CommitRecords(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cl.Close()
}

func TestGroupOffsetSync(t *testing.T) {
	e := newEnv(t)
	for _, topic := range []string{"orders", "clicks"} {
		e.src.CreateTopic(t, topic, 2, nil)
		enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), topic, 2, 100, "x")
	}
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncGroups(100*time.Millisecond, []string{".*"}, nil) }, "orders", "clicks")
	e.waitCaughtUp("orders", "clicks")

	// A group consumed part of the topics on A.
	consumeAndCommit(t, e.src, "billing", "orders", 2, 40)
	consumeAndCommit(t, e.src, "billing", "clicks", 2, 25)
	want := committed(t, e.src, "billing")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := committed(t, e.dst, "billing")
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("B %v, A %v", got, want)
	})

	// A group with members on B is left alone, and says why.
	live := e.dst.Client(t, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"))
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		live.PollFetches(context.Background()) // join and stay a member
		return e.dst.GroupInfo("live") != nil && len(e.dst.GroupInfo("live").Members) > 0, "live not joined on B"
	})
	consumeAndCommit(t, e.src, "live", "orders", 2, 10)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		for _, g := range e.eng.Snapshot().Mirrors[0].Groups {
			if g.Group == "live" && strings.Contains(g.SkipReason, "active on the destination") && g.Skip == engine.SkipActive {
				return true, ""
			}
		}
		return false, fmt.Sprintf("groups %+v", e.eng.Snapshot().Mirrors[0].Groups)
	})

	// Failover of orders: its offsets on B are never overwritten again,
	// while clicks (still mirrored) keeps syncing.
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b", Topics: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	e.waitState("orders", 0, partition.Stopped)
	e.waitState("orders", 1, partition.Stopped)
	ordersAtStop := committed(t, e.dst, "billing")["orders"]
	consumeAndCommit(t, e.src, "billing", "orders", 2, 60)
	consumeAndCommit(t, e.src, "billing", "clicks", 2, 70)
	clicksNow := committed(t, e.src, "billing")["clicks"]
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := committed(t, e.dst, "billing")["clicks"]
		return fmt.Sprint(got) == fmt.Sprint(clicksNow), fmt.Sprintf("clicks on B %v, on A %v", got, clicksNow)
	})
	if got := committed(t, e.dst, "billing")["orders"]; fmt.Sprint(got) != fmt.Sprint(ordersAtStop) {
		t.Fatalf("stopped topic's offsets on B moved from %v to %v", ordersAtStop, got)
	}

	// The group resumes on B exactly where it was: no duplicate, no gap.
	cl := e.dst.Client(t, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	first := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(first) < 2 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		}
	}
	for p, off := range first {
		if off != ordersAtStop[p] {
			t.Fatalf("billing resumed orders/%d at %d on B, committed %d", p, off, ordersAtStop[p])
		}
	}
}

// TestGroupOffsetSyncSkipsPartitionsMissingOnDestination: a group's offset
// on a source partition the destination does not have yet (partition growth
// not applied, as here without metadata sync) is left out of the commit,
// which would otherwise fail for the whole group or land at offset 0.
func TestGroupOffsetSyncSkipsPartitionsMissingOnDestination(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "orders", 2, nil)
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncGroups(100*time.Millisecond, []string{".*"}, nil) }, "orders")
	resp, err := e.src.Admin(t).UpdatePartitions(context.Background(), 3, "orders")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 3, 30, "x")
	consumeAndCommit(t, e.src, "billing", "orders", 3, 10)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := committed(t, e.dst, "billing")["orders"]
		return got[0] == 10 && got[1] == 10, fmt.Sprintf("B %v", got)
	})
	if got, ok := committed(t, e.dst, "billing")["orders"][2]; ok {
		t.Fatalf("orders/2 (not on the destination) committed at %d on B", got)
	}
	// The group counts as synced: the missing partition is left out of
	// the commit instead of failing it.
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		for _, g := range e.eng.Snapshot().Mirrors[0].Groups {
			if g.Group == "billing" {
				return g.SkipReason == "" && !g.LastSync.IsZero() && len(g.Partitions) == 2, fmt.Sprintf("%+v", g)
			}
		}
		return false, "billing not in the snapshot"
	})
}
