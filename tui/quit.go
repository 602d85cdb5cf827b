package tui

import (
	tea "charm.land/bubbletea/v2"
)

// askQuit quits, unless the console runs an in-process instance that owns
// partitions: closing it stops mirroring them until the instance group
// hands them to another instance, so the operator confirms first. An
// observer runs nothing and quits at once.
func (m *Model) askQuit() tea.Cmd {
	if !m.opts.Instance || m.snap.Instance == "" {
		return m.quit()
	}
	owned, topics := 0, map[string]bool{}
	for _, mm := range m.snap.Mirrors {
		for _, p := range mm.Partitions {
			if p.Owner == m.snap.Instance {
				owned++
				topics[mm.Name+"/"+p.Topic] = true
			}
		}
	}
	if owned == 0 {
		return m.quit()
	}
	m.dialog = &confirmDialog{
		title: "Quit and stop instance " + m.snap.Instance,
		intro: "This console runs instance " + m.snap.Instance + ". Quitting stops it: the partitions it owns " +
			"are not mirrored until another instance of the group takes them over (nothing is failed over; " +
			"their state stays as recorded).",
		total: "Owned here: " + plural(len(topics), "topic", "topics") + ", " + plural(owned, "partition", "partitions") + ".",
		verb:  "quit",
		quit:  true,
	}
	return nil
}
