package tui

import (
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// onPaste hands the terminal's bracketed paste to whatever is reading text,
// in the same order onKey gives keys to what is on top. A paste anywhere
// else is dropped: pasted text must never turn into action keys.
func (m *Model) onPaste(p tea.PasteMsg) tea.Cmd {
	switch {
	case m.drill != nil && m.drill.editing:
		m.drill.prompt.Update(p)
	case m.dialog != nil:
		m.dialog.paste(p)
	case m.cmdOpen:
		m.cmdline.Update(p)
	case m.help:
	case m.active().Capturing():
		return m.active().Update(p)
	}
	return nil
}

// onMouse turns a left click on a tab into that screen and hands clicks
// and the wheel inside the body to the screen, in body coordinates. With a
// dialog, the help or the ":" line open the mouse does nothing: a stray
// click must not move the cursor under a confirmation that names it.
func (m *Model) onMouse(msg tea.MouseMsg) tea.Cmd {
	if m.dialog != nil || m.help || m.cmdOpen {
		return nil
	}
	lay := ComputeLayout(m.width, m.height, m.layoutState())
	if lay.TooSmall {
		return nil
	}
	ev := msg.Mouse()
	click, isClick := msg.(tea.MouseClickMsg)
	switch {
	case isClick && click.Button == tea.MouseLeft && ev.Y == lay.Tabs.Y && !m.active().Capturing():
		if sc, ok := m.tabAt(ev.X); ok {
			m.screen = sc
		}
		return nil
	case !inRect(lay.Body, ev.X, ev.Y):
		return nil
	}
	ev.X, ev.Y = ev.X-lay.Body.X, ev.Y-lay.Body.Y
	if isClick {
		return m.active().Update(tea.MouseClickMsg(ev))
	}
	if _, ok := msg.(tea.MouseWheelMsg); ok {
		return m.active().Update(tea.MouseWheelMsg(ev))
	}
	return nil
}

func inRect(r Rect, x, y int) bool {
	return x >= r.X && x < r.X+r.W && y >= r.Y && y < r.Y+r.H
}

// tabAt returns the tab drawn at column x (the labels as tabs() joins them).
func (m *Model) tabAt(x int) (Screen, bool) {
	left := 0
	for _, sc := range tabOrder {
		w := ansi.StringWidth(m.tabLabel(sc))
		if x >= left && x < left+w {
			return sc, true
		}
		left += w + 1
	}
	return 0, false
}

// jumpView handles 1-5: the tabs, by the numbers they show.
func (m *Model) jumpView(k tea.KeyPressMsg) {
	if n := int(k.Code - '1'); n >= 0 && n < len(tabOrder) {
		m.screen = tabOrder[n]
	}
}
