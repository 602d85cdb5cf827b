package views

import (
	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/keymap"
)

// Groups is the consumer-group offset view. The engine does not publish any
// group data yet (engine.Snapshot has no groups), so the view says exactly
// that instead of drawing an empty table that would look like "all synced".
type Groups struct {
	skin          *Skin
	km            keymap.KeyMap
	width, height int
}

// NewGroups returns the groups view.
func NewGroups(skin *Skin, km keymap.KeyMap) *Groups { return &Groups{skin: skin, km: km} }

// SetSize implements Component.
func (v *Groups) SetSize(width, height int) { v.width, v.height = width, height }

// Help implements Component.
func (v *Groups) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeGroups) }

// Capturing implements Component.
func (v *Groups) Capturing() bool { return false }

// Update implements Component; the view has no keys of its own.
func (v *Groups) Update(tea.Msg) tea.Cmd { return nil }

// View implements Component.
func (v *Groups) View() string {
	s := v.skin
	text := s.Warn.Render("group offset sync not configured") + "\n\n" +
		s.Text.Render("This engine publishes no consumer-group offsets, so there is nothing") + "\n" +
		s.Text.Render("to compare between source and destination yet. Before failing clients") + "\n" +
		s.Text.Render("over, check group positions on the destination with your Kafka tools.")
	return block(text, v.width, v.height)
}
