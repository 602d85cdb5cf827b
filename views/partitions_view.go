package views

import (
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
)

// lagTimeWarn is when a partition's lag in time is shown as a warning: a
// minute of RPO is where a DR drill usually stops being "nearly in sync".
const lagTimeWarn = time.Minute

// View implements Component: an info line, the column header and the
// visible rows.
func (v *Partitions) View() string {
	return v.view(v.skin, v.infoLine, v.emptyText, v.rowLine)
}

func (v *Partitions) emptyText() string {
	switch {
	case v.scoped == 0 && v.mirror != "":
		return "mirror " + v.mirror + " has no partitions in this snapshot"
	case v.scoped == 0:
		return "no partitions yet (waiting for the engine)"
	}
	return v.noMatchText()
}

func (v *Partitions) infoLine() string {
	s := v.skin
	lead := []string{s.Label.Render("showing ") + s.Text.Render(groupDigits(int64(len(v.rows)))+" of "+groupDigits(int64(v.scoped)))}
	if v.mirror != "" {
		lead = append(lead, s.Label.Render("mirror ")+s.Text.Render(v.mirror))
	}
	var tail []string
	if len(v.marks) > 0 {
		tail = append(tail, s.Marked.Render(itoa(len(v.marks))+" marked"))
	}
	return v.list.infoLine(s, lead, v.sortKey.String(), tail...)
}

func (v *Partitions) cellText(c column, p *engine.PartitionSnapshot) string {
	switch c.id {
	case colMirror:
		return p.Mirror
	case colTopic:
		return p.Topic
	case colPartition:
		return itoa32(p.Partition)
	case colState:
		return stateText(p.State, c.width)
	case colSrcOffset:
		return offset(p.SourceHWM)
	case colDstOffset:
		return offset(p.DestLogEnd)
	case colLag:
		if p.SourceHWM < 0 || p.DestLogEnd < 0 {
			return "-"
		}
		return compactCount(p.Lag)
	case colLagTime:
		return duration(p.LagTime)
	case colEpoch:
		return epoch(p.SourceEpoch)
	case colLME:
		return lme(p.LastEpoch, p.LastOffset)
	case colRate:
		return rate(v.snap.Observer, p.BytesPerSec, p.RecordsPerSec)
	case colETA:
		return v.etas.Partition(keyOf(p)).Text()
	case colParts, colStates:
	}
	return ""
}

// rowLine renders one row. The cursor row is one reverse-video span of plain
// text (nested styles would cancel each other's reverse); other rows style
// the state cell and warnings.
func (v *Partitions) rowLine(p *engine.PartitionSnapshot, selected bool) string {
	s := v.skin
	_, marked := v.marks[keyOf(p)]
	cursorMark, markMark := " ", " "
	if selected {
		cursorMark = ">"
	}
	if marked {
		markMark = "*"
	}
	if selected {
		var b strings.Builder
		b.WriteString(cursorMark + markMark)
		for i, c := range v.cols {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(fit(v.cellText(c, p), c.width, c.right))
		}
		return s.Selected.Render(fit(b.String(), v.width, false))
	}
	// Cells are grouped into runs of one style and each run is rendered
	// once: a row is three or four Render calls instead of one per cell,
	// which is most of the cost of drawing a page.
	var b, run strings.Builder
	runStyle := cellText
	flush := func() {
		if run.Len() > 0 {
			b.WriteString(v.cellPaint(runStyle, p).Apply(run.String()))
			run.Reset()
		}
	}
	put := func(st cellStyle, text string) {
		if st != runStyle {
			flush()
			runStyle = st
		}
		run.WriteString(text)
	}
	put(cellText, cursorMark)
	if marked {
		put(cellMarked, markMark)
	} else {
		put(cellText, markMark)
	}
	for i, c := range v.cols {
		if i > 0 {
			run.WriteByte(' ')
		}
		text := fit(v.cellText(c, p), c.width, c.right)
		switch {
		case c.id == colState:
			label := stateText(p.State, c.width)
			put(cellState, label)
			put(cellText, strings.Repeat(" ", max(c.width-len(label), 0)))
		case c.id == colLagTime && p.LagTime >= lagTimeWarn:
			put(cellWarn, text)
		case c.id == colETA:
			put(etaStyle(v.etas.Partition(keyOf(p))), text)
		case c.id == colMirror:
			put(cellSubtle, text)
		case c.id == colTopic && marked:
			put(cellMarked, text)
		case strings.TrimSpace(text) == "-":
			put(cellSubtle, text)
		default:
			put(cellText, text)
		}
	}
	flush()
	return b.String()
}

// etaStyle warns of a lag that will not close and dims "nothing to say".
func etaStyle(e ETA) cellStyle {
	switch e.Kind {
	case ETAGrowing, ETAStalled:
		return cellWarn
	case ETAUnknown, ETASynced:
		return cellSubtle
	case ETACatching:
	}
	return cellText
}

// cellStyle names the styles a row's cells use, so runs can be compared.
type cellStyle int8

const (
	cellText cellStyle = iota
	cellSubtle
	cellWarn
	cellMarked
	cellState // the row's state style; must stay last (Skin.paints is sized by it)
)

// String names the cell style.
func (c cellStyle) String() string {
	switch c {
	case cellText:
		return "text"
	case cellSubtle:
		return "subtle"
	case cellWarn:
		return "warn"
	case cellMarked:
		return "marked"
	case cellState:
		return "state"
	}
	return "text"
}

func (v *Partitions) cellPaint(c cellStyle, p *engine.PartitionSnapshot) Paint {
	if c == cellState {
		return v.skin.statePaints[p.State]
	}
	return v.skin.paints[c]
}
