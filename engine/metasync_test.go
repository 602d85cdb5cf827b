package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
)

const metaInterval = 100 * time.Millisecond

// withMetaSync turns on metadata sync with the default exclusions.
func withMetaSync(include string, aclRules ...string) func(*engine.MirrorConfig) {
	return func(c *engine.MirrorConfig) {
		c.SyncMetadata(metaInterval, nil, nil, aclRules)
		if include != "" {
			if err := c.DiscoverTopics(include); err != nil {
				panic(err)
			}
		}
	}
}

// topicsOf returns the cluster's topic names.
func topicsOf(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopicsWithInternal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return td.Names()
}

func TestTopicDiscoveryAndPartitionGrowth(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, e.srcCl, "orders", 2, 50, "before")
	e.startMirrorWith(withMetaSync(".*"), "orders")
	e.waitCaughtUp("orders")

	// Created while the mirror runs: one to discover, one the default
	// exclusion (__.*) keeps out.
	e.src.CreateTopic(t, "__private", 1, nil)
	e.src.CreateTopic(t, "payments", 2, nil)
	enginetest.Produce(t, e.srcCl, "__private", 1, 10, "hidden")
	enginetest.Produce(t, e.srcCl, "payments", 2, 80, "new")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		n := 0
		for _, p := range e.partitions() {
			if p.Topic == "payments" {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d partitions of payments mirrored: %s", n, e.describe())
	})
	e.waitCaughtUp("orders", "payments")
	e.assertIdentical("orders", "payments")
	// Topics are discovered in name order within a round, so __private
	// would have been created before payments.
	if slices.Contains(topicsOf(t, e.dstCl), "__private") {
		t.Fatal("excluded topic __private was created on the destination")
	}
	for _, p := range e.partitions() {
		if p.Topic == "__private" {
			t.Fatalf("excluded topic __private is mirrored: %s", e.describe())
		}
	}

	// Partition growth on the source reaches the destination and the new
	// partition mirrors at identical offsets.
	resp, err := e.src.Admin(t).CreatePartitions(context.Background(), 1, "payments")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Produce(t, e.srcCl, "payments", 3, 40, "grown")
	e.waitState("payments", 2, partition.Mirroring)
	e.waitCaughtUp("orders", "payments")
	e.assertIdentical("payments")
	if ends, err := enginetest.Ends(context.Background(), e.dstCl, "payments"); err != nil || len(ends) != 3 {
		t.Fatalf("destination payments ends %v (%v), want 3 partitions", ends, err)
	}
}

func TestTopicDiscoveryReportsDeletedSourceTopic(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "doomed", 1, nil)
	enginetest.Produce(t, e.srcCl, "doomed", 1, 10, "x")
	e.startMirrorWith(withMetaSync(""), "doomed")
	e.waitCaughtUp("doomed")
	resp, err := e.src.Admin(t).DeleteTopics(context.Background(), "doomed")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, e.eng, func(ev engine.Event) bool {
		return ev.Level == engine.LevelError && ev.Topic == "doomed" && strings.Contains(ev.Message, "source topic doomed was deleted")
	})
	p := e.waitState("doomed", 0, partition.Failed)
	if !strings.Contains(p.Error, "no longer exists on the source") || p.Retryable {
		t.Fatalf("error %q (retryable %v): want a non-retryable deleted source topic", p.Error, p.Retryable)
	}
}

// waitEvent reads the engine's events until one matches.
func waitEvent(t *testing.T, eng *engine.Engine, match func(engine.Event) bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case ev := <-eng.Events():
			if match(ev) {
				return
			}
		case <-deadline.C:
			t.Fatal("no matching event within 30s")
		}
	}
}

