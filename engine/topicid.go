package engine

import (
	"encoding/base64"
	"fmt"

	"github.com/kmirror/kmirror/engine/replica"
)

// ErrSourceTopicRecreated is replica.ErrSourceTopicRecreated.
var ErrSourceTopicRecreated = replica.ErrSourceTopicRecreated

// topicIDString is replica.TopicIDString.
func topicIDString(id [16]byte) string { return replica.TopicIDString(id) }

// parseTopicID is the inverse of topicIDString; anything else is the zero
// id (unknown).
func parseTopicID(s string) [16]byte {
	var id [16]byte
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil && len(b) == len(id) {
		copy(id[:], b)
	}
	return id
}

// sourceTopicID returns the source topic id the mirror's partitions of
// topic were mirrored from, zero when not known yet.
func (m *mirror) sourceTopicID(topic string) [16]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srcTopicIDs[topic]
}

// checkSourceTopicID records the source topic's id on first sight and
// fails when it differs from the one recorded: a topic deleted and
// recreated on the source must never be mirrored into the destination
// topic of the old one (nor make a rebuild delete it).
func (m *mirror) checkSourceTopicID(topic string, p int32, id [16]byte) error {
	if id == ([16]byte{}) {
		return nil // a source too old to have topic ids
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	was, ok := m.srcTopicIDs[topic]
	if !ok || was == ([16]byte{}) {
		if m.srcTopicIDs == nil {
			m.srcTopicIDs = make(map[string][16]byte)
		}
		m.srcTopicIDs[topic] = id
		return nil
	}
	if was != id {
		return &PartitionError{Topic: topic, Partition: p, Err: recreatedError(topic, was, id)}
	}
	return nil
}

// recreatedError names both ids of a recreated source topic.
func recreatedError(topic string, was, now [16]byte) error {
	return fmt.Errorf("%w: source topic %s has topic id %s, but the destination mirrors topic id %s (the source topic was deleted and created again); "+
		"the destination topic is left as it is, and a rebuild is refused", ErrSourceTopicRecreated, topic, topicIDString(now), topicIDString(was))
}

// restoreSourceTopicID takes the source topic id from a partition record
// of a new owner, unless one is known already.
func (m *mirror) restoreSourceTopicID(topic, id string) {
	parsed := parseTopicID(id)
	if parsed == ([16]byte{}) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srcTopicIDs == nil {
		m.srcTopicIDs = make(map[string][16]byte)
	}
	if _, ok := m.srcTopicIDs[topic]; !ok {
		m.srcTopicIDs[topic] = parsed
	}
}
