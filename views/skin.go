package views

import (
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/themes"
)

// Skin is the Styles of the current theme plus the per-state styles derived
// from it. The root model owns one Skin and replaces its contents when the
// terminal's colour profile becomes known; every view holds a pointer to it.
type Skin struct {
	themes.Styles
	states      map[partition.State]lipgloss.Style
	statePaints map[partition.State]Paint
	paints      [cellState]Paint // table cell styles, by cellStyle
}

// Paint is a style reduced to the escape sequences around its text. Table
// rows are drawn with Paints: a concatenation instead of a full lipgloss
// Render (which wraps, aligns and measures), for the one path that runs for
// every visible row on every frame.
type Paint struct{ pre, post string }

// paintOf captures st's sequences by rendering a probe character; SGR
// sequences never contain it.
func paintOf(st lipgloss.Style) Paint {
	r := st.Render("x")
	i := strings.Index(r, "x")
	return Paint{pre: r[:i], post: r[i+1:]}
}

// Apply paints text.
func (p Paint) Apply(text string) string {
	if p.pre == "" && p.post == "" {
		return text
	}
	return p.pre + text + p.post
}

// NewSkin derives a Skin from a palette.
func NewSkin(p themes.Palette) *Skin {
	s := &Skin{
		Styles:      themes.NewStyles(p),
		states:      map[partition.State]lipgloss.Style{},
		statePaints: map[partition.State]Paint{},
	}
	for _, st := range partition.States {
		s.states[st] = StateStyle(p, st)
		s.statePaints[st] = paintOf(s.states[st])
	}
	s.paints[cellText] = paintOf(s.Text)
	s.paints[cellSubtle] = paintOf(s.Subtle)
	s.paints[cellWarn] = paintOf(s.Warn)
	s.paints[cellMarked] = paintOf(s.Marked)
	return s
}

// State returns the style for st.
func (s *Skin) State(st partition.State) lipgloss.Style {
	if style, ok := s.states[st]; ok {
		return style
	}
	return StateStyle(s.Palette, st)
}

// RenderState renders the state's text label in its style; the label is
// always there, so nothing depends on colour alone.
func (s *Skin) RenderState(st partition.State) string {
	return s.State(st).Render(StateLabel(st))
}
