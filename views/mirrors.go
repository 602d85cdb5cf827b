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
	etas   *ETAs
	sums   []Summary
	rows   []int // indexes into snap.Mirrors the filter shows
	cursor int   // into rows
	filter Filter
}

// NewMirrors returns an empty mirrors list.
func NewMirrors(skin *Skin, km keymap.KeyMap) *Mirrors { return &Mirrors{skin: skin, km: km} }

// SetSize implements Component.
func (v *Mirrors) SetSize(width, height int) { v.width, v.height = width, height }

// SetETAs hands over the catch-up estimates of the next snapshot.
func (v *Mirrors) SetETAs(e *ETAs) { v.etas = e }

// SetSnapshot replaces the data.
func (v *Mirrors) SetSnapshot(snap engine.Snapshot) {
	v.snap = snap
	v.sums = make([]Summary, len(snap.Mirrors))
	for i := range snap.Mirrors {
		v.sums[i] = SummarizeMirror(&snap.Mirrors[i], snap.Taken)
	}
	v.refilter()
}

// refilter rebuilds the shown rows, keeping the cursor on the same mirror.
func (v *Mirrors) refilter() {
	sel := v.selected()
	v.rows = v.rows[:0]
	for i := range v.snap.Mirrors {
		if v.filter.Match(v.snap.Mirrors[i].Name) {
			if v.snap.Mirrors[i].Name == sel {
				v.cursor = len(v.rows)
			}
			v.rows = append(v.rows, i)
		}
	}
	v.cursor = max(min(v.cursor, len(v.rows)-1), 0)
}

// Help implements Component.
func (v *Mirrors) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeMirrors) }

// Capturing implements Component.
func (v *Mirrors) Capturing() bool { return v.filter.Editing() }

func (v *Mirrors) selected() string {
	if v.cursor < len(v.rows) {
		return v.snap.Mirrors[v.rows[v.cursor]].Name
	}
	return ""
}

// Update implements Component.
func (v *Mirrors) Update(msg tea.Msg) tea.Cmd {
	if v.filter.Editing() {
		if v.filter.Update(msg) != FilterUnchanged {
			v.refilter()
		}
		return nil
	}
	n := len(v.rows)
	switch msg := msg.(type) {
	case tea.MouseClickMsg:
		first, heights := v.cardLayout()
		y := msg.Y - 1 // the count line
		for i := first; i < len(heights) && msg.Button == tea.MouseLeft; i++ {
			if y >= 0 && y <= heights[i] { // the blank line above a card selects it too
				v.cursor = i
				break
			}
			y -= heights[i] + 1
		}
		return nil
	case tea.MouseWheelMsg:
		v.cursor = max(min(v.cursor+wheelStep(msg)/wheelLines, n-1), 0)
		return nil
	case tea.KeyPressMsg:
		return v.key(msg, n)
	}
	return nil
}

