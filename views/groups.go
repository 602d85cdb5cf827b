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
	filter        Filter
	scroll        int // first line shown
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
func (v *Groups) Capturing() bool { return v.filter.Editing() }

// Update implements Component: the filter, and scrolling the list.
func (v *Groups) Update(msg tea.Msg) tea.Cmd {
	if v.filter.Editing() {
		if v.filter.Update(msg) != FilterUnchanged {
			v.scroll = 0
		}
		return nil
	}
	page := max(v.height-2, 1)
	switch msg := msg.(type) {
	case tea.MouseWheelMsg:
		v.scroll += wheelStep(msg)
	case tea.KeyPressMsg:
		switch v.km.Match(msg, keymap.ScopeGroups) {
		case keymap.Up:
			v.scroll--
		case keymap.Down:
			v.scroll++
		case keymap.PageUp:
			v.scroll -= page
		case keymap.PageDown:
			v.scroll += page
		case keymap.Top:
			v.scroll = 0
		case keymap.Bottom:
			v.scroll = len(v.lines())
		case keymap.Filter:
			v.filter.Open()
		case keymap.Back:
			if v.filter.Clear() {
				v.scroll = 0
			}
		default:
		}
	}
	return nil
}

// View implements Component: the filter line when one is set or typed,
// then the lines from the scroll position.
func (v *Groups) View() string {
	s := v.skin
	lines := v.lines()
	var head []string
	switch {
	case v.filter.Editing():
		head = []string{v.filter.PromptLine(s, v.width)}
	case v.filter.Active():
		head = []string{v.filter.Label(s) + s.Subtle.Render("  (group names; esc clears)")}
	}
	room := max(v.height-len(head), 0)
	v.scroll = max(min(v.scroll, len(lines)-room), 0)
	lines = lines[v.scroll:]
	return block(strings.Join(append(head, lines...), "\n"), v.width, v.height)
}

// lines renders every group the filter shows, with its partitions.
func (v *Groups) lines() []string {
	s := v.skin
	var b strings.Builder
	any, hidden := false, 0
	var notes []string
	for _, m := range v.snap.Mirrors {
		if m.ShareGroupsSkipped != "" {
			notes = append(notes, s.Text.Render(m.Name)+" "+s.Subtle.Render("share groups not synced: "+m.ShareGroupsSkipped))
		}
		for _, g := range m.Groups {
			if !v.filter.Match(g.Group) {
				hidden++
				continue
			}
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
	switch {
	case !any && hidden > 0:
		b.WriteString(s.Subtle.Render(fmt.Sprintf("no group matches the filter (%d hidden; esc clears it)", hidden)) + "\n")
	case !any:
		b.WriteString(s.Warn.Render("no consumer or share group synced yet") + "\n\n" +
			s.Text.Render("Groups of the source that match mirror.groups.include are synced every") + "\n" +
			s.Text.Render("mirror.metadata.refresh.interval.ms for mirrored topics that are not stopped.") + "\n" +
			s.Text.Render("Before failing clients over, check group positions on the destination.") + "\n\n")
	}
	b.WriteString(strings.Join(notes, "\n"))
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
