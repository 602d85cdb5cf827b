package store

import (
	"cmp"
	"slices"
	"time"
)

// TopicRef names a mirrored topic.
type TopicRef struct{ Mirror, Topic string }

// PartitionRef names a mirrored partition.
type PartitionRef struct {
	Mirror, Topic string
	Partition     int32
}

// Catalog is the decoded content of __mirror_state: the latest value of
// every key. It is a plain value owned by one goroutine; Clone gives others a
// copy.
type Catalog struct {
	Mirrors    map[string]MirrorDef
	Topics     map[TopicRef]TopicDesired
	Partitions map[PartitionRef]PartitionRecord
	Instances  map[string]InstanceHeartbeat // the latest heartbeat of each instance
	Rebuilds   map[TopicRef]RebuildRecord
	HeldACLs   map[TopicRef]HeldACLs // grants a topic's stop applies
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{
		Mirrors:    make(map[string]MirrorDef),
		Topics:     make(map[TopicRef]TopicDesired),
		Partitions: make(map[PartitionRef]PartitionRecord),
		Instances:  make(map[string]InstanceHeartbeat),
		Rebuilds:   make(map[TopicRef]RebuildRecord),
		HeldACLs:   make(map[TopicRef]HeldACLs),
	}
}

// Apply folds one record into the catalog. A partition record whose state
// epoch is older than the one already held is stale (a fenced owner wrote
// it) and is ignored; Apply reports whether the catalog changed.
func (c *Catalog) Apply(key, value []byte) (Key, bool, error) {
	k, v, err := Decode(key, value)
	if err != nil {
		return k, false, err
	}
	switch k.Kind {
	case KindMirror:
		if v == nil {
			delete(c.Mirrors, k.Mirror)
		} else {
			c.Mirrors[k.Mirror] = v.(MirrorDef)
		}
	case KindTopic:
		ref := TopicRef{k.Mirror, k.Topic}
		if v == nil {
			delete(c.Topics, ref)
		} else {
			c.Topics[ref] = v.(TopicDesired)
		}
	case KindPartition:
		ref := PartitionRef{k.Mirror, k.Topic, k.Partition}
		if v == nil {
			delete(c.Partitions, ref)
			break
		}
		r := v.(PartitionRecord)
		if old, ok := c.Partitions[ref]; ok && old.StateEpoch > r.StateEpoch {
			return k, false, nil
		}
		c.Partitions[ref] = r
	case KindInstance:
		if v == nil {
			delete(c.Instances, k.Instance)
		} else {
			c.Instances[k.Instance] = v.(InstanceHeartbeat)
		}
	case KindRebuild:
		ref := TopicRef{k.Mirror, k.Topic}
		if v == nil {
			delete(c.Rebuilds, ref)
		} else {
			c.Rebuilds[ref] = v.(RebuildRecord)
		}
	case KindACLs:
		ref := TopicRef{k.Mirror, k.Topic}
		if v == nil {
			delete(c.HeldACLs, ref)
		} else {
			c.HeldACLs[ref] = v.(HeldACLs)
		}
	case KindNone:
	}
	return k, true, nil
}

// Clone returns a deep enough copy for another goroutine to read.
func (c *Catalog) Clone() *Catalog {
	out := NewCatalog()
	for k, v := range c.Mirrors {
		out.Mirrors[k] = v
	}
	for k, v := range c.Topics {
		out.Topics[k] = v
	}
	for k, v := range c.Partitions {
		out.Partitions[k] = v
	}
	for k, v := range c.Instances {
		out.Instances[k] = v
	}
	for k, v := range c.Rebuilds {
		out.Rebuilds[k] = v
	}
	for k, v := range c.HeldACLs {
		out.HeldACLs[k] = v
	}
	return out
}

// MirrorNames returns the mirrors' names, sorted.
func (c *Catalog) MirrorNames() []string {
	out := make([]string, 0, len(c.Mirrors))
	for n := range c.Mirrors {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TopicsOf returns a mirror's topic records, sorted by topic.
func (c *Catalog) TopicsOf(mirror string) []TopicDesired {
	var out []TopicDesired
	for ref, t := range c.Topics {
		if ref.Mirror == mirror {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b TopicDesired) int { return cmp.Compare(a.Topic, b.Topic) })
	return out
}

// PartitionsOf returns a mirror's partition records, sorted by topic and
// partition; topic "" means every topic.
func (c *Catalog) PartitionsOf(mirror, topic string) []PartitionRecord {
	var out []PartitionRecord
	for ref, r := range c.Partitions {
		if ref.Mirror == mirror && (topic == "" || ref.Topic == topic) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b PartitionRecord) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return out
}

// ShardOwner returns the instance whose heartbeat claims shard and is live
// at now (misses intervals, see InstanceHeartbeat.Live); with several (the
// group moved the shard and the old owner has not written since), the most
// recent heartbeat.
func (c *Catalog) ShardOwner(shard int32, now time.Time, misses int) (InstanceHeartbeat, bool) {
	var best InstanceHeartbeat
	found := false
	for _, h := range c.Instances {
		if h.Owns(shard) && h.Live(now, misses) && (!found || h.At.After(best.At)) {
			best, found = h, true
		}
	}
	return best, found
}