func (v *Mirrors) key(k tea.KeyPressMsg, n int) tea.Cmd {
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
	case keymap.Filter:
		v.filter.Open()
	case keymap.Back:
		if v.filter.Clear() {
			v.refilter()
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
	head := s.Subtle.Render(itoa(len(v.snap.Mirrors))+" mirror(s) into destination ") +
		s.Destination.Render(orUnknown(v.snap.Destination.ID))
	switch {
	case v.filter.Editing():
		head = v.filter.PromptLine(s, v.width)
	case v.filter.Active():
		head += "  " + s.Label.Render("showing ") + s.Text.Render(itoa(len(v.rows))) + "  " + v.filter.Label(s)
	}
	lines := []string{head}
	switch {
	case len(v.snap.Mirrors) == 0:
		lines = append(lines, "", s.Subtle.Render("  no mirrors in the snapshot yet"))
		return block(strings.Join(lines, "\n"), v.width, v.height)
	case len(v.rows) == 0:
		lines = append(lines, "", s.Subtle.Render("  no mirror matches the filter (esc clears it)"))
		return block(strings.Join(lines, "\n"), v.width, v.height)
	}
	first, _ := v.cardLayout()
	for _, i := range v.rows[first:] {
		c := v.card(i)
		lines = append(lines, "")
		lines = append(lines, c...)
	}
	return block(strings.Join(lines, "\n"), v.width, v.height)
}

// cardLayout returns the first card shown and every shown card's height.
// It scrolls by whole cards so the selected one is always fully visible;
// View and mouse clicks both use it, so a click lands on the card drawn.
func (v *Mirrors) cardLayout() (first int, heights []int) {
	for _, i := range v.rows {
		heights = append(heights, len(v.card(i)))
	}
	room := v.height - 1
	for ; first < v.cursor; first++ {
		used := 0
		for j := first; j <= v.cursor; j++ {
			used += heights[j] + 1
		}
		if used <= room {
			break
		}
	}
	return first, heights
}

// card renders mirror i: name, source and size; state counts (wrapped);
// lag, RPO estimate and throughput.
func (v *Mirrors) card(i int) []string {
	s := v.skin
	m, sum := &v.snap.Mirrors[i], v.sums[i]
	name := "  " + m.Name + " "
	if m.Name == v.selected() {
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
	rtt := ""
	if rt := roundTrips(m.SourceRoundTrips); rt != "" {
		rtt = s.Label.Render("  rtt ") + s.Text.Render(rt)
	}
	out := []string{name + "  " + s.Label.Render("source ") + srcStyle.Render(src) + rtt +
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
		rpo := s.Label.Render("RPO ") + s.Err.Render("unknown")
		if len(sum.Outages) > 0 {
			rpo = lossWindow(s, &sum)
		}
		lag = s.Label.Render("lag ") + s.Err.Render("unknown") + "  " + rpo
	}
	if nm, ok := notMirrored(s, &sum); ok {
		lag = nm
	}
	tp := fmt.Sprintf("%.2f MB/s  %.0f batches/s", sum.BytesPerSec/1e6, sum.BatchesPerSec)
	if v.snap.Observer {
		tp = recordRate(sum.RecordsPerSec) + " into the destination"
	}
	out = append(out, "   "+lag+"  "+s.Text.Render(tp))
	out = append(out, "   "+etaItem(s, v.etas.Mirror(m.Name)))
	out = append(out, "   "+s.Label.Render("synced ")+syncItem(s, "topics", m.Meta.Topics)+"  "+
		syncItem(s, "configs", m.Meta.Configs)+"  "+syncItem(s, "ACLs", m.Meta.ACLs)+"  "+groupSyncItem(s, m.Groups))
	return out
}

// roundTrips renders the round trips measured to a mirror's source
// brokers, the shortest to the longest ("48ms", "2ms–51ms"); "" when there
// are none (the engine leaves them out while its partitions long-poll and
// while the source is unreachable; an observer has none).
func roundTrips(rts []engine.BrokerRoundTrip) string {
	if len(rts) == 0 {
		return ""
	}
	lo, hi := rts[0].RTT, rts[0].RTT
	for _, b := range rts[1:] {
		lo, hi = min(lo, b.RTT), max(hi, b.RTT)
	}
	ms := func(d time.Duration) string {
		if d < time.Millisecond {
			return "<1ms"
		}
		return duration(d)
	}
	if ms(lo) == ms(hi) {
		return ms(lo)
	}
	return ms(lo) + "–" + ms(hi)
}

// etaItem is a mirror's catch-up estimate: its slowest partition's, and
// how many partitions will not catch up when some will not.
func etaItem(s *Skin, e ETA) string {
	label := s.Label.Render("catch-up ")
	behind := ""
	if e.Growing > 0 {
		behind = itoa(e.Growing) + " falling behind"
	}
	switch e.Kind {
	case ETAStalled:
		text := itoa(e.Stalled) + " stalled"
		if behind != "" {
			text += ", " + behind
		}
		return label + s.Warn.Render("never: "+text)
	case ETAGrowing:
		return label + s.Warn.Render("never: "+behind)
	case ETACatching:
		return label + s.Text.Render("in "+e.Text())
	case ETASynced:
		return label + s.Text.Render("in sync")
	case ETAUnknown:
	}
	return label + s.Subtle.Render("— (needs two snapshots of a copying partition)")
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
