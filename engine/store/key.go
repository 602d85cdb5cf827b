// Package store is the codec of __mirror_state, the compacted topic on the
// destination cluster that holds kmirror's durable state: mirror
// definitions, desired topic states, partition states and instance
// heartbeats. Keys are slash-separated paths, values versioned JSON that any
// Kafka consumer can read; a nil value (tombstone) deletes a key. The package
// does no I/O.
package store

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Topic is the name of the state topic on the destination cluster.
const Topic = "__mirror_state"

// Partitions is the partition count of __mirror_state. Records are produced
// to explicit partitions (Shard), so the count is part of the format: changing
// it moves every key.
const Partitions = 50

// MaxNameLen is Kafka's limit on topic names; mirror names share it.
const MaxNameLen = 249

// ErrBadKey matches every error of ParseKey and Key.Validate.
var ErrBadKey = errors.New("bad __mirror_state key")

// KeyKind says what a key addresses.
type KeyKind int8

const (
	KindNone      KeyKind = iota
	KindMirror            // mirror/<name>
	KindTopic             // topic/<mirror>/<topic>
	KindPartition         // partition/<mirror>/<topic>/<partition>
	KindInstance          // instance/<id>: an instance's heartbeat
	KindRebuild           // rebuild/<mirror>/<topic>
	KindACLs              // acls/<mirror>/<topic>: grants held back until the topic's stop
)

// String returns the key's first path segment.
func (k KeyKind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindMirror:
		return "mirror"
	case KindTopic:
		return "topic"
	case KindPartition:
		return "partition"
	case KindInstance:
		return "instance"
	case KindRebuild:
		return "rebuild"
	case KindACLs:
		return "acls"
	}
	return fmt.Sprintf("KeyKind(%d)", int8(k))
}

// Key is a parsed __mirror_state key. Topic is empty for KindMirror,
// Partition is 0 unless Kind is KindPartition, Instance is empty unless Kind
// is KindInstance (which has no mirror).
type Key struct {
	Kind      KeyKind
	Mirror    string
	Topic     string
	Partition int32
	Instance  string
}

// MirrorKey addresses a mirror definition.
func MirrorKey(name string) Key { return Key{Kind: KindMirror, Mirror: name} }

// TopicKey addresses the desired state of one mirrored topic.
func TopicKey(mirror, topic string) Key { return Key{Kind: KindTopic, Mirror: mirror, Topic: topic} }

// PartitionKey addresses the state of one mirrored partition.
func PartitionKey(mirror, topic string, p int32) Key {
	return Key{Kind: KindPartition, Mirror: mirror, Topic: topic, Partition: p}
}

// InstanceKey addresses the heartbeat of one kmirror instance.
func InstanceKey(id string) Key { return Key{Kind: KindInstance, Instance: id} }

// RebuildKey addresses the progress record of a topic's rebuild.
func RebuildKey(mirror, topic string) Key {
	return Key{Kind: KindRebuild, Mirror: mirror, Topic: topic}
}

// ACLsKey addresses the grants held back from a mirrored topic.
func ACLsKey(mirror, topic string) Key {
	return Key{Kind: KindACLs, Mirror: mirror, Topic: topic}
}

// String returns the key as stored, e.g. "partition/a-to-b/orders/3". It does
// not validate; use Validate before producing.
func (k Key) String() string {
	switch k.Kind {
	case KindMirror:
		return "mirror/" + k.Mirror
	case KindTopic:
		return "topic/" + k.Mirror + "/" + k.Topic
	case KindPartition:
		return "partition/" + k.Mirror + "/" + k.Topic + "/" + strconv.FormatInt(int64(k.Partition), 10)
	case KindInstance:
		return "instance/" + k.Instance
	case KindRebuild:
		return "rebuild/" + k.Mirror + "/" + k.Topic
	case KindACLs:
		return "acls/" + k.Mirror + "/" + k.Topic
	case KindNone:
	}
	return ""
}

// Bytes returns String as the record key.
func (k Key) Bytes() []byte { return []byte(k.String()) }

