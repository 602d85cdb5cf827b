package views

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
)

// Mirrors lists the mirrors with their own summary, for an operator who runs
// several and needs to pick the one to fail over.
type Mirrors struct {
	skin          *Skin
	km            keymap.KeyMap
	width, height int

	snap   engine.Snapshot
	sums   []Summary
	cursor int
}

// NewMirrors returns an empty mirrors list.
func NewMirrors(skin *Skin, km keymap.KeyMap) *Mirrors { return &Mirrors{skin: skin, km: km} }

// SetSize implements Component.
func (v *Mirrors) SetSize(width, height int) { v.width, v.height = width, height }

// SetSnapshot replaces the data.
func (v *Mirrors) SetSnapshot(snap engine.Snapshot) {
	sel := v.selected()
	v.snap = snap
	v.sums = make([]Summary, len(snap.Mirrors))
	for i := range snap.Mirrors {
		v.sums[i] = SummarizeMirror(&snap.Mirrors[i])
		if snap.Mirrors[i].Name == sel {
			v.cursor = i
		}
	}
	v.cursor = max(min(v.cursor, len(snap.Mirrors)-1), 0)
}

// Help implements Component.
func (v *Mirrors) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeMirrors) }

// Capturing implements Component.
func (v *Mirrors) Capturing() bool { return false }

func (v *Mirrors) selected() string {
	if v.cursor < len(v.snap.Mirrors) {
		return v.snap.Mirrors[v.cursor].Name
	}
	return ""
}

// Update implements Component.
func (v *Mirrors) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	n := len(v.snap.Mirrors)
	switch a := v.km.Match(k, keymap.ScopeMirrors); a {
	case keymap.Up:
		v.cursor = max(v.cursor-1, 0)
	case keymap.Down:
		v.cursor = max(min(v.cursor+1, n-1), 0)
	case keymap.Top, keymap.PageUp:
		v.cursor = 0
	case keymap.Bottom, keymap.PageDown:
		v.cursor = max(n-1, 0)
	case keymap.Detail:
		if name := v.selected(); name != "" {
			return emit(ShowMirrorMsg{Mirror: name})
		}
	case keymap.Pause, keymap.Resume, keymap.Recover, keymap.StopMirror:
		if name := v.selected(); name != "" {
			return emit(ActionMsg{Action: a, Targets: []Target{wholeMirror(&v.snap, name)}})
		}
	default:
	}
	return nil
}

// View implements Component. Each mirror is a small card rather than a table
// row: a mirror has ten possible state counts, two cluster names and three
// rates, which do not fit one 80-column row, and there are only a few
// mirrors.
func (v *Mirrors) View() string {
	s := v.skin
	lines := []string{s.Subtle.Render(itoa(len(v.snap.Mirrors))+" mirror(s) into destination ") +
		s.Destination.Render(orUnknown(v.snap.Destination.ID))}
	if len(v.snap.Mirrors) == 0 {
		lines = append(lines, "", s.Subtle.Render("  no mirrors in the snapshot yet"))
		return block(strings.Join(lines, "\n"), v.width, v.height)
	}
	var cards [][]string
	for i := range v.snap.Mirrors {
		cards = append(cards, v.card(i))
	}
	// Scroll by whole cards so the selected one is always fully visible.
	room := v.height - 1
	first := 0
	for used := 0; ; first++ {
		used = 0
		for j := first; j <= v.cursor; j++ {
			used += len(cards[j]) + 1
		}
		if used <= room || first == v.cursor {
			break
		}
	}
	for _, c := range cards[first:] {
		lines = append(lines, "")
		lines = append(lines, c...)
	}
	return block(strings.Join(lines, "\n"), v.width, v.height)
}

// card renders mirror i: name, source and size; state counts (wrapped);
// lag, RPO estimate and throughput.
func (v *Mirrors) card(i int) []string {
	s := v.skin
	m, sum := &v.snap.Mirrors[i], v.sums[i]
	name := "  " + m.Name + " "
	if i == v.cursor {
		name = s.Selected.Render("> " + m.Name + " ")
	} else {
		name = s.Text.Bold(true).Render(name)
	}
	src := orUnknown(m.Source.ID)
	if len(m.Source.Bootstrap) > 0 {
		src += " (" + m.Source.Bootstrap[0] + ")"
	}
	srcStyle := s.Source
	if m.SourceReach.Down {
		srcStyle = s.Err
		src += " UNREACHABLE for " + duration(v.snap.Taken.Sub(m.SourceReach.DownSince))
	}
	out := []string{name + "  " + s.Label.Render("source ") + srcStyle.Render(src) +
		s.Subtle.Render("  "+groupDigits(int64(sum.Partitions))+" partitions")}
	line := "   "
	for _, it := range stateItems(s, sum.Counts) {
		if line != "   " && ansi.StringWidth(line)+2+ansi.StringWidth(it) > v.width {
			out = append(out, line)
			line = "   "
		}
		if line != "   " {
			line += "  "
		}
		line += it
	}
	if line == "   " {
		line += s.Subtle.Render("no partitions")
	}
	out = append(out, line)
	lag := s.Label.Render("lag ") + s.Text.Render(groupDigits(sum.TotalLag)+" records") +
		"  " + s.Label.Render("RPO≈ ") + s.Text.Render(duration(sum.WorstLagTime))
	if sum.LagUnknown > 0 {
		lag = s.Label.Render("lag ") + s.Err.Render("unknown") + "  " + s.Label.Render("RPO ") + s.Err.Render("≥ "+duration(sum.WorstLagTime))
	}
	out = append(out, "   "+lag+
		"  "+s.Text.Render(fmt.Sprintf("%.2f MB/s  %.0f batches/s", sum.BytesPerSec/1e6, sum.BatchesPerSec)))
	out = append(out, "   "+s.Label.Render("synced ")+syncItem(s, "topics", m.Meta.Topics)+"  "+
		syncItem(s, "configs", m.Meta.Configs)+"  "+syncItem(s, "ACLs", m.Meta.ACLs)+"  "+groupSyncItem(s, m.Groups))
	return out
}

// syncItem shows when a kind of metadata was last synced, or its error.
func syncItem(s *Skin, kind string, k engine.MetaSyncKind) string {
	switch {
	case k.LastError != "" && !k.LastErrorAt.Before(k.LastSync):
		return s.Warn.Render(kind + " failing")
	case k.LastSync.IsZero():
		return s.Subtle.Render(kind + " -")
	}
	return s.Text.Render(kind + " " + k.LastSync.UTC().Format("15:04:05"))
}

// groupSyncItem shows the newest group offset sync.
func groupSyncItem(s *Skin, gs []engine.GroupSnapshot) string {
	var last time.Time
	for _, g := range gs {
		if g.LastSync.After(last) {
			last = g.LastSync
		}
	}
	if last.IsZero() {
		return s.Subtle.Render("groups -")
	}
	return s.Text.Render("groups " + last.UTC().Format("15:04:05"))
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
