package views

import (
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// PromptResult says what a key did to a Prompt.
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

// Prompt is a one-line text input. It is deliberately tiny: no blinking
// cursor (a blink timer would make golden files depend on timing), no
// history, no completion — the filter, the ":" line and the typed
// confirmation only need typing, backspace, ctrl+u, enter and esc.
type Prompt struct {
	value []rune
}

// Value returns the text typed so far.
func (p *Prompt) Value() string { return string(p.value) }

// SetValue replaces the text.
func (p *Prompt) SetValue(s string) { p.value = []rune(s) }

// Update applies one key.
func (p *Prompt) Update(msg tea.KeyPressMsg) PromptResult {
	switch msg.String() {
	case "enter":
		return PromptSubmitted
	case "esc":
		return PromptCancelled
	case "backspace", "ctrl+h":
		if len(p.value) > 0 {
			p.value = p.value[:len(p.value)-1]
		}
		return PromptEditing
	case "ctrl+u":
		p.value = nil
		return PromptEditing
	}
	if msg.Text != "" && msg.Mod&^tea.ModShift == 0 { // printable text, shift allowed
		p.value = append(p.value, []rune(msg.Text)...)
	}
	return PromptEditing
}

// View renders prefix, the text and a reverse-video cursor cell, cut from
// the left so the end of a long value stays visible.
func (p *Prompt) View(skin *Skin, prefix string, width int) string {
	text := string(p.value)
	room := width - ansi.StringWidth(prefix) - 1
	if room < 1 {
		room = 1
	}
	if w := ansi.StringWidth(text); w > room {
		text = "…" + ansi.TruncateLeft(text, w-room+1, "")
	}
	return skin.Title.Render(prefix) + skin.Text.Render(text) + skin.Selected.Render(" ")
}