// topicConfig returns a topic config's value and whether it is set on the
// topic itself (not a default).
func topicConfig(t *testing.T, cl *kgo.Client, topic, key string) (string, bool) {
	t.Helper()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	val, set := "", false
	for _, c := range rc.Configs {
		if c.Key == key {
			val = c.MaybeValue()
			set = c.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	return val, set
}

func TestConfigSyncCopiesOverridesExceptExcluded(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "cfg", 1, map[string]*string{
		"retention.ms":        kadm.StringPtr("3600000"),
		"min.insync.replicas": kadm.StringPtr("2"),
		"compression.type":    kadm.StringPtr("gzip"),
		"segment.bytes":       kadm.StringPtr("1048576"),
	})
	e.startMirrorWith(withMetaSync(""), "cfg")
	waitConfig := func(key, want string, wantSet bool) {
		t.Helper()
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			v, set := topicConfig(t, e.dstCl, "cfg", key)
			return set == wantSet && (!wantSet || v == want), fmt.Sprintf("destination %s=%q (set on topic: %v), want %q (set: %v)", key, v, set, want, wantSet)
		})
	}
	waitConfig("retention.ms", "3600000", true)
	waitConfig("segment.bytes", "1048576", true)

	alter := func(op kadm.IncrementalOp, key, val string) {
		t.Helper()
		ac := kadm.AlterConfig{Op: op, Name: key}
		if op == kadm.SetConfig {
			ac.Value = kadm.StringPtr(val)
		}
		resp, err := e.src.Admin(t).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{ac}, "cfg")
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
	alter(kadm.SetConfig, "retention.ms", "7200000")
	waitConfig("retention.ms", "7200000", true)
	// An override removed on the source is removed on the destination.
	alter(kadm.DeleteConfig, "segment.bytes", "")
	waitConfig("segment.bytes", "", false)

	if v, set := topicConfig(t, e.dstCl, "cfg", "min.insync.replicas"); set {
		t.Errorf("excluded min.insync.replicas reached the destination: %q", v)
	}
	if v, _ := topicConfig(t, e.dstCl, "cfg", "compression.type"); v != "producer" {
		t.Errorf("destination compression.type = %q, want producer", v)
	}
	if v, _ := topicConfig(t, e.dstCl, "cfg", "message.timestamp.type"); v != "CreateTime" {
		t.Errorf("destination message.timestamp.type = %q, want CreateTime", v)
	}
}

// acl is one ACL in the include-rule notation, for readable assertions.
type acl struct{ resourceType, name, operation, permission, principal string }

func (a acl) String() string {
	return strings.Join([]string{a.resourceType, a.name, a.operation, a.permission, a.principal}, ";")
}

func createACLs(t *testing.T, cl *kgo.Client, acls ...acl) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		var err error
		if c.ResourceType, err = kmsg.ParseACLResourceType(a.resourceType); err != nil {
			t.Fatal(err)
		}
		if c.Operation, err = kmsg.ParseACLOperation(a.operation); err != nil {
			t.Fatal(err)
		}
		if c.PermissionType, err = kmsg.ParseACLPermissionType(a.permission); err != nil {
			t.Fatal(err)
		}
		c.ResourceName, c.ResourcePatternType, c.Principal, c.Host = a.name, kmsg.ACLResourcePatternTypeLiteral, a.principal, "*"
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatal(err)
		}
	}
}

func listACLs(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, strings.ToLower(acl{r.ResourceType.String(), r.ResourceName, a.Operation.String(), a.PermissionType.String(), a.Principal}.String()))
		}
	}
	slices.Sort(out)
	return out
}

