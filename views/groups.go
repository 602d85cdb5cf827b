package views

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
)

// Groups is the group offset view: per mirror and group (consumer or share),
// the source's offsets next to what the sync wrote on the destination — the
// committed offsets of a consumer group, the share-partition start offsets
// of a share group — when the group was last synced, or why it was skipped.
type Groups struct {
	skin          *Skin
	km            keymap.KeyMap
	width, height int
	snap          engine.Snapshot
}

// NewGroups returns the groups view.
func NewGroups(skin *Skin, km keymap.KeyMap) *Groups { return &Groups{skin: skin, km: km} }

// SetSize implements Component.
func (v *Groups) SetSize(width, height int) { v.width, v.height = width, height }

// SetSnapshot gives the view the engine's latest state.
func (v *Groups) SetSnapshot(snap engine.Snapshot) { v.snap = snap }

// Help implements Component.
func (v *Groups) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeGroups) }

// Capturing implements Component.
func (v *Groups) Capturing() bool { return false }

// Update implements Component; the view has no keys of its own.
func (v *Groups) Update(tea.Msg) tea.Cmd { return nil }

// View implements Component.
func (v *Groups) View() string {
	s := v.skin
	var b strings.Builder
	any := false
	var notes []string
	for _, m := range v.snap.Mirrors {
		if m.ShareGroupsSkipped != "" {
			notes = append(notes, s.Text.Render(m.Name)+" "+s.Subtle.Render("share groups not synced: "+m.ShareGroupsSkipped))
		}
		for _, g := range m.Groups {
			any = true
			status := s.OK.Render("synced " + g.LastSync.UTC().Format("15:04:05"))
			if g.SkipReason != "" {
				status = s.Warn.Render("skipped: " + g.SkipReason)
			}
			fmt.Fprintf(&b, "%s %s %s  %s\n", s.Text.Render(m.Name), s.Subtle.Render(fmt.Sprintf("%-8s", g.Kind)), s.Text.Render(g.Group), status)
			for _, p := range g.Partitions {
				fmt.Fprintf(&b, "    %-24s %4d  source %10d  destination %10d\n", p.Topic, p.Partition, p.Source, p.Destination)
			}
		}
	}
	if !any {
		b.WriteString(s.Warn.Render("no consumer or share group synced yet") + "\n\n" +
			s.Text.Render("Groups of the source that match mirror.groups.include are synced every") + "\n" +
			s.Text.Render("mirror.metadata.refresh.interval.ms for mirrored topics that are not stopped.") + "\n" +
			s.Text.Render("Before failing clients over, check group positions on the destination.") + "\n\n")
	}
	b.WriteString(strings.Join(notes, "\n"))
	return block(b.String(), v.width, v.height)
}
