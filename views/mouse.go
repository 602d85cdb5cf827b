package views

import tea "charm.land/bubbletea/v2"

// wheelLines is how far one wheel notch moves a list: three rows, as
// terminals scroll text.
const wheelLines = 3

// wheelStep is the row delta of a wheel event (0 for sideways wheels).
func wheelStep(m tea.MouseWheelMsg) int {
	switch m.Button {
	case tea.MouseWheelUp:
		return -wheelLines
	case tea.MouseWheelDown:
		return wheelLines
	default:
	}
	return 0
}