func TestACLSyncFollowsIncludeRules(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "orders", 1, nil)
	e.src.CreateTopic(t, "other", 1, nil)
	copied := []acl{
		{"topic", "orders", "read", "allow", "User:alice"},
		{"group", "app-1", "read", "allow", "User:alice"},
	}
	notCopied := []acl{
		{"topic", "other", "read", "allow", "User:alice"},    // topic not mirrored
		{"topic", "orders", "write", "deny", "User:mallory"}, // no rule for deny
		{"group", "app-1", "delete", "allow", "User:alice"},  // operation not included
		{"group", "batch-1", "read", "allow", "User:alice"},  // name not included
	}
	createACLs(t, e.srcCl, append(slices.Clone(copied), notCopied...)...)
	destOnly := acl{"topic", "orders", "write", "allow", "User:failover-app"}
	createACLs(t, e.dstCl, destOnly)

	e.startMirrorWith(withMetaSync("", "topic;*;*;allow;*", "group;app-.*;read;allow;User:alice"), "orders")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		have := listACLs(t, e.dstCl)
		for _, a := range copied {
			if !slices.Contains(have, strings.ToLower(a.String())) {
				return false, fmt.Sprintf("destination ACLs %v lack %s", have, a)
			}
		}
		return true, ""
	})
	// Every selected ACL is created by one request, so whatever else a
	// wrong rule would copy is on the destination by now.
	have := listACLs(t, e.dstCl)
	for _, a := range notCopied {
		if slices.Contains(have, strings.ToLower(a.String())) {
			t.Errorf("ACL %s reached the destination against the include rules", a)
		}
	}
	if len(have) != len(copied)+1 {
		t.Errorf("destination ACLs %v: want the %d copied plus the destination's own", have, len(copied))
	}
	// A later round copies an ACL added since; the destination's own ACL
	// is still there and nothing was created twice.
	late := acl{"topic", "orders", "describe", "allow", "User:bob"}
	createACLs(t, e.srcCl, late)
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		got := listACLs(t, e.dstCl)
		return slices.Contains(got, strings.ToLower(late.String())), fmt.Sprintf("destination ACLs %v lack %s", got, late)
	})
	want := append(have, strings.ToLower(late.String()))
	slices.Sort(want)
	if got := listACLs(t, e.dstCl); !slices.Equal(got, want) || !slices.Contains(got, strings.ToLower(destOnly.String())) {
		t.Errorf("destination ACLs %v, want %v", got, want)
	}
}

// TestACLSyncDefaultsToTheMirrorsScope: a mirror whose configuration does
// not set acls.include (KIP-1279's default "*") syncs the ACLs of what it
// mirrors: a READ ACL of its mirrored topic and the ACL of a group whose
// offsets it syncs reach the destination; a cluster ACL, a transactional
// id ACL and the WRITE on its topic (held back until the stop) do not. A
// mirror with an empty acls.include syncs none. A destination without an
// authorizer (SECURITY_DISABLED) makes the ACL sync skip quietly, not fail.
func TestACLSyncDefaultsToTheMirrorsScope(t *testing.T) {
	src, dst := enginetest.Pair(t)
	srcCl, dstCl := src.Client(t), dst.Client(t)
	src.CreateTopic(t, "orders", 1, nil)
	src.CreateTopic(t, "other", 1, nil)
	copied := []acl{
		{"topic", "orders", "read", "allow", "User:alice"},
		{"group", "app-1", "read", "allow", "User:alice"},
	}
	onlyOff := acl{"topic", "other", "read", "allow", "User:bob"} // the topic of the mirror without ACL sync
	outOfScope := []acl{
		{"topic", "orders", "write", "allow", "User:alice"},
		{"cluster", "kafka-cluster", "alter", "allow", "User:alice"},
		{"transactional_id", "app-tx", "write", "allow", "User:alice"},
	}
	createACLs(t, srcCl, append(append(slices.Clone(copied), onlyOff), outOfScope...)...)

	ctx := context.Background()
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for name, extra := range map[string]map[string]string{
		"all": {},
		"off": {"acls.include": ""},
	} {
		cfg := map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ","), "mirror.metadata.refresh.interval.ms": "100"}
		maps.Copy(cfg, extra)
		if _, err := adm.CreateMirror(ctx, name, props.FromMap(cfg), false); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for name, topic := range map[string]string{"all": "orders", "off": "other"} {
		sel, err := engine.ParseTopics(topic)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := adm.Start(ctx, name, sel, nil); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dst.Addrs(), Instance: "acls"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.Join(ctx); err != nil {
		t.Fatal(err)
	}
	meta := func(name string) engine.MetaSyncStatus {
		for _, m := range eng.Snapshot().Mirrors {
			if m.Name == name {
				return m.Meta
			}
		}
		return engine.MetaSyncStatus{}
	}
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		have := listACLs(t, dstCl)
		for _, a := range copied {
			if !slices.Contains(have, strings.ToLower(a.String())) {
				return false, fmt.Sprintf("destination ACLs %v lack %s", have, a)
			}
		}
		return meta("off").Rounds >= 3, fmt.Sprintf("mirror off ran %d sync rounds", meta("off").Rounds)
	})
	if have := listACLs(t, dstCl); len(have) != len(copied) {
		t.Errorf("destination ACLs %v: want only the %d of mirror all in its scope (mirror off syncs none)", have, len(copied))
	}
	if off := meta("off").ACLs; !off.LastSync.IsZero() || off.LastError != "" {
		t.Errorf("mirror off synced ACLs: %+v", off)
	}

	// The destination loses its authorizer: no ACL error, rounds go on.
	dst.ControlKey(int16(kmsg.DescribeACLs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = kerr.SecurityDisabled.Code
		return resp, nil, true
	})
	from := meta("all").ACLs.LastSync
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		all := meta("all").ACLs
		if all.LastError != "" {
			t.Fatalf("ACL sync against a destination without an authorizer failed: %s", all.LastError)
		}
		return all.LastSync.After(from.Add(300 * time.Millisecond)), fmt.Sprintf("ACL sync of mirror all: %+v", all)
	})
}

