package tui

import (
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/views"
)

// Overlay sizes: wide enough for the help's two columns, narrow enough that
// a dialog reads as a dialog on a 160-column terminal.
const (
	helpMaxWidth   = 96
	dialogMaxWidth = 76
)

// asciiGlyphs maps every non-ASCII glyph the console draws to one ASCII
// cell, so the layout (measured in cells) is the same in both modes. It is
// applied to the finished frame, which covers every view's text at once;
// the overlay borders are ASCII styles (themes.Styles.ASCII). An ETA of
// "∞" is right-aligned in its cell, so the space before it makes room for
// "oo"; the later one-cell rule is for any other place.
var asciiGlyphs = strings.NewReplacer(
	" ∞", "oo", "∞", "~", "…", "~", "│", "|", "─", "-", "›", ">", "→", ">", "←", "<", "≈", "~",
	"↑", "^", "↓", "v", "✓", "+", "✗", "x", "×", "x", "—", "-", "–", "-", "·", ".", "≥", ">",
	"█", "#", "░", ".", // progress bars
)

// View builds the one tea.View of the program (only the root does this).
func (m *Model) View() tea.View {
	frame := m.render()
	if m.opts.ASCII {
		frame = asciiGlyphs.Replace(frame)
	}
	v := tea.NewView(frame)
	v.AltScreen = true
	// Cell motion reports clicks and the wheel (and drags, which the
	// console ignores) without a message for every pointer move.
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "kmirror console"
	return v
}

// render draws the whole screen as a string of exactly width×height cells.
func (m *Model) render() string {
	if m.width == 0 || m.height == 0 {
		return ""
	}
	st, overlay := m.overlay()
	st.HeaderH = m.header.Height()
	m.drillLayout(&st)
	lay := ComputeLayout(m.width, m.height, st)
	if lay.TooSmall {
		msg := m.skin.Warn.Render(lay.Message)
		return lipgloss.Place(m.width, m.height, lipgloss.Center, lipgloss.Center, msg)
	}
	screen := strings.Join([]string{
		m.header.View(),
		views.Block(m.tabs(), lay.Tabs.W, lay.Tabs.H),
		m.bodyView(lay),
		views.Block(m.statusLine(), lay.Status.W, lay.Status.H),
	}, "\n")
	if st.Overlay == OverlayNone {
		return screen
	}
	box := m.boxStyle(st.Overlay).Width(lay.Overlay.W).Height(lay.Overlay.H).MaxHeight(lay.Overlay.H).Render(overlay(lay.Overlay.W-4, lay.Overlay.H-2))
	return lipgloss.NewCompositor(
		lipgloss.NewLayer(screen),
		lipgloss.NewLayer(box).X(lay.Overlay.X).Y(lay.Overlay.Y).Z(1),
	).Render()
}

func (m *Model) boxStyle(o Overlay) lipgloss.Style {
	if o == OverlayConfirm {
		return m.skin.Dialog
	}
	return m.skin.Overlay
}

// overlay returns the layout state for the open overlay and a function that
// renders its content for an inner size. The content is measured first at
// the widest inner width it may get, so the layout can size the box.
func (m *Model) overlay() (LayoutState, func(w, h int) string) {
	switch {
	case m.dialog != nil:
		w := min(dialogMaxWidth, m.width-4)
		maxH := m.height - 1
		content := m.dialog.view(m.skin, w-4, maxH-2)
		return LayoutState{Overlay: OverlayConfirm, OverlayW: w, OverlayH: lipgloss.Height(content) + 2},
			func(iw, ih int) string { return m.dialog.view(m.skin, iw, ih) }
	case m.help:
		w := min(helpMaxWidth, m.width-4)
		render := func(iw, _ int) string {
			return views.RenderHelp(m.skin, append(m.active().Help(), m.drillHelp()...), views.HelpInfo{
				Screen: m.screen.String(), ReadOnly: m.km.ReadOnly(), LogPath: m.opts.LogPath, Theme: m.themeName(),
			}, iw)
		}
		return LayoutState{Overlay: OverlayHelp, OverlayW: w, OverlayH: lipgloss.Height(render(w-4, 0)) + 2}, render
	case m.drill != nil && m.drill.cost:
		w := min(helpMaxWidth, m.width-4)
		render := func(iw, _ int) string {
			return views.RenderDrillCost(m.skin, m.drill.status, m.drillView().CostKey, iw)
		}
		return LayoutState{Overlay: OverlayCost, OverlayW: w, OverlayH: lipgloss.Height(render(w-4, 0)) + 2}, render
	}
	return LayoutState{}, nil
}

