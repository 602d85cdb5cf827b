package views

import "github.com/kmirror/kmirror/keymap"

// listMove is where a cursor at cursor goes for a movement action in a
// list of n rows showing page of them; ok is false for any other action.
// The caller clamps (its moveTo), so the result may lie outside the list.
func listMove(a keymap.Action, cursor, page, n int) (int, bool) {
	switch a {
	case keymap.Up:
		return cursor - 1, true
	case keymap.Down:
		return cursor + 1, true
	case keymap.PageUp:
		return cursor - max(page-1, 1), true
	case keymap.PageDown:
		return cursor + max(page-1, 1), true
	case keymap.Top:
		return 0, true
	case keymap.Bottom:
		return n - 1, true
	}
	return cursor, false
}