// TestRefreshFailsMirrorOnSourceClusterChange: KIP-1279's refresh checks the
// source cluster id and, on a mismatch, stops the mirror in terminal FAILED.
// Every partition is PAUSED, so no fetch, append or alignment runs and only
// the refresh can see that the source bootstrap now reaches another cluster
// (replaced on the same ports): within two refresh intervals every
// partition is FAILED, non-retryable, cause source_cluster_changed. Before,
// the refresh only warned and skipped its round, and the partitions stayed
// PAUSED.
func TestRefreshFailsMirrorOnSourceClusterChange(t *testing.T) {
	const interval = time.Second
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	e := envOn(t, src, dst)
	e.startEngine()
	src.CreateTopic(t, "orders", 3, nil)
	src.CreateTopic(t, "clicks", 1, nil)
	enginetest.Produce(t, e.srcCl, "orders", 3, 20, "x")
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.SyncMetadata(interval, nil, nil, nil) }, "orders", "clicks")
	e.waitCaughtUp("orders", "clicks")
	if err := e.eng.Control(context.Background(), engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		e.waitState("orders", p, partition.Paused)
	}
	e.waitState("clicks", 0, partition.Paused)

	var ports []int
	for _, a := range src.Addrs() {
		_, p, _ := strings.Cut(a, ":")
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	src.Close()
	other, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("some-other-cluster"), kfake.Ports(ports...), kfake.SeedTopics(3, "orders", "clicks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	swapped := time.Now()

	var took time.Duration
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ps := e.partitions()
		for _, p := range ps {
			if p.State != partition.Failed || p.Retryable || p.Cause != partition.CauseSourceClusterChanged {
				return false, fmt.Sprintf("%s/%d %s (%s, retryable %v) after %s: %s", p.Topic, p.Partition, p.State, p.Cause, p.Retryable, time.Since(swapped), e.describe())
			}
		}
		took = time.Since(swapped)
		return len(ps) == 4, e.describe()
	})
	t.Logf("every partition FAILED %s after the swap (refresh interval %s)", took, interval)
	if took > 2*interval {
		t.Errorf("FAILED after %s, want within two refresh intervals (%s)", took, 2*interval)
	}
	for _, p := range e.partitions() {
		if !strings.Contains(p.Error, "metadata sync") || !strings.Contains(p.Error, "some-other-cluster") || !strings.Contains(p.Error, "kmirror-test-source") {
			t.Errorf("%s/%d error %q: want the refresh naming both cluster ids", p.Topic, p.Partition, p.Error)
		}
		if p.PrevState != partition.Paused {
			t.Errorf("%s/%d failed from %s, want PAUSED (where recover returns it)", p.Topic, p.Partition, p.PrevState)
		}
	}
}
