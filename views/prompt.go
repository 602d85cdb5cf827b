package views

import (
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// PromptResult says what a message did to a Prompt.
type PromptResult int8

const (
	PromptEditing   PromptResult = iota // still typing
	PromptSubmitted                     // enter
	PromptCancelled                     // esc
)

// String names the result.
func (r PromptResult) String() string {
	switch r {
	case PromptEditing:
		return "editing"
	case PromptSubmitted:
		return "submitted"
	case PromptCancelled:
		return "cancelled"
	}
	return "unknown"
}

// Prompt is a one-line text input: the filter, the ":" line, the typed
// confirmation and the drill note. It wraps the Bubbles textinput so
// editing keys (cursor moves, word deletes) and the terminal's bracketed
// paste (tea.PasteMsg) behave as operators expect; a pasted mirror name
// must confirm exactly like a typed one. The zero value is ready to use.
type Prompt struct {
	in    textinput.Model
	ready bool
}

func (p *Prompt) init() {
	if p.ready {
		return
	}
	in := textinput.New()
	// A blinking cursor would make frames (and golden files) depend on
	// timing; the cursor is a steady reverse-video cell.
	st := in.Styles()
	st.Cursor.Blink = false
	in.SetStyles(st)
	// ctrl+v would shell out to a clipboard tool, which over SSH reads the
	// server's clipboard, not the operator's; the terminal's own paste
	// arrives as tea.PasteMsg instead.
	in.KeyMap.Paste.SetEnabled(false)
	// Suggestions are off; their up/down bindings must not eat keys.
	in.KeyMap.NextSuggestion.SetEnabled(false)
	in.KeyMap.PrevSuggestion.SetEnabled(false)
	in.KeyMap.AcceptSuggestion.SetEnabled(false)
	in.Prompt = ""
	in.Focus()
	p.in, p.ready = in, true
}

// Value returns the text typed so far.
func (p *Prompt) Value() string {
	p.init()
	return p.in.Value()
}

// SetValue replaces the text and puts the cursor at its end.
func (p *Prompt) SetValue(s string) {
	p.init()
	p.in.SetValue(s)
	p.in.CursorEnd()
}

// Update applies a key press or a paste; other messages are ignored.
// Enter and esc end the input; everything else edits it.
func (p *Prompt) Update(msg tea.Msg) PromptResult {
	p.init()
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "enter":
			return PromptSubmitted
		case "esc":
			return PromptCancelled
		}
	case tea.PasteMsg:
		// A copied line often carries its newline; it must neither submit
		// nor become a trailing space that makes a typed name not match.
		msg.Content = strings.TrimRight(msg.Content, "\r\n")
		p.in, _ = p.in.Update(msg)
		return PromptEditing
	default:
		return PromptEditing
	}
	// The static cursor and the disabled clipboard binding leave textinput
	// no command to return.
	p.in, _ = p.in.Update(msg)
	return PromptEditing
}

// View renders prefix, the text and a reverse-video cursor cell within
// width; a long value scrolls so the cursor stays visible.
func (p *Prompt) View(skin *Skin, prefix string, width int) string {
	p.init()
	room := max(width-ansi.StringWidth(prefix)-1, 1)
	// The scroll window is kept in the input; re-placing the cursor lets it
	// follow a width that changed since the last frame.
	// textinput pads a short value to its width; only a value that
	// overflows gets a width, so a hint can follow a short one.
	if ansi.StringWidth(p.in.Value()) < room {
		room = 0
	}
	p.in.SetWidth(room)
	p.in.SetCursor(p.in.Position())
	st := p.in.Styles()
	st.Focused.Text = skin.Text
	st.Focused.Prompt = lipgloss.NewStyle()
	st.Cursor.Color = skin.Palette.Fg
	p.in.SetStyles(st)
	return skin.Title.Render(prefix) + p.in.View()
}