// Validate checks the names and the partition number.
func (k Key) Validate() error {
	switch k.Kind {
	case KindMirror:
		return wrapName("mirror", k.Mirror)
	case KindTopic, KindPartition, KindRebuild, KindACLs:
		if err := wrapName("mirror", k.Mirror); err != nil {
			return err
		}
		if err := wrapName("topic", k.Topic); err != nil {
			return err
		}
		if k.Kind == KindPartition && k.Partition < 0 {
			return fmt.Errorf("%w: negative partition %d", ErrBadKey, k.Partition)
		}
		return nil
	case KindInstance:
		return wrapName("instance", k.Instance)
	case KindNone:
	}
	return fmt.Errorf("%w: no kind", ErrBadKey)
}

func wrapName(what, name string) error {
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("%w: %s name: %w", ErrBadKey, what, err)
	}
	return nil
}

// Shard returns the __mirror_state partition the key is produced to: a
// rebuild or held-ACL record lives with its topic's records, so the topic's owner
// reads it before it runs the topic.
func (k Key) Shard() int32 {
	switch k.Kind {
	case KindMirror:
		return MirrorShard(k.Mirror)
	case KindInstance:
		return InstanceShard(k.Instance)
	case KindTopic, KindPartition, KindRebuild, KindACLs, KindNone:
	}
	return TopicShard(k.Mirror, k.Topic)
}

// ParseKey parses a record key. Only the canonical form String produces is
// accepted (no leading zeros or sign in the partition), so parse and format
// are exact inverses.
func ParseKey(b []byte) (Key, error) {
	parts := strings.Split(string(b), "/")
	var k Key
	switch {
	case parts[0] == "mirror" && len(parts) == 2:
		k = MirrorKey(parts[1])
	case parts[0] == "instance" && len(parts) == 2:
		k = InstanceKey(parts[1])
	case parts[0] == "topic" && len(parts) == 3:
		k = TopicKey(parts[1], parts[2])
	case parts[0] == "rebuild" && len(parts) == 3:
		k = RebuildKey(parts[1], parts[2])
	case parts[0] == "acls" && len(parts) == 3:
		k = ACLsKey(parts[1], parts[2])
	case parts[0] == "partition" && len(parts) == 4:
		p, err := strconv.ParseInt(parts[3], 10, 32)
		if err != nil || strconv.FormatInt(p, 10) != parts[3] {
			return Key{}, fmt.Errorf("%w %q: partition %q is not a canonical int32", ErrBadKey, b, parts[3])
		}
		k = PartitionKey(parts[1], parts[2], int32(p))
	default:
		return Key{}, fmt.Errorf("%w %q: want mirror/<name>, topic/<mirror>/<topic>, partition/<mirror>/<topic>/<n>, instance/<id>, rebuild/<mirror>/<topic> or acls/<mirror>/<topic>", ErrBadKey, b)
	}
	if err := k.Validate(); err != nil {
		return Key{}, fmt.Errorf("key %q: %w", b, err)
	}
	return k, nil
}

// ValidateName checks a mirror or topic name against Kafka's topic rules:
// 1 to 249 characters from [a-zA-Z0-9._-], and not "." or "..". That keeps
// '/' out, which makes keys unambiguous.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("longer than %d characters", MaxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not allowed", name)
	}
	for i := range len(name) {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q contains %q; allowed are letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

// TopicShard returns the shard of a topic's desired-state record and of all
// its partition records. Keeping a topic together gives its owner the
// desired state and every partition state from one shard, and makes one
// instance responsible for topic-wide work such as a rebuild.
func TopicShard(mirror, topic string) int32 { return hashShard(mirror + "/" + topic) }

// Shard returns the shard of a partition's record: the topic's shard, since a
// topic's records stay together (see TopicShard).
func Shard(mirror, topic string, partition int32) int32 {
	return TopicShard(mirror, topic)
}

// MirrorShard returns the shard of a mirror definition record.
func MirrorShard(mirror string) int32 { return hashShard("mirror/" + mirror) }

// InstanceShard returns the shard of an instance's heartbeat. Any shard
// would do (an instance writes its heartbeat whoever owns the shard, and
// every reader reads them all); hashing spreads them.
func InstanceShard(id string) int32 { return hashShard("instance/" + id) }

// hashShard is FNV-1a 32 modulo Partitions: stable across releases and
// platforms, which a persisted partitioning must be.
func hashShard(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32() % Partitions)
}
