package store

import "fmt"

// Decode decodes a __mirror_state record by its key. The value is a MirrorDef,
// TopicDesired, PartitionRecord, InstanceHeartbeat, RebuildRecord or HeldACLs, or nil for a tombstone (the key was
// deleted). A value whose names disagree with its key is malformed: a
// consumer must never apply state to the wrong partition.
func Decode(key, value []byte) (Key, any, error) {
	k, err := ParseKey(key)
	if err != nil {
		return Key{}, nil, err
	}
	if value == nil {
		return k, nil, nil
	}
	var (
		v  any
		at Key
	)
	switch k.Kind {
	case KindMirror:
		d, err := DecodeMirror(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = d, MirrorKey(d.Name)
	case KindTopic:
		t, err := DecodeTopic(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = t, TopicKey(t.Mirror, t.Topic)
	case KindPartition:
		r, err := DecodePartition(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = r, PartitionKey(r.Mirror, r.Topic, r.Partition)
	case KindInstance:
		h, err := DecodeInstance(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = h, InstanceKey(h.Instance)
	case KindRebuild:
		r, err := DecodeRebuild(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = r, RebuildKey(r.Mirror, r.Topic)
	case KindACLs:
		h, err := DecodeHeldACLs(value)
		if err != nil {
			return k, nil, fmt.Errorf("%s: %w", k, err)
		}
		v, at = h, ACLsKey(h.Mirror, h.Topic)
	case KindNone:
		return k, nil, fmt.Errorf("%w: no kind", ErrBadKey)
	}
	if at != k {
		return k, nil, fmt.Errorf("%w: %s holds the value of %s", ErrMalformed, k, at)
	}
	return k, v, nil
}
