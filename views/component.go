// Package views holds the console's leaf widgets. Each renders part of an
// engine snapshot and turns keys into intent messages; none of them talks to
// the engine, so they render the same in tests as in production.
package views

import (
	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/keymap"
)

// Component is the small interface every screen implements. The root model
// owns sizes and hands them down with SetSize; View returns exactly the
// lines of that size.
type Component interface {
	Update(msg tea.Msg) tea.Cmd
	View() string
	SetSize(width, height int)
	// Help lists the key entries that work on this screen; "?" shows them.
	Help() []keymap.Entry
	// Capturing reports whether the component is reading text (a filter
	// prompt), so global keys like q must go to it instead.
	Capturing() bool
}
