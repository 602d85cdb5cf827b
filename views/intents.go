package views

import (
	"sort"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
)

// Target is what an operator action applies to: some topics of one mirror,
// or the whole mirror when Topics is nil. Partitions counts every partition
// the action touches, because commands work on whole topics even when the
// operator selected one partition row.
type Target struct {
	Mirror     string
	Topics     []string
	Partitions int
}

// Whole reports whether the target is the whole mirror.
func (t Target) Whole() bool { return t.Topics == nil }

// ActionMsg asks the root model to carry out an operator action. Views only
// say what the operator asked for; the root decides whether it needs a
// confirmation and talks to the engine.
type ActionMsg struct {
	Action  keymap.Action
	Targets []Target
}

// OpenDetailMsg asks the root to show one partition's detail.
type OpenDetailMsg struct {
	Mirror    string
	Topic     string
	Partition int32
}

// ShowMirrorMsg asks the root to show the partitions of one mirror.
type ShowMirrorMsg struct{ Mirror string }

// BackMsg asks the root to leave the current screen.
type BackMsg struct{}

// ShowTopicMsg asks the root to show the partitions of one topic.
type ShowTopicMsg struct{ Mirror, Topic string }

// BackToTopicsMsg asks the root to return to the topics view the
// partitions table was opened from.
type BackToTopicsMsg struct{}

func emit(msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }

// topicSizes counts partitions per topic of one mirror.
func topicSizes(m *engine.MirrorSnapshot) map[string]int {
	out := map[string]int{}
	for i := range m.Partitions {
		out[m.Partitions[i].Topic]++
	}
	return out
}

// findMirror looks a mirror up by name; there are only a few.
func findMirror(snap *engine.Snapshot, name string) *engine.MirrorSnapshot {
	for i := range snap.Mirrors {
		if snap.Mirrors[i].Name == name {
			return &snap.Mirrors[i]
		}
	}
	return nil
}

// targetsFor groups (mirror, topic) pairs into one Target per mirror, topics
// sorted, with partition counts from snap.
func targetsFor(snap *engine.Snapshot, pairs map[string]map[string]bool) []Target {
	mirrors := make([]string, 0, len(pairs))
	for m := range pairs {
		mirrors = append(mirrors, m)
	}
	sort.Strings(mirrors)
	var out []Target
	for _, name := range mirrors {
		t := Target{Mirror: name, Topics: []string{}}
		var sizes map[string]int
		if m := findMirror(snap, name); m != nil {
			sizes = topicSizes(m)
		}
		for topic := range pairs[name] {
			t.Topics = append(t.Topics, topic)
			t.Partitions += sizes[topic]
		}
		sort.Strings(t.Topics)
		out = append(out, t)
	}
	return out
}

// wholeMirror is the target for a mirror-wide action.
func wholeMirror(snap *engine.Snapshot, name string) Target {
	t := Target{Mirror: name}
	if m := findMirror(snap, name); m != nil {
		t.Partitions = len(m.Partitions)
	}
	return t
}
