package views

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
)

// MinHeaderHeight is the header's height with one line of state counts; a
// narrow terminal with many different states needs one more.
const MinHeaderHeight = 4

// Header is the always-visible summary: which mirrors, from which cluster to
// which, how many partitions in each state, and how far behind the
// destination is.
type Header struct {
	skin  *Skin
	width int
	snap  engine.Snapshot
	sum   Summary
	have  bool
}

// NewHeader returns an empty header; it says it is waiting until the first
// snapshot arrives.
func NewHeader(skin *Skin) *Header { return &Header{skin: skin} }

// SetSize sets the width; the height follows from the content (Height).
func (h *Header) SetSize(width int) { h.width = width }

// SetSnapshot replaces the data shown.
func (h *Header) SetSnapshot(snap engine.Snapshot, sum Summary) {
	h.snap, h.sum, h.have = snap, sum, true
}

// Height is the number of lines View returns at the current width.
func (h *Header) Height() int { return len(h.lines()) }

// View renders Height lines of the header's width.
func (h *Header) View() string {
	lines := h.lines()
	return block(strings.Join(lines, "\n"), h.width, len(lines))
}

func (h *Header) lines() []string {
	s := h.skin
	title := s.Title.Render("kmirror")
	if !h.have {
		return []string{title + "  " + s.Subtle.Render("waiting for the first engine snapshot…"), "", "", ""}
	}
	out := []string{h.spread(title+"  "+h.mirrorNames(), h.instance()), h.clusters()}
	out = append(out, h.banners()...)
	out = append(out, h.outages()...)
	out = append(out, h.counts()...)
	out = append(out, h.rates())
	return append(out, h.work()...)
}

// outages is one error line per mirror whose source does not answer: the
// one thing an operator must not miss is that the numbers below are not
// what the source holds.
func (h *Header) outages() []string {
	var out []string
	for _, o := range h.sum.Outages {
		what := "lag unknown, partitions FAILED until it answers; a stop needs only the destination"
		if o.Waiting == 0 {
			what = "none of its partitions needs it (paused or stopped)"
		}
		line := fmt.Sprintf("SOURCE UNREACHABLE %s for %s (mirror %s): %s",
			o.Source, duration(h.snap.Taken.Sub(o.Since)), o.Mirror, what)
		out = append(out, h.skin.Err.Render(ansi.Truncate(line, max(h.width, 1), "…")))
	}
	return out
}

// maxLostLines bounds the lines naming lost instances; the rest are
// counted on the last one, so a fleet going away cannot push the table off
// the screen.
const maxLostLines = 2

