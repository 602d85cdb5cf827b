package views

import (
	"strings"

	tea "charm.land/bubbletea/v2"

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
	cursor int
	offset int
	follow bool
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
func (v *Events) Capturing() bool { return false }

// Len returns the number of events kept.
func (v *Events) Len() int { return len(v.events) }

// Append adds events in delivery order.
func (v *Events) Append(evs ...engine.Event) {
	v.events = append(v.events, evs...)
	if over := len(v.events) - EventLogCap; over > 0 {
		v.events = append(v.events[:0:0], v.events[over:]...)
		// Keep the rows the operator is reading in place.
		v.cursor = max(v.cursor-over, 0)
		v.offset = max(v.offset-over, 0)
	}
	if v.follow {
		v.cursor = len(v.events) - 1
	}
	v.clamp()
}

func (v *Events) rows() int { return max(v.height-1, 0) }

func (v *Events) clamp() {
	v.cursor = max(min(v.cursor, len(v.events)-1), 0)
	n := v.rows()
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if n > 0 && v.cursor >= v.offset+n {
		v.offset = v.cursor - n + 1
	}
	v.offset = max(min(v.offset, len(v.events)-n), 0)
}

// Update implements Component.
func (v *Events) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	page := max(v.rows()-1, 1)
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
		v.cursor = len(v.events) - 1
	default:
		return nil
	}
	v.clamp()
	v.follow = v.cursor >= len(v.events)-1
	return nil
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
	if !v.follow {
		const note = "  not following (end/G follows)"
		head = fit(head, v.width-len(note), false) + note
	}
	b.WriteString(s.ColumnHeader.Render(head))
	if len(v.events) == 0 {
		b.WriteString("\n" + s.Subtle.Render("  no events yet"))
	}
	for i := v.offset; i < len(v.events) && i < v.offset+v.rows(); i++ {
		e := v.events[i]
		b.WriteByte('\n')
		if i == v.cursor && !v.follow {
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
