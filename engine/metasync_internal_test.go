package engine

import (
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetaSyncACLRules(t *testing.T) {
	alice := aclEntry{resourceType: kmsg.ACLResourceTypeTopic, name: "orders", pattern: kmsg.ACLResourcePatternTypeLiteral,
		principal: "User:alice", host: "*", operation: kmsg.ACLOperationRead, permission: kmsg.ACLPermissionTypeAllow}
	group := alice
	group.resourceType, group.name = kmsg.ACLResourceTypeGroup, "app-1"
	prefixed := alice
	prefixed.name, prefixed.pattern = "ord", kmsg.ACLResourcePatternTypePrefixed
	unmirrored := alice
	unmirrored.name = "other"
	deny := alice
	deny.permission = kmsg.ACLPermissionTypeDeny
	for _, tc := range []struct {
		rule string
		acl  aclEntry
		want bool
	}{
		{"*;*;*;*;*", alice, true},
		{"topic;orders;read;allow;User:alice", alice, true},
		{"TOPIC;ord.*;READ;ALLOW;*", alice, true},
		{"topic;ord;*;*;*", alice, false}, // names match whole
		{"topic;*;write;*;*", alice, false},
		{"topic;*;*;allow;*", deny, false},
		{"topic;*;*;*;User:bob", alice, false},
		{"group;app-.*;read;allow;*", group, true},
		{"group;*;*;*;*", alice, false},
		{"orders", alice, true}, // a bare pattern selects by name
		{"*;*;*;*;*", unmirrored, false},
		{"topic;ord;*;*;*", prefixed, true}, // a prefix ACL whose every destination topic is mirrored
		{"transactional_id;*;*;*;*", alice, false},
		{"*", alice, true},             // KIP-1279: every ACL
		{"TOPIC;ord.*", alice, true},   // KIP-1279: TYPE;pattern
		{"GROUP;app-.*", alice, false}, // of another type
		{"GROUP;app-.*", group, true},
		{"*", group, false}, // groups by the default rule: only those synced
	} {
		r, err := parseACLRule(tc.rule)
		if err != nil {
			t.Fatalf("%q: %v", tc.rule, err)
		}
		c := metaSyncConfig{acls: []aclRule{r}}
		plan := c.planACLs([]aclEntry{tc.acl}, aclScope{mirrored: []string{"orders"}, dest: []string{"orders", "other-topic"}})
		if got := len(plan.create) == 1; got != tc.want {
			t.Errorf("rule %q on %s: %v, want %v", tc.rule, tc.acl, got, tc.want)
		}
	}
	for _, bad := range []string{"topic;*;*;*", "topic;*;*", "bogus;*;*;*;*", "bogus;x", "topic;(;*;*;*", "topic;*;fly;*;*", "topic;*;*;maybe;*"} {
		if _, err := parseACLRule(bad); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
	var mc MirrorConfig
	mc.SyncMetadata(1, nil, nil, []string{"topic;*;*;*;*", "topic;*;*"})
	if len(mc.MetaSync.acls) != 1 || mc.MetaSync.aclErr == nil {
		t.Errorf("rules %v, error %v: want the valid rule kept and the invalid one reported", mc.MetaSync.acls, mc.MetaSync.aclErr)
	}
}

func TestMetaSyncConfigOps(t *testing.T) {
	var mc MirrorConfig
	mc.SyncMetadata(1, nil, nil, nil)
	c := mc.MetaSync
	src := map[string]string{
		"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "2",
		"compression.type": "zstd", "message.timestamp.type": "LogAppendTime", "max.message.bytes": "1000",
		"leader.replication.throttled.replicas": "*",
	}
	dst := map[string]string{
		"cleanup.policy": "compact", "segment.ms": "5", "compression.type": "producer",
		"message.timestamp.type": "CreateTime", "unclean.leader.election.enable": "true", "max.message.bytes": "1048576",
	}
	ops, skipped := c.configOps(src, dst)
	got := make([]string, len(ops))
	for i, o := range ops {
		got[i] = "delete " + o.Name
		if o.Op == kadm.SetConfig {
			got[i] = "set " + o.Name + "=" + *o.Value
		}
	}
	want := []string{"set retention.ms=1000", "delete segment.ms"}
	if !slices.Equal(got, want) {
		t.Errorf("ops %v, want %v", got, want)
	}
	if skipped != 4 {
		t.Errorf("skipped %d, want 4 (min.insync.replicas, compression.type, message.timestamp.type, throttled replicas)", skipped)
	}
	if ops, _ := c.configOps(map[string]string{"max.message.bytes": "5000000"}, dst); len(ops) == 0 || *ops[0].Value != "5000000" {
		t.Errorf("a larger max.message.bytes is copied: %+v", ops)
	}

	// Broker defaults are not overrides of the topic.
	rc := kadm.ResourceConfig{Configs: []kadm.Config{
		{Key: "retention.ms", Value: kadm.StringPtr("1"), Source: kmsg.ConfigSourceDefaultConfig},
		{Key: "segment.ms", Value: kadm.StringPtr("2"), Source: kmsg.ConfigSourceDynamicBrokerConfig},
		{Key: "cleanup.policy", Value: kadm.StringPtr("delete"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "secret", Sensitive: true, Source: kmsg.ConfigSourceDynamicTopicConfig},
	}}
	if o := topicOverrides(rc); len(o) != 1 || o["cleanup.policy"] != "delete" {
		t.Errorf("overrides %v, want only cleanup.policy", o)
	}
}

func TestMetaSyncMatchNewTopics(t *testing.T) {
	meta := clusterMeta{topics: map[string]topicMeta{
		"orders": {}, "orders-eu": {}, "payments": {}, "__consumer_offsets": {}, "xorders": {}, "broken-orders": {err: errTest},
	}}
	var mc MirrorConfig
	mc.SyncMetadata(1, nil, nil, nil)
	// An unanchored include still matches whole names.
	got := matchNewTopics(meta, regexp.MustCompile("orders.*|.*offsets"), mc.MetaSync.topicsExclude, []string{"orders"})
	if want := []string{"orders-eu"}; !slices.Equal(got, want) {
		t.Errorf("discovered %v, want %v", got, want)
	}
	if got := matchNewTopics(meta, nil, nil, nil); got != nil {
		t.Errorf("no include discovered %v", got)
	}
}

var (
	errTest = errors.New("test failure")
	time1   = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
)

func TestMetaSyncStatusRecords(t *testing.T) {
	var mc MirrorConfig
	mc.SyncMetadata(1, nil, nil, nil)
	m := &mirror{cfg: mc}
	st := mc.MetaSync.state
	st.record(&st.status.ACLs, time1, 3, 2, nil)
	st.record(&st.status.Configs, time1, 0, 0, errTest)
	st.deleted = map[string]bool{"b": true, "a": true}
	s := m.metaStatus()
	if !s.ACLs.LastSync.Equal(time1) || s.ACLs.Synced != 3 || s.ACLs.Skipped != 2 || s.ACLs.LastError != "" {
		t.Errorf("ACLs %+v", s.ACLs)
	}
	if !s.Configs.LastSync.IsZero() || s.Configs.LastError == "" || !s.Configs.LastErrorAt.Equal(time1) {
		t.Errorf("configs %+v", s.Configs)
	}
	if !slices.Equal(s.Deleted, []string{"a", "b"}) || !slices.Equal(m.deletedTopics(), []string{"a", "b"}) {
		t.Errorf("deleted %v", s.Deleted)
	}
	if (&mirror{}).metaStatus().Deleted != nil {
		t.Error("a mirror without metadata sync reports deleted topics")
	}
}

// TestACLScope: of a source's ACLs only those of mirrored topics (prefixed
// and wildcard ones only when every destination topic they match is
// mirrored) and of synced groups are copied; WRITE and the write half of
// ALL are held back per topic; cluster, user, token and transactional-id
// ACLs only when a rule names their type; a DENY for User:* is not copied,
// nor the ALLOWs it overrides.
func TestACLScope(t *testing.T) {
	mk := func(rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType, principal string) aclEntry {
		return aclEntry{resourceType: rt, name: name, pattern: pattern, principal: principal, host: "*", operation: op, permission: perm}
	}
	const (
		topic, group, lit, pre   = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		allow, deny              = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
		read, write, all, alter  = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationAll, kmsg.ACLOperationAlter
		describe, describeConfig = kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs
	)
	src := []aclEntry{
		mk(topic, lit, "orders", read, allow, "User:alice"),             // 0 copied
		mk(topic, lit, "orders", write, allow, "User:alice"),            // held on orders
		mk(topic, lit, "orders", all, allow, "User:bob"),                // READ, DESCRIBE copied; WRITE held
		mk(topic, lit, "orders", alter, allow, "User:carol"),            // administers the topic: not copied
		mk(topic, pre, "ord", read, allow, "User:dave"),                 // 4 every match mirrored: copied
		mk(topic, pre, "ord", write, allow, "User:dave"),                // held on orders and orders2
		mk(topic, pre, "o", read, allow, "User:erin"),                   // matches "other": not copied
		mk(topic, lit, "*", read, allow, "User:erin"),                   // matches __mirror_state: not copied
		mk(topic, lit, "other", read, allow, "User:erin"),               // not mirrored
		mk(topic, lit, "orders", read, deny, "User:mallory"),            // 9 copied
		mk(topic, lit, "orders2", describeConfig, deny, "User:*"),       // not copied...
		mk(topic, lit, "orders2", describeConfig, allow, "User:frank"),  // ...nor what it overrides
		mk(group, lit, "app-1", read, allow, "User:alice"),              // 12 synced group: copied
		mk(group, lit, "console-consumer-1", read, allow, "User:alice"), // not synced
		mk(group, pre, "app", read, allow, "User:alice"),                // a pattern: only with GROUP named
		mk(kmsg.ACLResourceTypeCluster, lit, "kafka-cluster", alter, allow, "User:alice"),
		mk(kmsg.ACLResourceTypeUser, lit, "User:alice", kmsg.ACLOperationAlter, allow, "User:alice"),
		mk(kmsg.ACLResourceTypeTransactionalId, pre, "app", write, allow, "User:alice"),
		mk(kmsg.ACLResourceTypeDelegationToken, lit, "t", describe, allow, "User:alice"),
	}
	sc := aclScope{
		mirrored: []string{"orders", "orders2"},
		dest:     []string{"__mirror_state", "orders", "orders2", "other"},
		group:    func(g string) bool { return g == "app-1" },
	}
	entries := func(acls []aclEntry) []string {
		var out []string
		for _, a := range acls {
			a.from = ""
			out = append(out, a.String())
		}
		slices.Sort(out)
		return out
	}
	var mc MirrorConfig
	mc.SyncMetadata(1, nil, nil, []string{"*"})
	plan := mc.MetaSync.planACLs(src, sc)
	bobRead, bobDescribe := src[2], src[2]
	bobRead.operation, bobDescribe.operation = read, describe
	if got, want := entries(plan.create), entries([]aclEntry{src[0], bobRead, bobDescribe, src[4], src[9], src[12]}); !slices.Equal(got, want) {
		t.Errorf("copied\n%v\nwant\n%v", got, want)
	}
	heldOn := func(topicName string, principals ...string) []string {
		var out []aclEntry
		for _, p := range principals {
			out = append(out, mk(topic, lit, topicName, write, allow, p))
		}
		return entries(out)
	}
	if got, want := entries(plan.held["orders"]), heldOn("orders", "User:alice", "User:bob", "User:dave"); !slices.Equal(got, want) {
		t.Errorf("held on orders %v, want %v", got, want)
	}
	if got, want := entries(plan.held["orders2"]), heldOn("orders2", "User:dave"); !slices.Equal(got, want) {
		t.Errorf("held on orders2 %v, want %v", got, want)
	}
	if got := plan.held["orders"][2].from; got != "PREFIXED ord WRITE" {
		t.Errorf("held grant's origin %q", got)
	}
	if plan.skipped != 12 { // ALTER, three out-of-scope topic ACLs, the DENY and what it overrides, two groups, four named types
		t.Errorf("skipped %d source ACLs, want 12", plan.skipped)
	}

	// Named types are copied when a rule names them.
	mc.SyncMetadata(1, nil, nil, []string{"*", "CLUSTER;.*", "TRANSACTIONAL_ID;app"})
	plan = mc.MetaSync.planACLs(src, sc)
	for _, i := range []int{15, 17} {
		if !slices.Contains(entries(plan.create), src[i].String()) {
			t.Errorf("%s not copied with its type named", src[i])
		}
	}
	for _, i := range []int{16, 18} {
		if slices.Contains(entries(plan.create), src[i].String()) {
			t.Errorf("%s copied without its type named", src[i])
		}
	}
	// A DENY User:* WRITE holds back no WRITE it overrides.
	plan = mc.MetaSync.planACLs(append(slices.Clone(src), mk(topic, lit, "orders", write, deny, "User:*")), sc)
	if len(plan.held["orders"]) != 0 || len(plan.held["orders2"]) != 1 {
		t.Errorf("held %v with a DENY WRITE for User:* on orders", plan.held)
	}
	// Without the destination's topics no pattern is copied.
	plan = mc.MetaSync.planACLs(src, aclScope{mirrored: sc.mirrored, group: sc.group})
	if slices.Contains(entries(plan.create), src[4].String()) || len(plan.held["orders2"]) != 0 {
		t.Errorf("a prefixed ACL copied without the destination's topics: %v %v", entries(plan.create), plan.held)
	}
}