func (m *Model) themeName() string {
	switch {
	case m.opts.NoColor:
		return "no colour"
	case m.themeAuto && m.bgKnown:
		return m.theme.String() + " (terminal background)"
	case m.themeAuto:
		return m.theme.String() + " (terminal background unknown)"
	}
	return m.theme.String()
}

// tabs renders the screen tabs and, on the right, the refresh interval and
// the read-only badge.
func (m *Model) tabs() string {
	s := m.skin
	var parts []string
	for _, sc := range tabOrder {
		label := m.tabLabel(sc)
		active := sc == m.screen || (sc == ScreenPartitions && m.screen == ScreenDetail)
		if active {
			parts = append(parts, s.TabActive.Render(label))
		} else {
			parts = append(parts, s.TabInactive.Render(label))
		}
	}
	left := strings.Join(parts, " ")
	refresh := s.Label.Render("refresh ") + s.Text.Render(m.tick.String())
	// The badge is what must stay when the line is short: an operator who
	// cannot act must see why before trying.
	rights := []string{refresh, ""}
	if m.km.ReadOnly() {
		badge := s.Badge.Render(" READ-ONLY ")
		rights = []string{badge + "  " + refresh, badge, ""}
	}
	for _, right := range rights {
		if gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right); gap >= 1 {
			return left + strings.Repeat(" ", gap) + right
		}
	}
	return left
}

// tabLabel is a tab's text; the number is the key that jumps to it.
func (m *Model) tabLabel(sc Screen) string {
	n := itoa(slices.Index(tabOrder, sc) + 1)
	if sc == ScreenPartitions && m.screen == ScreenDetail {
		return " " + n + " partitions › detail "
	}
	return " " + n + " " + sc.String() + " "
}

// statusLine shows the ":" prompt, or the last message, or key hints; on the
// right it warns when the snapshot is stale.
func (m *Model) statusLine() string {
	s := m.skin
	var left string
	switch {
	case m.cmdOpen:
		left = m.cmdline.View(s, ":", m.width/2)
	case m.status.text != "" && m.status.err:
		left = s.StatusError.Render(m.status.text)
	case m.status.text != "":
		left = s.StatusInfo.Render(m.status.text)
	default:
		left = m.hints()
	}
	right := m.staleness()
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if right == "" || gap < 2 {
		return left
	}
	return left + strings.Repeat(" ", gap) + right
}

// hints lists a few keys of the current screen, from the same key table
// as the help overlay.
func (m *Model) hints() string {
	s := m.skin
	want := []keymap.Action{keymap.Help, keymap.NextView, keymap.Filter, keymap.Detail, keymap.Back,
		keymap.Pause, keymap.Stop, keymap.StopMirror, keymap.Quit}
	have := map[keymap.Action]keymap.Entry{}
	for _, e := range m.active().Help() {
		have[e.Action] = e
	}
	var parts []string
	width := 0
	for _, a := range want {
		e, ok := have[a]
		if !ok {
			continue
		}
		h := e.Binding.Help()
		part := s.HelpKey.Render(h.Key) + " " + s.Subtle.Render(h.Desc)
		if width+ansi.StringWidth(part)+2 > m.width-20 {
			break
		}
		width += ansi.StringWidth(part) + 2
		parts = append(parts, part)
	}
	return strings.Join(parts, "  ")
}

// staleness warns when the newest snapshot is old: the numbers on screen
// are then history, and an operator must know before acting on them.
func (m *Model) staleness() string {
	s := m.skin
	if !m.haveSnap {
		return s.Subtle.Render("waiting for engine")
	}
	if m.snap.Taken.IsZero() {
		return ""
	}
	age := m.opts.Now().Sub(m.snap.Taken)
	if age > max(3*m.tick, 5*time.Second) {
		return s.Warn.Render("snapshot " + age.Truncate(time.Second).String() + " old")
	}
	if m.eventsClosed {
		return s.Warn.Render("event stream closed")
	}
	return ""
}
