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
	"github.com/kmirror/kmirror/engine/store"
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

// TestResumeOfAllTopicsLeavesAStoppedTopicAlone: a pause and a resume of
// every topic of a mirror, after one topic was stopped (failed over),
// leave that topic stopped: its record's desired state stays stop, its
// partitions STOPPED, and nothing of kmirror's lands on it, while the
// other topic pauses and mirrors again. A resume naming only stopped
// topics is refused, saying --start mirrors one again. Before, the resume
// recorded start for the stopped topic too and kmirror mirrored into the
// topic its clients had failed over to.
func TestResumeOfAllTopicsLeavesAStoppedTopicAlone(t *testing.T) {
	e, adm := newStateEnvWith(t, enginetest.NewCluster(t, "kmirror-test-source"), enginetest.NewCluster(t, "kmirror-test-destination"), "failed", 1, fastCheckpoints)
	ctx := context.Background()
	e.src.CreateTopic(t, "other", 1, nil)
	sel, err := engine.ParseTopics("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, e.srcCl, "failed", 1, 10, "a")
	enginetest.Produce(t, e.srcCl, "other", 1, 10, "a")
	e.waitCaughtUp("failed", "other")
	failed, err := engine.ParseTopics("failed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", &failed, false); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, adm, "failed", 1, partition.Stopped, "one")
	stoppedEnds, err := enginetest.Ends(ctx, e.dstCl, "failed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Control(ctx, engine.CmdResume, "a-to-b", &failed, false); err == nil || !strings.Contains(err.Error(), "--start") {
		t.Fatalf("a resume of the stopped topic alone: %v, want a refusal naming --start", err)
	}
	if done, err := adm.Control(ctx, engine.CmdPause, "a-to-b", nil, false); err != nil || !slices.Equal(done, []string{"other"}) {
		t.Fatalf("a pause of every topic recorded %v (%v), want only other", done, err)
	}
	waitPersisted(t, adm, "other", 1, partition.Paused, "one")
	if done, err := adm.Control(ctx, engine.CmdResume, "a-to-b", nil, false); err != nil || !slices.Equal(done, []string{"other"}) {
		t.Fatalf("a resume of every topic recorded %v (%v), want only other", done, err)
	}
	enginetest.Produce(t, e.srcCl, "failed", 1, 5, "after")
	enginetest.Produce(t, e.srcCl, "other", 1, 5, "after")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		src, err1 := enginetest.Ends(ctx, e.srcCl, "other")
		dst, err2 := enginetest.Ends(ctx, e.dstCl, "other")
		return err1 == nil && err2 == nil && slices.Equal(src, dst), fmt.Sprintf("other: source ends %v, destination %v; %s", src, dst, e.describe())
	})
	waitPersisted(t, adm, "other", 1, partition.Mirroring, "one")
	cat, err := adm.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td := cat.Topics[store.TopicRef{Mirror: "a-to-b", Topic: "failed"}]; td.Desired != partition.DesiredStop {
		t.Fatalf("the stopped topic's desired state is %s after the resume of every topic, want stop", td.Desired)
	}
	waitPersisted(t, adm, "failed", 1, partition.Stopped, "one")
	if ends, err := enginetest.Ends(ctx, e.dstCl, "failed"); err != nil || ends[0] != stoppedEnds[0] {
		t.Fatalf("the stopped topic's destination ends at %v (%v), %v when it stopped", ends, err, stoppedEnds)
	}
}
