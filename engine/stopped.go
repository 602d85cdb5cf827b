package engine

import (
	"slices"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// topicStopped reports whether a topic is failed over, or being failed
// over: after a stop the destination topic belongs to the destination's
// own producers and consumers, and nothing kmirror syncs (configs, ACLs,
// group offsets, share-group offsets, partitions, topic creation) may
// touch it again (DESIGN §5.1). Every sync asks right before each write,
// not only when its round starts, so a stop landing during a round still
// keeps the rest of the round off the topic.
//
// A stop is known in three places, any of which is enough:
//   - the topic record's desired state in __mirror_state, on an instance
//     that joined (the CLI's --stop lands there first);
//   - a stop handed to a runner of the topic and not yet stepped;
//   - a runner's status: desired stop, STOPPING or STOPPED (also restored
//     from its partition record by a new owner).
//
// One partition is enough to make the whole topic stopped: topic configs
// and ACLs are per topic, and a group's offsets of a half-stopped topic
// would be half overwritten.
func (m *mirror) topicStopped(topic string) bool {
	if c := m.e.coord; c != nil && c.desired(m.cfg.Name, topic) == partition.DesiredStop {
		return true
	}
	return slices.ContainsFunc(m.runnersOf(topic), (*runner).StopWanted)
}

// notStopped returns topics without the stopped ones.
func (m *mirror) notStopped(topics []string) []string {
	return slices.DeleteFunc(slices.Clone(topics), m.topicStopped)
}

// desired returns the desired state of a topic's record in the catalog
// this instance has read, DesiredNone without a record.
func (c *coordinator) desired(mirror, topic string) partition.Desired {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pub.Topics[store.TopicRef{Mirror: mirror, Topic: topic}].Desired
}
