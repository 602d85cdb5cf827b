package views

import (
	"strings"

	"github.com/kmirror/kmirror/engine/partition"
)

// stateCode is a state's one-letter form for the topics view's counts
// ("M 98 F 2"). Transitional states are the lower case of where they go,
// so the letters stay unique and the help can list them in one line.
func stateCode(s partition.State) string {
	switch s {
	case partition.Unknown:
		return "?"
	case partition.LogAlignment:
		return "A"
	case partition.EpochFencing:
		return "E"
	case partition.Mirroring:
		return "M"
	case partition.Pausing:
		return "p"
	case partition.Paused:
		return "P"
	case partition.Stopping:
		return "s"
	case partition.Stopped:
		return "S"
	case partition.Failed:
		return "F"
	case partition.ULERecovery:
		return "U"
	}
	return "?"
}

// View implements Component: an info line, the column header and the
// visible rows.
func (v *Topics) View() string {
	return v.view(v.skin, v.infoLine, v.emptyText, v.rowLine)
}

func (v *Topics) emptyText() string {
	if len(v.all) == 0 {
		return "no topics yet (waiting for the engine)"
	}
	return v.noMatchText()
}

func (v *Topics) infoLine() string {
	s := v.skin
	showing := s.Label.Render("showing ") +
		s.Text.Render(groupDigits(int64(len(v.rows)))+" of "+groupDigits(int64(len(v.all)))+" topics") +
		s.Subtle.Render(" ("+groupDigits(int64(v.partitions))+" partitions)")
	return v.list.infoLine(s, []string{showing}, v.sortKey.String())
}

// statesText is the compact counts, in the order partition.States lists
// them, e.g. "M 98 F 2".
func statesText(r *topicRow) string {
	var b strings.Builder
	for _, st := range partition.States {
		if n := r.counts[st]; n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(stateCode(st) + " " + itoa(n))
		}
	}
	return b.String()
}

// rateText shows what is known of the topic's rate: bytes from an
// instance, records from an observer, both when both are.
func rateText(r *topicRow) string {
	switch {
	case r.bytes > 0 && r.records > 0:
		return byteRate(r.bytes) + " " + recordRate(r.records)
	case r.records > 0:
		return recordRate(r.records)
	}
	return byteRate(r.bytes)
}

func (v *Topics) cellText(c column, r *topicRow) string {
	switch c.id {
	case colMirror:
		return r.mirror
	case colTopic:
		return r.topic
	case colParts:
		return itoa(r.parts)
	case colStates:
		return statesText(r)
	case colLag:
		if r.lagKnown == 0 {
			return "-"
		}
		return compactCount(r.lag)
	case colLagTime:
		return duration(r.lagTime)
	case colRate:
		if v.snap.Observer {
			return recordRate(r.records)
		}
		return rateText(r)
	case colETA:
		return r.eta.Text()
	case colPartition, colState, colSrcOffset, colDstOffset, colEpoch, colLME:
	}
	return ""
}

// rowLine renders one row; like the partitions table, the cursor row is
// one reverse-video span and other rows paint runs of one style.
func (v *Topics) rowLine(r *topicRow, selected bool) string {
	s := v.skin
	if selected {
		var b strings.Builder
		b.WriteString("> ")
		for i, c := range v.cols {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(fit(v.cellText(c, r), c.width, c.right))
		}
		return s.Selected.Render(fit(b.String(), v.width, false))
	}
	var w paintRuns
	text := s.paints[cellText]
	w.put(text, " ")
	for _, c := range v.cols {
		w.put(text, " ")
		cell := fit(v.cellText(c, r), c.width, c.right)
		switch {
		case c.id == colStates:
			v.statesCell(&w, r, c.width)
		case c.id == colLagTime && r.lagTime >= lagTimeWarn:
			w.put(s.paints[cellWarn], cell)
		case c.id == colETA:
			w.put(s.paints[etaStyle(r.eta)], cell)
		case c.id == colMirror, strings.TrimSpace(cell) == "-":
			w.put(s.paints[cellSubtle], cell)
		default:
			w.put(text, cell)
		}
	}
	return w.String()
}

// paintRuns joins text painted in runs of one Paint, so a row costs a few
// escape sequences rather than two per cell.
type paintRuns struct {
	b, run strings.Builder
	paint  Paint
}

func (w *paintRuns) put(p Paint, text string) {
	if p != w.paint {
		w.flush()
		w.paint = p
	}
	w.run.WriteString(text)
}

func (w *paintRuns) flush() {
	if w.run.Len() > 0 {
		w.b.WriteString(w.paint.Apply(w.run.String()))
		w.run.Reset()
	}
}

func (w *paintRuns) String() string {
	w.flush()
	return w.b.String()
}

// statesCell paints each count in its state's style, cut to width like
// fit would cut the plain text.
func (v *Topics) statesCell(w *paintRuns, r *topicRow, width int) {
	text := v.skin.paints[cellText]
	plain := statesText(r)
	if len(plain) > width {
		w.put(text, fit(plain, width, false))
		return
	}
	first := true
	for _, st := range partition.States {
		n := r.counts[st]
		if n == 0 {
			continue
		}
		if !first {
			w.put(text, " ")
		}
		first = false
		w.put(v.skin.statePaints[st], stateCode(st)+" "+itoa(n))
	}
	w.put(text, strings.Repeat(" ", width-len(plain)))
}
