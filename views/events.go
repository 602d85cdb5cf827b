package views

import (
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
)

// EventLogCap is how many events the log keeps; older ones are dropped (the
// full history is in the engine's log file).
const EventLogCap = 5000

// Events is the event log: every event the engine delivered, oldest first.
// It follows new events while the cursor is on the last row, like tail -f.
type Events struct {
	skin          *Skin
	km            keymap.KeyMap
	width, height int

	events []engine.Event
	rows   []int // indexes into events the filter shows
	cursor int   // into rows
	offset int
	follow bool
	filter Filter
}

// NewEvents returns an empty log that follows new events.
func NewEvents(skin *Skin, km keymap.KeyMap) *Events {
	return &Events{skin: skin, km: km, follow: true}
}

// SetSize implements Component.
func (v *Events) SetSize(width, height int) {
	v.width, v.height = width, height
	v.clamp()
}

// Help implements Component.
func (v *Events) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeEvents) }

// Capturing implements Component.
func (v *Events) Capturing() bool { return v.filter.Editing() }

// Len returns the number of events kept.
func (v *Events) Len() int { return len(v.events) }

// Append adds events in delivery order.
func (v *Events) Append(evs ...engine.Event) {
	from := len(v.events)
	v.events = append(v.events, evs...)
	v.reindex(from)
	if over := len(v.events) - EventLogCap; over > 0 {
		v.events = append(v.events[:0:0], v.events[over:]...)
		gone, _ := slices.BinarySearch(v.rows, over) // shown rows of dropped events
		kept := v.rows[gone:]
		for i := range kept {
			kept[i] -= over
		}
		v.rows = append(v.rows[:0], kept...)
		// Keep the rows the operator is reading in place.
		v.cursor = max(v.cursor-gone, 0)
		v.offset = max(v.offset-gone, 0)
	}
	if v.follow {
		v.cursor = len(v.rows) - 1
	}
	v.clamp()
}

// reindex rebuilds the shown rows from event index from on.
func (v *Events) reindex(from int) {
	if from == 0 {
		v.rows = v.rows[:0]
	}
	for i := from; i < len(v.events); i++ {
		if v.filter.Match(filterText(v.events[i])) {
			v.rows = append(v.rows, i)
		}
	}
}

// filterText is what "/" matches an event against: level, where and message.
func filterText(e engine.Event) string {
	return e.Level.String() + " " + where(e) + " " + e.Message
}

func (v *Events) refilter() {
	v.reindex(0)
	v.cursor = len(v.rows) - 1
	v.follow = true
	v.clamp()
}

func (v *Events) pageRows() int { return max(v.height-1, 0) }

func (v *Events) clamp() {
	v.cursor = max(min(v.cursor, len(v.rows)-1), 0)
	n := v.pageRows()
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if n > 0 && v.cursor >= v.offset+n {
		v.offset = v.cursor - n + 1
	}
	v.offset = max(min(v.offset, len(v.rows)-n), 0)
}

// Update implements Component.
func (v *Events) Update(msg tea.Msg) tea.Cmd {
	if v.filter.Editing() {
		if v.filter.Update(msg) != FilterUnchanged {
			v.refilter()
		}
		return nil
	}
	switch msg := msg.(type) {
	case tea.MouseClickMsg:
		if row := msg.Y - 1; row >= 0 && msg.Button == tea.MouseLeft && v.offset+row < len(v.rows) {
			v.cursor = v.offset + row
		} else {
			return nil
		}
	case tea.MouseWheelMsg:
		v.cursor += wheelStep(msg)
	case tea.KeyPressMsg:
		if !v.key(msg) {
			return nil
		}
	default:
		return nil
	}
	v.clamp()
	v.follow = v.cursor >= len(v.rows)-1
	return nil
}

// key applies a key; it reports whether the cursor may have moved.
func (v *Events) key(k tea.KeyPressMsg) bool {
	page := max(v.pageRows()-1, 1)
	switch v.km.Match(k, keymap.ScopeEvents) {
	case keymap.Up:
		v.cursor--
	case keymap.Down:
		v.cursor++
	case keymap.PageUp:
		v.cursor -= page
	case keymap.PageDown:
		v.cursor += page
	case keymap.Top:
		v.cursor = 0
	case keymap.Bottom:
		v.cursor = len(v.rows) - 1
	case keymap.Filter:
		v.filter.Open()
		return false
	case keymap.Back:
		if v.filter.Clear() {
			v.refilter()
		}
		return false
	default:
		return false
	}
	return true
}

func (v *Events) levelStyle(l engine.EventLevel) string {
	s := v.skin
	label := fit(l.String(), 5, false)
	switch l {
	case engine.LevelInfo:
		return s.Text.Render(label)
	case engine.LevelWarn:
		return s.Warn.Render(label)
	case engine.LevelError:
		return s.Err.Render(label)
	}
	return s.Text.Render(label)
}

// where renders "mirror/topic/partition" with the parts an event has.
func where(e engine.Event) string {
	w := e.Mirror
	if e.Topic != "" {
		w += "/" + e.Topic
		if e.Partition >= 0 {
			w += "/" + itoa32(e.Partition)
		}
	}
	if w == "" {
		return "-"
	}
	return w
}

// View implements Component.
func (v *Events) View() string {
	s := v.skin
	whereW := min(max(v.width/4, 16), 40)
	msgW := max(v.width-(gutterWidth+8+1+5+1+whereW+1), 10)
	var b strings.Builder
	head := strings.Repeat(" ", gutterWidth) + fit("TIME UTC", 8, false) + " " + fit("LEVEL", 5, false) + " " +
		fit("WHERE", whereW, false) + " " + "MESSAGE"
	note := ""
	switch {
	case v.filter.Editing():
		note = "  " + v.filter.PromptLine(s, v.width/2)
	case v.filter.Active():
		note = "  " + v.filter.Label(s)
	}
	if !v.follow {
		note += s.ColumnHeader.Render("  not following (end/G follows)")
	}
	if note != "" {
		head = s.ColumnHeader.Render(fit(head, max(v.width-ansi.StringWidth(note), 0), false)) + note
	} else {
		head = s.ColumnHeader.Render(head)
	}
	b.WriteString(head)
	switch {
	case len(v.events) == 0:
		b.WriteString("\n" + s.Subtle.Render("  no events yet"))
	case len(v.rows) == 0:
		b.WriteString("\n" + s.Subtle.Render("  no event matches the filter (esc clears it)"))
	}
	for r := v.offset; r < len(v.rows) && r < v.offset+v.pageRows(); r++ {
		i := v.rows[r]
		e := v.events[i]
		b.WriteByte('\n')
		if r == v.cursor && !v.follow {
			line := "> " + fit(clock(e.Time), 8, false) + " " + fit(e.Level.String(), 5, false) + " " +
				fit(where(e), whereW, false) + " " + fit(e.Message, msgW, false)
			b.WriteString(s.Selected.Render(fit(line, v.width, false)))
			continue
		}
		b.WriteString("  " + s.Subtle.Render(fit(clock(e.Time), 8, false)) + " " + v.levelStyle(e.Level) + " " +
			s.Text.Render(fit(where(e), whereW, false)) + " " + s.Text.Render(fit(e.Message, msgW, false)))
	}
	return block(b.String(), v.width, v.height)
}
