package views

import (
	"fmt"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
)

const detailLabelWidth = 21

// Detail shows everything the engine publishes about one partition: the
// numbers behind a failover decision and the reason a partition is stuck.
type Detail struct {
	skin          *Skin
	km            keymap.KeyMap
	width, height int

	snap   engine.Snapshot
	key    PartKey
	p      *engine.PartitionSnapshot // nil when the partition left the snapshot
	scroll int
}

// NewDetail returns an empty detail view.
func NewDetail(skin *Skin, km keymap.KeyMap) *Detail { return &Detail{skin: skin, km: km} }

// Show selects the partition to describe.
func (d *Detail) Show(k PartKey) {
	d.key, d.scroll = k, 0
	d.lookup()
}

// Key returns the partition shown.
func (d *Detail) Key() PartKey { return d.key }

// SetSize implements Component.
func (d *Detail) SetSize(width, height int) { d.width, d.height = width, height }

// SetSnapshot refreshes the partition from a new snapshot.
func (d *Detail) SetSnapshot(snap engine.Snapshot) {
	d.snap = snap
	d.lookup()
}

// Help implements Component.
func (d *Detail) Help() []keymap.Entry { return d.km.ForScope(keymap.ScopeDetail) }

// Capturing implements Component.
func (d *Detail) Capturing() bool { return false }

func (d *Detail) lookup() {
	d.p = nil
	m := findMirror(&d.snap, d.key.Mirror)
	if m == nil {
		return
	}
	ps := m.Partitions
	i := sort.Search(len(ps), func(i int) bool {
		return ps[i].Topic > d.key.Topic || (ps[i].Topic == d.key.Topic && ps[i].Partition >= d.key.Partition)
	})
	if i < len(ps) && ps[i].Topic == d.key.Topic && ps[i].Partition == d.key.Partition {
		d.p = &ps[i]
	}
}

// Update implements Component.
func (d *Detail) Update(msg tea.Msg) tea.Cmd {
	if w, ok := msg.(tea.MouseWheelMsg); ok {
		d.scroll = max(d.scroll+wheelStep(w), 0) // View clamps the bottom
		return nil
	}
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	page := max(d.height-2, 1)
	switch a := d.km.Match(k, keymap.ScopeDetail); a {
	case keymap.Up:
		d.scroll--
	case keymap.Down:
		d.scroll++
	case keymap.PageUp:
		d.scroll -= page
	case keymap.PageDown:
		d.scroll += page
	case keymap.Top:
		d.scroll = 0
	case keymap.Bottom:
		d.scroll = 1 << 30
	case keymap.Back:
		return emit(BackMsg{})
	case keymap.Pause, keymap.Resume, keymap.Recover, keymap.Rebuild, keymap.Stop:
		pairs := map[string]map[string]bool{d.key.Mirror: {d.key.Topic: true}}
		return emit(ActionMsg{Action: a, Targets: targetsFor(&d.snap, pairs)})
	case keymap.StopMirror:
		return emit(ActionMsg{Action: a, Targets: []Target{wholeMirror(&d.snap, d.key.Mirror)}})
	default:
	}
	return nil
}

// View implements Component.
func (d *Detail) View() string {
	s := d.skin
	title := s.Title.Render("partition ") + s.Text.Bold(true).Render(d.key.Mirror+" / "+d.key.Topic+" / "+itoa32(d.key.Partition))
	if d.p != nil {
		title += "  " + s.RenderState(d.p.State)
	}
	var lines []string
	if d.p == nil {
		lines = []string{s.Warn.Render("not in the latest snapshot (topic deleted, or not owned by any instance yet)")}
	} else {
		lines = d.lines(d.p)
	}
	room := max(d.height-2, 0)
	d.scroll = max(min(d.scroll, len(lines)-room), 0)
	end := min(d.scroll+room, len(lines))
	body := lines[d.scroll:end]
	footer := ""
	if len(lines) > room {
		footer = s.Subtle.Render(fmt.Sprintf("lines %d–%d of %d (↑/↓ scroll)", d.scroll+1, end, len(lines)))
	}
	return block(title+"\n"+strings.Join(body, "\n")+"\n"+footer, d.width, d.height)
}

// field renders "label   value", wrapping a long value under itself.
func (d *Detail) field(label, value string) []string {
	s := d.skin
	room := max(d.width-detailLabelWidth, 10)
	wrapped := strings.Split(ansi.Wrap(value, room, " /,"), "\n")
	out := make([]string, len(wrapped))
	for i, w := range wrapped {
		l := ""
		if i == 0 {
			l = label
		}
		out[i] = s.Label.Render(fit(l, detailLabelWidth, false)) + w
	}
	return out
}

