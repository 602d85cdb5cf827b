package tui

import (
	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/views"
)

// onAction turns a view's ActionMsg into engine commands: harmless actions
// go out at once, dangerous ones open a confirmation dialog first.
func (m *Model) onAction(msg views.ActionMsg) tea.Cmd {
	// The keys are already gone in read-only mode; refusing here as well
	// means no other path can make a read-only console act.
	if m.km.ReadOnly() || len(msg.Targets) == 0 {
		return nil
	}
	switch msg.Action {
	case keymap.Pause:
		return m.send(commandsFor(engine.CmdPause, false, msg.Targets))
	case keymap.Resume:
		return m.send(commandsFor(engine.CmdResume, false, msg.Targets))
	case keymap.Recover:
		return m.send(commandsFor(engine.CmdRecover, false, msg.Targets))
	case keymap.Stop:
		m.dialog = newStopDialog(msg.Targets)
	case keymap.StopMirror:
		m.dialog = newStopMirrorDialog(msg.Targets[0])
	case keymap.Rebuild:
		m.dialog = newRebuildDialog(msg.Targets)
	default:
	}
	return nil
}

// send runs commands, each in its own goroutine, and says so.
func (m *Model) send(cmds []engine.Command) tea.Cmd {
	out := make([]tea.Cmd, len(cmds))
	for i, c := range cmds {
		out[i] = m.control(c)
	}
	if len(cmds) == 1 {
		m.setStatus(describeCommand(cmds[0])+": sent", false)
	} else {
		m.setStatus(describeCommand(cmds[0])+" and "+itoa(len(cmds)-1)+" more: sent", false)
	}
	return tea.Batch(out...)
}

func (m *Model) dialogKey(k tea.KeyPressMsg) tea.Cmd {
	switch m.dialog.update(k) {
	case dialogOpen:
		return nil
	case dialogCancelled:
		m.dialog = nil
		m.setStatus("cancelled: nothing was sent", false)
		return nil
	case dialogConfirmed:
	}
	if m.dialog.quit {
		m.dialog = nil
		return m.quit()
	}
	cmds := m.dialog.cmds
	m.dialog = nil
	return m.send(cmds)
}
