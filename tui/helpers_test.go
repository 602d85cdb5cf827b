package tui

import (
	"bytes"
	"context"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kmirror/kmirror/tui/tuitest"
	"github.com/kmirror/kmirror/views"
)

// key builds the key press a terminal would deliver for name.
func key(name string) tea.KeyPressMsg {
	switch name {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	}
	r := []rune(name)[0]
	return tea.KeyPressMsg{Code: r, Text: name}
}

// fixture builds a model over the fixture snapshot and events, sized and
// with a fixed clock, without running a program.
func fixture(t testing.TB, w, h int, opts Options) (*Model, *tuitest.Controller) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = tuitest.Clock(2 * time.Second)
	}
	c := tuitest.NewController(tuitest.Snapshot())
	m := newModel(context.Background(), c, opts)
	t.Cleanup(m.cancel)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(snapshotMsg{snap: tuitest.Snapshot()})
	m.Update(eventsMsg{events: tuitest.Events()})
	return m, c
}

// press delivers keys one by one. A command a key returns is run when it is
// one of the console's immediate intents (views emit those synchronously);
// engine commands are run too, so their result lands before the next key.
func press(t testing.TB, m *Model, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, cmd := m.Update(key(k))
		runImmediate(m, cmd)
	}
}

func typeText(t testing.TB, m *Model, s string) {
	t.Helper()
	for _, r := range s {
		press(t, m, string(r))
	}
}

// runImmediate runs cmd and feeds its message back. It follows only the
// chains that complete at once (intents, engine commands against the fake,
// the poll after a command) and never a tick or an event wait, which would
// block a direct test.
func runImmediate(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	msg := cmd()
	switch msg := msg.(type) {
	case nil, tea.QuitMsg:
	case tea.BatchMsg:
		for _, c := range msg {
			runImmediate(m, c)
		}
	default:
		_, next := m.Update(msg)
		switch msg.(type) {
		case views.ActionMsg: // the engine commands an action sends
			runImmediate(m, next)
		case controlDoneMsg: // the poll that shows the command's effect
			runImmediate(m, next)
		}
	}
}

// requireASCIIGolden fails on any byte of out outside ASCII, then compares
// out with the test's golden file.
func requireASCIIGolden(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if r > 0x7f {
			t.Fatalf("non-ASCII %q at byte %d:\n%s", r, i, out)
		}
	}
	golden.RequireEqual(t, out)
}

// screen renders the model as a terminal with the given profile shows it.
func screen(t testing.TB, m *Model, p colorprofile.Profile) string {
	t.Helper()
	var b bytes.Buffer
	w := &colorprofile.Writer{Forward: &b, Profile: p}
	if _, err := w.WriteString(m.View().Content); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
