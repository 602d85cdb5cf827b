package tui

import (
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/views"
)

// onKey routes a key press. The order is the order of what is on top:
// ctrl+c always quits, then an open dialog, the ":" line and the help
// overlay take every key; a screen that is reading text (the filter) comes
// next; global keys; finally the screen itself.
func (m *Model) onKey(k tea.KeyPressMsg) tea.Cmd {
	if k.String() == "ctrl+c" {
		return m.quit()
	}
	if ComputeLayout(m.width, m.height, m.layoutState()).TooSmall {
		if m.km.Match(k, keymap.ScopeAll) == keymap.Quit {
			return m.quit()
		}
		return nil
	}
	switch {
	case m.dialog != nil:
		return m.dialogKey(k)
	case m.cmdOpen:
		return m.cmdlineKey(k)
	case m.help:
		switch m.km.Match(k, m.screen.scope()) {
		case keymap.Help, keymap.Back, keymap.Quit:
			m.help = false
		default:
		}
		return nil
	}
	active := m.active()
	if active.Capturing() {
		return active.Update(k)
	}
	switch m.km.Match(k, m.screen.scope()) {
	case keymap.Quit:
		return m.askQuit()
	case keymap.Help:
		m.help = true
	case keymap.NextView:
		m.cycleScreen(1)
	case keymap.PrevView:
		m.cycleScreen(-1)
	case keymap.JumpView:
		m.jumpView(k)
	case keymap.Command:
		m.cmdOpen = true
		m.cmdline.SetValue("")
	case keymap.TickFaster:
		m.setTick(nextTick(m.tick, true))
	case keymap.TickSlower:
		m.setTick(nextTick(m.tick, false))
	default:
		return active.Update(k)
	}
	return nil
}

func (m *Model) cycleScreen(step int) {
	from := m.screen
	if from == ScreenDetail {
		from = ScreenPartitions
	}
	i := slices.Index(tabOrder, from)
	m.screen = tabOrder[(i+step+len(tabOrder))%len(tabOrder)]
}

// setTick changes the poll interval; the running loop picks it up when it
// re-arms, so there is never a second loop.
func (m *Model) setTick(d time.Duration) {
	m.tick = d
	m.setStatus("refreshing every "+d.String(), false)
}

// cmdlineKey edits the ":" line and runs it on enter.
func (m *Model) cmdlineKey(k tea.KeyPressMsg) tea.Cmd {
	switch m.cmdline.Update(k) {
	case views.PromptEditing:
		return nil
	case views.PromptCancelled:
		m.cmdOpen = false
		return nil
	case views.PromptSubmitted:
	}
	m.cmdOpen = false
	return m.runCommand(strings.TrimSpace(m.cmdline.Value()))
}

// runCommand executes a ":" command.
func (m *Model) runCommand(line string) tea.Cmd {
	switch line {
	case "mirrors", "m":
		m.screen = ScreenMirrors
	case "topics", "t":
		m.screen = ScreenTopics
	case "partitions", "p":
		m.screen = ScreenPartitions
	case "events", "e":
		m.screen = ScreenEvents
	case "groups", "g":
		m.screen = ScreenGroups
	case "help", "h":
		m.help = true
	case "quit", "q":
		return m.askQuit()
	case "":
	default:
		m.setStatus("unknown command :"+line+" (try :mirrors :topics :partitions :events :groups :help :quit)", true)
	}
	return nil
}
