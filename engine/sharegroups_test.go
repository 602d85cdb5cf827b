package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// startOffsets returns a share group's share-partition start offsets on a
// cluster, by topic and partition (only partitions with share state).
func startOffsets(t *testing.T, c *enginetest.Cluster, group string) map[string]map[int32]int64 {
	t.Helper()
	resp, err := kadm.NewClient(c.Client(t)).DescribeShareGroupOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int32]int64{}
	for topic, ps := range resp[group].Offsets {
		for p, o := range ps {
			if o.Err == nil && o.StartOffset >= 0 {
				if out[topic] == nil {
					out[topic] = map[int32]int64{}
				}
				out[topic][p] = o.StartOffset
			}
		}
	}
	return out
}

// setStartOffsets sets an empty share group's start offsets on a cluster.
func setStartOffsets(t *testing.T, c *enginetest.Cluster, group, topic string, at ...int64) {
	t.Helper()
	var os kadm.Offsets
	for p, o := range at {
		os.Add(kadm.Offset{Topic: topic, Partition: int32(p), At: o})
	}
	resp, err := kadm.NewClient(c.Client(t)).AlterShareGroupOffsets(context.Background(), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// shareConsume has a real share consumer of group read, accept and
// acknowledge every record of topic on c (n per partition), then leave.
func shareConsume(t *testing.T, c *enginetest.Cluster, group, topic string, partitions, n int) {
	t.Helper()
	c.SetGroupConfigs(group, map[string]string{"share.auto.offset.reset": "earliest"})
	cl := c.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seen := 0; seen < partitions*n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			seen++
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
}

// shareGroup returns the snapshot of a share group, if the sync published it.
func shareGroup(e *env, group string) (engine.GroupSnapshot, bool) {
	for _, m := range e.eng.Snapshot().Mirrors {
		for _, g := range m.Groups {
			if g.Group == group && g.Kind == engine.GroupShare {
				return g, true
			}
		}
	}
	return engine.GroupSnapshot{}, false
}

func TestShareGroupOffsetSync(t *testing.T) {
	e := newEnv(t)
	for _, topic := range []string{"orders", "clicks"} {
		e.src.CreateTopic(t, topic, 2, nil)
		enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), topic, 2, 60, "x")
	}

	// A share group processed the first 60 records of each orders partition
	// on A, then 40 more arrived: its start offsets are mid-topic. Another
	// group was reset to different offsets per partition.
	shareConsume(t, e.src, "workers", "orders", 2, 60)
	enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 40, "y")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := startOffsets(t, e.src, "workers")
		return fmt.Sprint(got) == "map[orders:map[0:60 1:60]]", fmt.Sprintf("workers on A %v", got)
	})
	setStartOffsets(t, e.src, "auditors", "clicks", 15, 45)

	e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncGroups(100*time.Millisecond, []string{".*"}, nil) }, "orders", "clicks")
	e.waitCaughtUp("orders", "clicks")
	for _, g := range []string{"workers", "auditors"} {
		want := startOffsets(t, e.src, g)
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			got := startOffsets(t, e.dst, g)
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("%s on B %v, on A %v", g, got, want)
		})
	}
	g, ok := shareGroup(e, "workers")
	if !ok || g.SkipReason != "" || g.LastSync.IsZero() || len(g.Partitions) != 2 || g.Partitions[0].Destination != 60 {
		t.Fatalf("workers in the snapshot: %+v (found %v)", g, ok)
	}
	for _, m := range e.eng.Snapshot().Mirrors {
		if m.ShareGroupsSkipped != "" {
			t.Fatalf("share groups skipped on clusters that support them: %s", m.ShareGroupsSkipped)
		}
		for _, g := range m.Groups {
			if g.Kind == engine.GroupConsumer && (g.Group == "workers" || g.Group == "auditors") {
				t.Fatalf("share group %s also synced as a consumer group: %+v", g.Group, g)
			}
		}
	}

	// A share group with members on B is left alone, and says why.
	live := e.dst.Client(t, kgo.ShareGroup("live"), kgo.ConsumeTopics("orders"))
	dstAdm := e.dst.Admin(t)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		live.PollFetches(ctx) // join and stay a member
		d, err := dstAdm.DescribeShareGroups(context.Background(), "live")
		return err == nil && len(d["live"].Members) > 0, fmt.Sprintf("live not joined on B: %v %+v", err, d)
	})
	setStartOffsets(t, e.src, "live", "orders", 10, 10)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		g, _ := shareGroup(e, "live")
		return strings.Contains(g.SkipReason, "active on the destination"), fmt.Sprintf("live: %+v", g)
	})
	if got := startOffsets(t, e.dst, "live")["orders"]; got[0] == 10 || got[1] == 10 {
		t.Fatalf("start offsets of a group active on B were overwritten: %v", got)
	}

	// Failover of orders: its start offsets on B are never written again,
	// while clicks (still mirrored) keeps syncing.
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b", Topics: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	e.waitState("orders", 0, partition.Stopped)
	e.waitState("orders", 1, partition.Stopped)
	setStartOffsets(t, e.src, "workers", "orders", 90, 95)
	setStartOffsets(t, e.src, "workers", "clicks", 30, 35)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := startOffsets(t, e.dst, "workers")["clicks"]
		return fmt.Sprint(got) == "map[0:30 1:35]", fmt.Sprintf("workers on clicks on B %v", got)
	})
	if got := startOffsets(t, e.dst, "workers")["orders"]; fmt.Sprint(got) != "map[0:60 1:60]" {
		t.Fatalf("stopped topic's start offsets on B moved from 60 to %v", got)
	}
}

