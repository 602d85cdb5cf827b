package views

import (
	"time"

	"charm.land/bubbles/v2/progress"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
)

// Long work (an adoption's verification, a rebuild) shown as progress
// bars: in the partition detail per partition, in the header per topic.

// workBar renders fraction as a Bubbles progress bar of width cells, its
// percentage included, in the skin's colours. The bar is drawn from the
// snapshot's number, not animated: a frame shows what the engine said.
func workBar(s *Skin, fraction float64, width int) string {
	bar := progress.New(progress.WithWidth(width), progress.WithColors(s.Palette.Accent),
		progress.WithFillCharacters('█', '░'))
	bar.EmptyColor = s.Palette.Subtle
	bar.PercentageStyle = s.Text
	return bar.ViewAs(fraction)
}

// workTitle names what the work does, in words.
func workTitle(p *engine.Progress) string {
	switch p.Kind {
	case engine.WorkAdoption:
		return "verifying the destination against the source (adoption)"
	case engine.WorkQuarantine:
		return "rebuild: copying destination-only records to " + p.Step
	case engine.WorkRebuildStep:
		return "rebuild: " + p.Step + " the destination topic"
	case engine.WorkRetain:
		return "rebuild: keeping what the destination held below them in " + p.Step
	}
	return p.Kind.String()
}

// workETAText is "ETA 12s", or what stands for it when there is no estimate.
func workETAText(d time.Duration, complete bool) string {
	switch {
	case complete:
		return "complete"
	case d < 0:
		return "ETA unknown"
	}
	return "ETA " + duration(d)
}

// workLines are the detail view's lines for a partition's long work.
func (d *Detail) workLines(p *engine.Progress) []string {
	s := d.skin
	room := max(d.width-detailLabelWidth, 10)
	bar := workBar(s, p.Fraction(), min(max(room-20, 10), 60))
	out := d.field("long work", s.Warn.Render(workTitle(p)))
	out = append(out, d.field("", bar+"  "+s.Text.Render(workETAText(p.ETA, p.Done >= p.Total)))...)
	started := "started " + clock(p.StartedAt) + " UTC"
	if !p.StartedAt.IsZero() {
		started += " (" + duration(d.snap.Taken.Sub(p.StartedAt)) + " ago)"
	}
	return append(out, d.field("", s.Subtle.Render(groupDigits(p.Done)+" of "+groupDigits(p.Total)+" "+p.Kind.Unit()+", "+started))...)
}

// WorkSum is the long work of one kind on one topic's partitions.
type WorkSum struct {
	Mirror, Topic string
	Kind          engine.WorkKind
	Step          string // the first partition's
	Partitions    int
	Done, Total   int64
	DoneBefore    int64
	StartedAt     time.Time // the earliest
}

// addWork counts a partition's long work in its topic's WorkSum; few
// partitions ever have any, so a slice searched in order is enough.
func (s *Summary) addWork(p *engine.PartitionSnapshot) {
	w := p.Progress
	for i := range s.Work {
		ws := &s.Work[i]
		if ws.Mirror == p.Mirror && ws.Topic == p.Topic && ws.Kind == w.Kind {
			ws.Partitions++
			ws.Done, ws.Total, ws.DoneBefore = ws.Done+w.Done, ws.Total+w.Total, ws.DoneBefore+w.DoneBefore
			if w.StartedAt.Before(ws.StartedAt) {
				ws.StartedAt = w.StartedAt
			}
			return
		}
	}
	s.Work = append(s.Work, WorkSum{Mirror: p.Mirror, Topic: p.Topic, Kind: w.Kind, Step: w.Step, Partitions: 1,
		Done: w.Done, Total: w.Total, DoneBefore: w.DoneBefore, StartedAt: w.StartedAt})
}

// headerWorkBar is the width of the header's compact progress bar.
const headerWorkBar = 16

// work is the header's status line of long work: the first topic's, with
// the number of others ("rebuilding orders: quarantine ███░░ 62% ETA 12s").
func (h *Header) work() []string {
	if len(h.sum.Work) == 0 {
		return nil
	}
	s := h.skin
	w := h.sum.Work[0]
	what := "rebuilding " + w.Topic + ": quarantine"
	switch w.Kind {
	case engine.WorkAdoption:
		what = "adopting " + w.Topic + ": verify"
	case engine.WorkRebuildStep:
		what = "rebuilding " + w.Topic + ": " + w.Step
	case engine.WorkRetain:
		what = "rebuilding " + w.Topic + ": retain"
	case engine.WorkQuarantine:
	}
	if w.Partitions > 1 {
		what += " (" + plural(w.Partitions, "partition", "partitions") + ")"
	}
	fraction := 1.0
	if w.Total > 0 {
		fraction = min(float64(w.Done)/float64(w.Total), 1)
	}
	eta := workETAText(engine.ETA(w.Done, w.Total, w.DoneBefore, w.StartedAt, h.snap.Taken), w.Done >= w.Total)
	more := ""
	if n := len(h.sum.Work) - 1; n > 0 {
		more = s.Subtle.Render("  +" + plural(n, "other", "others"))
	}
	line := s.Warn.Render(what) + " " + workBar(s, fraction, headerWorkBar) + "  " + s.Text.Render(eta) + more
	return []string{ansi.Truncate(line, max(h.width, 1), "…")}
}
