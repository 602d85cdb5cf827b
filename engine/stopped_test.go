package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// alterSourceConfig sets one topic config on the source.
func alterSourceConfig(t *testing.T, e *env, topic, key, val string) {
	t.Helper()
	resp, err := e.src.Admin(t).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(val)}}, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// waitRounds waits until the mirror has run n more metadata sync rounds
// and n more group sync rounds than when it was called: whatever a sync
// would copy has been copied by then.
func waitRounds(t *testing.T, eng *engine.Engine, n int64) {
	t.Helper()
	rounds := func() (int64, int64) {
		m := eng.Snapshot().Mirrors[0]
		return m.Meta.Rounds, m.GroupSyncRounds
	}
	meta0, groups0 := rounds()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		meta, groups := rounds()
		return meta >= meta0+n && groups >= groups0+n, fmt.Sprintf("metadata rounds %d (from %d), group rounds %d (from %d), want %d more", meta, meta0, groups, groups0, n)
	})
}

// TestStoppedTopicIsNeverSyncedAgain: after a stop, the failed-over
// destination topic keeps what it had: a config change on the source, a
// new ACL the include rules select, new group commits and a new source
// partition reach the topic still mirrored, never the stopped one, over
// several sync rounds.
func TestStoppedTopicIsNeverSyncedAgain(t *testing.T) {
	e := newEnv(t)
	for _, topic := range []string{"failed", "live"} {
		e.src.CreateTopic(t, topic, 2, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})
		enginetest.Produce(t, e.srcCl, topic, 2, 50, "x")
	}
	e.startMirrorWith(func(c *engine.MirrorConfig) {
		withMetaSync("", "topic;*;*;allow;*")(c)
		c.SyncGroups(metaInterval, []string{".*"}, nil)
	}, "failed", "live")
	e.waitCaughtUp("failed", "live")
	consumeAndCommit(t, e.src, "app", "failed", 2, 10)
	consumeAndCommit(t, e.src, "app", "live", 2, 10)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got, want := committed(t, e.dst, "app"), committed(t, e.src, "app")
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("B %v, A %v", got, want)
	})
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		v, _ := topicConfig(t, e.dstCl, "failed", "retention.ms")
		return v == "3600000", "failed retention.ms on B = " + v
	})

	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b", Topics: []string{"failed"}}); err != nil {
		t.Fatal(err)
	}
	e.waitState("failed", 0, partition.Stopped)
	e.waitState("failed", 1, partition.Stopped)
	offsetsAtStop := committed(t, e.dst, "app")["failed"]
	aclsAtStop := listACLs(t, e.dstCl)

	// The recovering source changes everything on both topics.
	for _, topic := range []string{"failed", "live"} {
		alterSourceConfig(t, e, topic, "retention.ms", "1000")
	}
	createACLs(t, e.srcCl, acl{"topic", "failed", "read", "allow", "User:old-app"}, acl{"topic", "live", "read", "allow", "User:old-app"})
	enginetest.Produce(t, e.srcCl, "failed", 2, 50, "y")
	enginetest.Produce(t, e.srcCl, "live", 2, 50, "y")
	consumeAndCommit(t, e.src, "app", "failed", 2, 60)
	consumeAndCommit(t, e.src, "app", "live", 2, 60)
	if resp, err := e.src.Admin(t).CreatePartitions(context.Background(), 1, "failed"); err != nil || resp.Error() != nil {
		t.Fatalf("grow source topic: %v %v", err, resp.Error())
	}

	// The topic still mirrored gets all of it...
	liveACL := strings.ToLower(acl{"topic", "live", "read", "allow", "User:old-app"}.String())
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		v, _ := topicConfig(t, e.dstCl, "live", "retention.ms")
		got, want := committed(t, e.dst, "app")["live"], committed(t, e.src, "app")["live"]
		acls := listACLs(t, e.dstCl)
		return v == "1000" && fmt.Sprint(got) == fmt.Sprint(want) && slices.Contains(acls, liveACL),
			fmt.Sprintf("live on B: retention.ms=%s, offsets %v (A %v), ACLs %v", v, got, want, acls)
	})
	// ...and after several more rounds the stopped one still has none.
	waitRounds(t, e.eng, 3)
	if v, _ := topicConfig(t, e.dstCl, "failed", "retention.ms"); v != "3600000" {
		t.Errorf("stopped topic's retention.ms on B = %s, want 3600000 (the value at the stop)", v)
	}
	if got := committed(t, e.dst, "app")["failed"]; fmt.Sprint(got) != fmt.Sprint(offsetsAtStop) {
		t.Errorf("stopped topic's group offsets on B moved from %v to %v", offsetsAtStop, got)
	}
	want := append(slices.Clone(aclsAtStop), liveACL)
	slices.Sort(want)
	if got := listACLs(t, e.dstCl); !slices.Equal(got, want) {
		t.Errorf("destination ACLs %v, want %v (the stopped topic's ACL not copied)", got, want)
	}
	if ends, err := enginetest.Ends(context.Background(), e.dstCl, "failed"); err != nil || len(ends) != 2 {
		t.Errorf("stopped topic on B has ends %v (%v), want its 2 partitions", ends, err)
	}
	for _, p := range e.partitions() {
		if p.Topic == "failed" && p.State != partition.Stopped {
			t.Errorf("failed/%d is %s, want STOPPED", p.Partition, p.State)
		}
	}
}
