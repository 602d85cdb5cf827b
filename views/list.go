package views

import (
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/keymap"
)

// list is the mechanics the partitions table and the topics view share: a
// filtered, sorted row index under an info line and a column header, a
// cursor that stays on the same key across snapshots, the scroll offset,
// the topic filter with its per-topic match cache, and the mouse. R is a
// row, K what identifies it across snapshots.
type list[R any, K comparable] struct {
	keyOf         func(R) K
	rebuild       func() // the view's: rows from its data, filtered and sorted
	width, height int
	cols          []column
	rows          []R // filtered and sorted

	cursor, offset int
	sel            K
	hasSel         bool

	filter  Filter
	matches map[string]bool // topic → filter match, reset when the filter changes
}

func newList[R any, K comparable](keyOf func(R) K, rebuild func()) list[R, K] {
	return list[R, K]{keyOf: keyOf, rebuild: rebuild}
}

// refilter forgets the filter's matches and rebuilds the rows.
func (l *list[R, K]) refilter() {
	l.matches = nil
	l.rebuild()
}

// visibleRows is the rows that fit below the info line and the header.
func (l *list[R, K]) visibleRows() int { return max(l.height-2, 0) }

// selected returns the key of the row under the cursor.
func (l *list[R, K]) selected() (K, bool) {
	if l.cursor < len(l.rows) {
		return l.keyOf(l.rows[l.cursor]), true
	}
	var zero K
	return zero, false
}

// topicMatches reports whether topic passes the filter, asking the
// expression once per topic until the filter changes.
func (l *list[R, K]) topicMatches(topic string) bool {
	if !l.filter.Active() {
		return true
	}
	if l.matches == nil {
		l.matches = map[string]bool{}
	}
	m, ok := l.matches[topic]
	if !ok {
		m = l.filter.Match(topic)
		l.matches[topic] = m
	}
	return m
}

// restoreCursor puts the cursor back on the selected key after the rows
// were rebuilt or sorted, or clamps it where that key is gone.
func (l *list[R, K]) restoreCursor() {
	if l.hasSel {
		for i, r := range l.rows {
			if l.keyOf(r) == l.sel {
				l.cursor = i
				l.clampScroll()
				return
			}
		}
	}
	l.moveTo(l.cursor)
}

func (l *list[R, K]) moveTo(i int) {
	l.cursor = max(min(i, len(l.rows)-1), 0)
	if l.cursor < len(l.rows) {
		l.sel, l.hasSel = l.keyOf(l.rows[l.cursor]), true
	}
	l.clampScroll()
}

func (l *list[R, K]) clampScroll() {
	n := l.visibleRows()
	if n == 0 {
		l.offset = 0
		return
	}
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+n {
		l.offset = l.cursor - n + 1
	}
	l.offset = max(min(l.offset, len(l.rows)-n), 0)
}

// update handles what every list does with a message: the open filter
// prompt takes every message (the rows follow a changed filter), a
// click moves the cursor to its row, the wheel scrolls, the movement keys
// move the cursor and the filter key opens the prompt. Any other key's
// action in scope is returned, with ok, for the view's own keys.
func (l *list[R, K]) update(msg tea.Msg, km keymap.KeyMap, scope keymap.Scope) (a keymap.Action, ok bool) {
	if l.filter.Editing() {
		if l.filter.Update(msg) != FilterUnchanged {
			l.refilter()
		}
		return keymap.None, false
	}
	switch msg := msg.(type) {
	case tea.MouseClickMsg:
		if row := msg.Y - 2; row >= 0 && msg.Button == tea.MouseLeft {
			l.moveTo(l.offset + row)
		}
	case tea.MouseWheelMsg:
		l.moveTo(l.cursor + wheelStep(msg))
	case tea.KeyPressMsg:
		a := km.Match(msg, scope)
		if i, moved := listMove(a, l.cursor, l.visibleRows(), len(l.rows)); moved {
			l.moveTo(i)
			return keymap.None, false
		}
		if a == keymap.Filter {
			l.filter.Open()
			return keymap.None, false
		}
		return a, true
	}
	return keymap.None, false
}

// infoLine is the filter prompt while it is open, else lead, the filter,
// the order and tail.
func (l *list[R, K]) infoLine(s *Skin, lead []string, order string, tail ...string) string {
	if l.filter.Editing() {
		return l.filter.PromptLine(s, l.width)
	}
	parts := lead
	if f := l.filter.Label(s); f != "" {
		parts = append(parts, f)
	}
	parts = append(parts, s.Label.Render("sort ")+s.Text.Render(order))
	parts = append(parts, tail...)
	return strings.Join(parts, "  ")
}

// view renders the info line, the column header and the visible rows,
// or empty's text when no row is left.
func (l *list[R, K]) view(s *Skin, info, empty func() string, row func(R, bool) string) string {
	if l.width <= 0 || l.height <= 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(info())
	b.WriteByte('\n')
	b.WriteString(l.headerLine(s))
	n := l.visibleRows()
	if len(l.rows) == 0 && n > 0 {
		b.WriteByte('\n')
		b.WriteString(s.Subtle.Render("  " + empty()))
	}
	for i := l.offset; i < len(l.rows) && i < l.offset+n; i++ {
		b.WriteByte('\n')
		b.WriteString(row(l.rows[i], i == l.cursor))
	}
	return block(b.String(), l.width, l.height)
}

// noMatchText says why the filter left no row.
func (l *list[R, K]) noMatchText() string {
	if strings.HasPrefix(l.filter.Text(), "!") {
		return "every topic matches /" + l.filter.Text()[1:] + "/ (esc clears the filter)"
	}
	return "no topic matches /" + l.filter.Text() + "/ (esc clears the filter)"
}

func (l *list[R, K]) headerLine(s *Skin) string {
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", gutterWidth))
	for i, c := range l.cols {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fit(c.id.String(), c.width, c.right))
	}
	return s.ColumnHeader.Render(b.String())
}
