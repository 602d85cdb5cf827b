package store

import (
	"errors"
	"strings"
	"testing"
)

func TestKeyRoundTrip(t *testing.T) {
	keys := []Key{
		MirrorKey("a-to-b"),
		MirrorKey("dc1.to_dc2"),
		TopicKey("a-to-b", "orders.v2_EU"),
		PartitionKey("a-to-b", "orders", 0),
		PartitionKey("m", "__consumer_offsets-like", 2147483647),
		InstanceKey("dr-host-2-4411"),
		RebuildKey("a-to-b", "orders.v2_EU"),
		ACLsKey("a-to-b", "orders.v2_EU"),
	}
	for _, k := range keys {
		b := k.Bytes()
		got, err := ParseKey(b)
		if err != nil || got != k {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", b, got, err, k)
		}
	}
	if got := PartitionKey("a-to-b", "orders", 12).String(); got != "partition/a-to-b/orders/12" {
		t.Errorf("partition key = %q", got)
	}
}

func TestParseKeyRejects(t *testing.T) {
	tests := []struct{ key, want string }{
		{"", "want mirror/"},
		{"mirror", "want mirror/"},
		{"mirror/", "empty"},
		{"mirror/a/b", "want mirror/"},
		{"instance/", "instance name: empty"},
		{"instance/a/b", "want mirror/"},
		{"lme/m/t/0", "want mirror/"},
		{"topic/m", "want mirror/"},
		{"topic/m/a b", "contains ' '"},
		{"topic/m/..", `".." is not allowed`},
		{"partition/m/t/-1", "negative partition"},
		{"partition/m/t/01", "canonical"},
		{"partition/m/t/+1", "canonical"},
		{"partition/m/t/2147483648", "canonical"},
		{"partition/m/t/x", "canonical"},
		{"topic/m/" + strings.Repeat("x", 250), "longer than 249"},
		{"rebuild/m", "want mirror/"},
		{"rebuild/m/t/0", "want mirror/"},
		{"rebuild//t", "empty"},
		{"acls/m", "want mirror/"},
		{"acls/m/t/0", "want mirror/"},
		{"acls/m/", "empty"},
	}
	for _, tt := range tests {
		_, err := ParseKey([]byte(tt.key))
		if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseKey(%q) = %v, want ErrBadKey mentioning %q", tt.key, err, tt.want)
		}
	}
}

func TestShardStableAndInRange(t *testing.T) {
	// Shards are part of the persisted format: these values (FNV-1a 32 of the
	// text, modulo 50, computed independently) must never change.
	fixed := []struct {
		got, want int32
	}{
		{TopicShard("a-to-b", "orders"), 5},
		{Shard("a-to-b", "payments", 3), 15},
		{Shard("m", "t", 0), 9},
		{MirrorShard("a-to-b"), 41},
		{MirrorShard("b-to-a"), 17},
		{InstanceKey("i1").Shard(), InstanceShard("i1")},
	}
	for i, f := range fixed {
		if f.got != f.want {
			t.Errorf("fixed shard %d = %d, want %d", i, f.got, f.want)
		}
	}
	for _, m := range []string{"a-to-b", "b-to-a", "x"} {
		for _, tp := range []string{"orders", "payments", "t.1", "t-2"} {
			s := Shard(m, tp, 0)
			if s < 0 || s >= Partitions {
				t.Fatalf("shard %d out of range", s)
			}
			for p := int32(1); p < 64; p++ {
				if Shard(m, tp, p) != s {
					t.Fatalf("partitions of %s/%s map to different shards", m, tp)
				}
			}
			if TopicShard(m, tp) != s || TopicKey(m, tp).Shard() != s || PartitionKey(m, tp, 7).Shard() != s {
				t.Fatalf("topic record of %s/%s is not in its partitions' shard", m, tp)
			}
		}
		if MirrorKey(m).Shard() != MirrorShard(m) || MirrorShard(m) < 0 || MirrorShard(m) >= Partitions {
			t.Fatalf("mirror shard of %s", m)
		}
	}
}
