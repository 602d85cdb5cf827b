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
		{"topic;ord;*;*;*", prefixed, true}, // a prefix ACL is selected by the rule alone
		{"transactional_id;*;*;*;*", alice, false},
		{"*", alice, true},             // KIP-1279: every ACL
		{"TOPIC;ord.*", alice, true},   // KIP-1279: TYPE;pattern
		{"GROUP;app-.*", alice, false}, // of another type
		{"GROUP;app-.*", group, true},
	} {
		r, err := parseACLRule(tc.rule)
		if err != nil {
			t.Fatalf("%q: %v", tc.rule, err)
		}
		c := metaSyncConfig{acls: []aclRule{r}}
		if got := c.wantACL(tc.acl, []string{"orders"}); got != tc.want {
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