// TestShareGroupSyncUnsupported: a cluster without share groups makes the
// share-group sync stand aside with a visible reason; data and consumer
// groups keep mirroring.
func TestShareGroupSyncUnsupported(t *testing.T) {
	noShare := kversion.Stable()
	for _, k := range []kmsg.Key{kmsg.ShareGroupHeartbeat, kmsg.ShareGroupDescribe, kmsg.ShareFetch, kmsg.ShareAcknowledge,
		kmsg.DescribeShareGroupOffsets, kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets} {
		noShare.SetMaxKeyVersion(k.Int16(), -1)
	}
	for _, tc := range []struct {
		name   string
		dst    []kfake.Opt
		source func(*enginetest.Cluster) // breaks the source's share groups
		reason string
	}{
		{name: "destination without the APIs", dst: []kfake.Opt{kfake.MaxVersions(noShare)},
			reason: "the destination cluster does not support share groups"},
		{name: "source answers UNSUPPORTED_VERSION", source: func(c *enginetest.Cluster) {
			c.ControlKey(kmsg.DescribeShareGroupOffsets.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
				resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
				for _, g := range req.Groups {
					rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
					rg.GroupID, rg.ErrorCode = g.GroupID, kerr.UnsupportedVersion.Code
					resp.Groups = append(resp.Groups, rg)
				}
				return resp, nil, true
			})
		}, reason: "the source cluster answers UNSUPPORTED_VERSION to DescribeShareGroupOffsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := enginetest.NewCluster(t, "kmirror-test-source")
			dst := enginetest.NewCluster(t, "kmirror-test-destination", tc.dst...)
			e := envOn(t, src, dst)
			e.startEngine()
			e.src.CreateTopic(t, "orders", 2, nil)
			enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 50, "x")
			setStartOffsets(t, e.src, "workers", "orders", 20, 20)
			if tc.source != nil {
				tc.source(e.src)
			}
			consumeAndCommit(t, e.src, "billing", "orders", 2, 30)

			e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncGroups(100*time.Millisecond, []string{".*"}, nil) }, "orders")
			e.waitCaughtUp("orders")
			want := committed(t, e.src, "billing")
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				m := e.eng.Snapshot().Mirrors[0]
				got := committed(t, e.dst, "billing")
				return strings.Contains(m.ShareGroupsSkipped, tc.reason) && fmt.Sprint(got) == fmt.Sprint(want),
					fmt.Sprintf("share groups skipped %q; billing on B %v, on A %v", m.ShareGroupsSkipped, got, want)
			})
			if g, ok := shareGroup(e, "workers"); ok {
				t.Fatalf("share group published although share groups are skipped: %+v", g)
			}
			e.assertIdentical("orders")
		})
	}
}