func (d *Detail) lines(p *engine.PartitionSnapshot) []string {
	s := d.skin
	var out []string
	add := func(label, value string) { out = append(out, d.field(label, value)...) }

	state := s.RenderState(p.State)
	if p.State == partition.Failed {
		state += s.Subtle.Render(" (was " + StateLabel(p.PrevState) + ")")
	}
	add("state", state)
	if p.Progress != nil {
		// Long work is why a partition sits in alignment for minutes:
		// shown first, where the state is.
		out = append(out, d.workLines(p.Progress)...)
	}
	owner := p.Owner
	if owner == "" {
		owner = "unowned"
	}
	add("owner", s.Text.Render(owner)+s.Label.Render("   source leader ")+s.Text.Render(brokerName(p.SourceLeader)))
	if p.Error != "" {
		add("last error", s.Err.Render(p.Error))
	} else {
		add("last error", s.Subtle.Render("none"))
	}
	add("retry", d.retryText(p))
	add("source start / HWM", s.Source.Render(offset(p.SourceLogStart)+" / "+offset(p.SourceHWM)))
	add("destination log end", s.Destination.Render(offset(p.DestLogEnd)))
	add("lag", s.Text.Render(groupDigits(p.Lag)+" records, "+duration(p.LagTime)+" behind"))
	add("source epoch", s.Text.Render(epoch(p.SourceEpoch)))
	add("LME (epoch:offset)", s.Text.Render(lme(p.LastEpoch, p.LastOffset)))
	add("epoch lineage", d.lineageText(p.Lineage))
	add("writer epoch", s.Text.Render(fmt.Sprint(p.WriterEpoch)))
	// A source topic deleted and recreated keeps its name but not its id:
	// the ids tell the operator which topics a FAILED partition means.
	add("topic ids", s.Source.Render(topicID(p.SourceTopicID))+s.Label.Render(" -> ")+s.Destination.Render(topicID(p.DestTopicID)))
	txns := s.Text.Render(itoa(p.OpenTxns))
	if p.OpenTxns > 0 {
		txns = s.Warn.Render(itoa(p.OpenTxns) + " open (aborted at stop/failover)")
	}
	add("open transactions", txns)
	// Filler batches are appended only to keep offsets identical (gaps,
	// fresh starts above offset 0); an operator checking "did we copy
	// everything" needs them apart from real batches.
	add("copied", s.Text.Render(byteSize(p.BytesCopied)+" in "+groupDigits(p.BatchesCopied)+" batches ("+
		groupDigits(p.FillerBatches)+" filler)"))
	if d.snap.Observer {
		add("rate", s.Text.Render(recordRate(p.RecordsPerSec)+" into the destination"))
	} else {
		add("rate", s.Text.Render(byteRate(p.BytesPerSec)+", "+fmt.Sprintf("%.0f", p.BatchesPerSec)+" batches/s"))
	}
	return out
}

func topicID(id string) string {
	if id == "" {
		return "unknown"
	}
	return id
}

func brokerName(id int32) string {
	if id < 0 {
		return "unknown"
	}
	return "broker " + itoa32(id)
}

// retryText explains when a FAILED partition tries again. Times are relative
// to the snapshot, not the wall clock, so the text is what the engine knew.
func (d *Detail) retryText(p *engine.PartitionSnapshot) string {
	s := d.skin
	if p.State != partition.Failed {
		if p.Attempt > 0 {
			return s.Text.Render("attempt " + itoa(p.Attempt))
		}
		return s.Subtle.Render("none")
	}
	if !p.Retryable {
		how := "waits for an operator recover"
		if _, ok := d.km.Lookup(keymap.Recover); ok {
			how = "waits for recover (R)"
		}
		return s.Err.Render("attempt "+itoa(p.Attempt)+", not retryable") + s.Text.Render(": "+how)
	}
	if p.NextRetry.IsZero() {
		return s.Warn.Render("attempt " + itoa(p.Attempt) + ", no retry scheduled")
	}
	in := p.NextRetry.Sub(d.snap.Taken)
	when := "due now"
	if in > 0 {
		when = "in " + duration(in)
	}
	return s.Warn.Render("attempt "+itoa(p.Attempt)) + s.Text.Render(", next retry "+when+" ("+clock(p.NextRetry)+" UTC)")
}

func (d *Detail) lineageText(l []engine.EpochStart) string {
	s := d.skin
	if len(l) == 0 {
		return s.Subtle.Render("unknown")
	}
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = "epoch " + itoa32(e.Epoch) + " from " + offset(e.StartOffset)
	}
	return s.Text.Render(strings.Join(parts, ", "))
}