// banners are the error lines for what the snapshot's own numbers cannot
// show: a destination that does not answer (every number below is old),
// partitions nothing mirrors, and the instances that went away.
func (h *Header) banners() []string {
	var out []string
	add := func(line string) {
		out = append(out, h.skin.Err.Render(ansi.Truncate(line, max(h.width, 1), "…")))
	}
	now := h.snap.Taken
	if r := h.snap.DestReach; r.Down {
		dst := h.snap.Destination.ID
		if len(h.snap.Destination.Bootstrap) > 0 {
			dst = h.snap.Destination.Bootstrap[0]
		}
		add(fmt.Sprintf("DESTINATION UNREACHABLE %s for %s: states and offsets are as last read; %s", dst, duration(now.Sub(r.DownSince)), r.Error))
	}
	if u := h.snap.Unowned; u.Partitions > 0 {
		line := fmt.Sprintf("no live instance owns %s: nothing mirrors %s, and commands wait for an instance",
			plural(u.Partitions, "partition", "partitions"), pick(u.Partitions == 1, "it", "them"))
		if !u.Since.IsZero() {
			line = fmt.Sprintf("no live instance owns %s (for %s): nothing mirrors %s, and commands wait for an instance",
				plural(u.Partitions, "partition", "partitions"), duration(now.Sub(u.Since)), pick(u.Partitions == 1, "it", "them"))
		}
		add(line)
	}
	for i, l := range h.snap.Lost {
		if i == maxLostLines-1 && len(h.snap.Lost) > maxLostLines {
			add(fmt.Sprintf("instance lost: %s and %d more (see the owner column)", l.ID, len(h.snap.Lost)-i-1))
			break
		}
		age := "no heartbeat read"
		if !l.LastHeartbeat.IsZero() {
			age = "heartbeat " + duration(now.Sub(l.LastHeartbeat)) + " old"
		}
		add(fmt.Sprintf("instance lost: %s (%s), recorded owner of %s", l.ID, age, plural(l.Partitions, "partition", "partitions")))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return groupDigits(int64(n)) + " " + many
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// spread puts left and right on one line, right-aligned when both fit.
func (h *Header) spread(left, right string) string {
	gap := h.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if right == "" || gap < 2 {
		return left
	}
	return left + strings.Repeat(" ", gap) + right
}

func (h *Header) mirrorNames() string {
	ms := h.snap.Mirrors
	switch len(ms) {
	case 0:
		return h.skin.Subtle.Render("no mirrors")
	case 1:
		return h.skin.Label.Render("mirror ") + h.skin.Text.Bold(true).Render(ms[0].Name)
	}
	names := make([]string, len(ms))
	for i := range ms {
		names[i] = ms[i].Name
	}
	return h.skin.Label.Render("mirrors ") + h.skin.Text.Bold(true).Render(strings.Join(names, ", "))
}

func (h *Header) instance() string {
	s := h.skin
	out := s.Label.Render("snapshot ") + s.Text.Render(clock(h.snap.Taken)+" UTC")
	if h.snap.Observer {
		out = s.Label.Render("observing") + "  " + out
	}
	if h.snap.Instance != "" {
		out = s.Label.Render("instance ") + s.Text.Render(h.snap.Instance) + "  " + out
	}
	return out
}

// cluster names a cluster by id, and by its first bootstrap server when the
// terminal is wide enough to afford it.
func (h *Header) cluster(c engine.ClusterInfo) string {
	id := c.ID
	if id == "" {
		id = "?"
	}
	if h.width >= 120 && len(c.Bootstrap) > 0 {
		return id + " (" + c.Bootstrap[0] + ")"
	}
	return id
}

// clusters names the source cluster(s) and the destination. The destination
// is never cut: if the line is too long the source list is shortened.
func (h *Header) clusters() string {
	s := h.skin
	var srcs []string
	seen := map[string]bool{}
	for i := range h.snap.Mirrors {
		m := &h.snap.Mirrors[i]
		name := h.cluster(m.Source)
		if !seen[name] {
			seen[name] = true
			srcs = append(srcs, name)
		}
	}
	src := strings.Join(srcs, ", ")
	if src == "" {
		src = "-"
	}
	dst := s.Subtle.Render(" → ") + s.Label.Render("destination ") + s.Destination.Render(h.cluster(h.snap.Destination))
	room := h.width - ansi.StringWidth(dst) - len("source ")
	return s.Label.Render("source ") + s.Source.Render(ansi.Truncate(src, max(room, 1), "…")) + dst
}

// counts renders the state counts on one line, or two when they do not fit.
func (h *Header) counts() []string {
	s := h.skin
	if h.sum.Partitions == 0 {
		return []string{s.Subtle.Render("no partitions yet")}
	}
	items := stateItems(s, h.sum.Counts)
	total := s.Subtle.Render("(" + groupDigits(int64(h.sum.Partitions)) + " partitions)")
	lines := []string{""}
	for _, it := range append(items, total) {
		cur := &lines[len(lines)-1]
		switch {
		case *cur == "":
			*cur = it
		case ansi.StringWidth(*cur)+2+ansi.StringWidth(it) <= h.width:
			*cur += "  " + it
		case len(lines) < 2:
			lines = append(lines, it)
		default:
			*cur += "  " + it // cut by block; ten states never need a third line at 80 columns
		}
	}
	return lines
}

// rates shows lag, the RPO estimate and throughput, dropping the
// decorations (where the worst lag is, the word "throughput") before it
// would cut a number.
func (h *Header) rates() string {
	s := h.skin
	lagStyle := s.Text
	if h.sum.TotalLag > 0 {
		lagStyle = s.Warn
	}
	rpoStyle := s.Text
	if h.sum.WorstLagTime > 0 {
		rpoStyle = s.Warn
	}
	lag := s.Label.Render("lag ") + lagStyle.Render(groupDigits(h.sum.TotalLag)+" records")
	rpo := s.Label.Render("RPO≈ ") + rpoStyle.Render(duration(h.sum.WorstLagTime))
	if h.sum.LagUnknown > 0 {
		// The source's end is not known: the records behind are
		// unknown; in time, during an outage, the loss is a range.
		lag = s.Label.Render("lag ") + s.Err.Render("unknown")
		rpo = s.Label.Render("RPO ") + s.Err.Render("unknown")
		if len(h.sum.Outages) > 0 {
			rpo = lossWindow(s, &h.sum)
		}
	}
	where := ""
	if h.sum.WorstLagTime > 0 {
		where = s.Subtle.Render(" (" + h.sum.WorstAt + ")")
	}
	lag += "  " + rpo
	if nm, ok := notMirrored(s, &h.sum); ok {
		// Every partition is stopped: what the failover left behind
		// replaces the lag and the RPO, which no longer move.
		lag, where = nm, ""
	}
	tp := s.Text.Render(fmt.Sprintf("%.2f MB/s  %.0f batches/s", h.sum.BytesPerSec/1e6, h.sum.BatchesPerSec))
	if h.snap.Observer {
		// An observer copies nothing: the destination's growth in
		// offsets is the rate it knows.
		tp = s.Text.Render(recordRate(h.sum.RecordsPerSec) + " into the destination")
	}
	for _, line := range []string{
		lag + where + "  " + s.Label.Render("throughput ") + tp,
		lag + "  " + s.Label.Render("throughput ") + tp,
		lag + "  " + tp,
	} {
		if ansi.StringWidth(line) <= h.width {
			return line
		}
	}
	return lag // the numbers that matter most, before the throughput
}
