package views

import (
	"cmp"
	"regexp"
	"slices"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
)

// SortKey is the partitions table order.
type SortKey int8

const (
	SortTopic SortKey = iota
	SortLag
	SortState
)

// String names the sort order as the info line shows it.
func (k SortKey) String() string {
	switch k {
	case SortTopic:
		return "topic"
	case SortLag:
		return "lag"
	case SortState:
		return "state"
	}
	return "topic"
}

func (k SortKey) next() SortKey {
	switch k {
	case SortTopic:
		return SortLag
	case SortLag:
		return SortState
	case SortState:
		return SortTopic
	}
	return SortTopic
}

// PartKey identifies one mirrored partition across snapshots.
type PartKey struct {
	Mirror    string
	Topic     string
	Partition int32
}

func keyOf(p *engine.PartitionSnapshot) PartKey {
	return PartKey{p.Mirror, p.Topic, p.Partition}
}

// Partitions is the main table. It keeps the filtered, sorted row index per
// snapshot and renders only the rows that fit, so ten thousand partitions
// cost the same per frame as twenty.
type Partitions struct {
	skin *Skin
	km   keymap.KeyMap

	// rows point into snap
	list[*engine.PartitionSnapshot, PartKey]

	snap    engine.Snapshot
	etas    *ETAs // catch-up estimates of snap; nil shows "—"
	mirrorW int   // MIRROR column width; 0 with one mirror
	scoped  int   // partitions in the mirror scope, before the filter

	marks   map[PartKey]struct{}
	sortKey SortKey
	mirror  string // show only this mirror ("" = all)

	// fromTopics is set while the table shows one topic opened from the
	// topics view: esc restores what it held and goes back there.
	fromTopics *topicOrigin
}

// topicOrigin is the table's filter and mirror scope before a topic was
// opened from the topics view.
type topicOrigin struct{ filter, mirror string }

// NewPartitions returns an empty table.
func NewPartitions(skin *Skin, km keymap.KeyMap) *Partitions {
	v := &Partitions{skin: skin, km: km, marks: map[PartKey]struct{}{}}
	v.list = newList(keyOf, v.rebuild)
	return v
}

// SetSize implements Component.
func (v *Partitions) SetSize(width, height int) {
	v.width, v.height = width, height
	v.cols = partitionColumns(width, v.mirrorW)
	v.clampScroll()
}

// SetSnapshot replaces the data and rebuilds the row index, keeping the
// cursor on the same partition.
func (v *Partitions) SetSnapshot(snap engine.Snapshot) {
	v.snap = snap
	if w := mirrorColumnWidth(&snap); w != v.mirrorW {
		v.mirrorW = w
		v.cols = partitionColumns(v.width, v.mirrorW)
	}
	v.rebuild()
}

// SetETAs hands over the catch-up estimates of the next snapshot; the
// root computes them once for every view.
func (v *Partitions) SetETAs(e *ETAs) { v.etas = e }

// mirrorColumnWidth is 0 for a single mirror (the header names it), else
// the longest mirror name up to maxMirrorCol.
func mirrorColumnWidth(snap *engine.Snapshot) int {
	if len(snap.Mirrors) < 2 {
		return 0
	}
	w := len("MIRROR")
	for i := range snap.Mirrors {
		w = max(w, len(snap.Mirrors[i].Name))
	}
	return min(w, maxMirrorCol)
}

// SetMirror limits the table to one mirror ("" shows all).
func (v *Partitions) SetMirror(name string) {
	v.mirror = name
	v.rebuild()
}

// ShowTopic limits the table to one topic of one mirror, as opened from
// the topics view. The topic is an anchored, quoted filter, so the operator
// sees (and can edit) what limits the rows.
func (v *Partitions) ShowTopic(mirror, topic string) {
	if v.fromTopics == nil {
		v.fromTopics = &topicOrigin{filter: v.filter.Text(), mirror: v.mirror}
	}
	v.mirror = mirror
	v.filter.Set("^" + regexp.QuoteMeta(topic) + "$")
	v.hasSel = false
	v.cursor, v.offset = 0, 0
	v.refilter()
}

// Mirror returns the mirror scope.
func (v *Partitions) Mirror() string { return v.mirror }

// Help implements Component.
func (v *Partitions) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopePartitions) }

// Capturing implements Component: while the filter prompt is open every key
// is text.
func (v *Partitions) Capturing() bool { return v.filter.Editing() }

// Selected returns the partition under the cursor.
func (v *Partitions) Selected() (PartKey, bool) { return v.selected() }

func (v *Partitions) rebuild() {
	v.rows = v.rows[:0]
	v.scoped = 0
	present := make(map[PartKey]struct{}, len(v.marks))
	for i := range v.snap.Mirrors {
		m := &v.snap.Mirrors[i]
		if v.mirror != "" && m.Name != v.mirror {
			continue
		}
		v.scoped += len(m.Partitions)
		for j := range m.Partitions {
			p := &m.Partitions[j]
			if len(v.marks) > 0 {
				if _, ok := v.marks[keyOf(p)]; ok {
					present[keyOf(p)] = struct{}{}
				}
			}
			if v.topicMatches(p.Topic) {
				v.rows = append(v.rows, p)
			}
		}
	}
	// Marks of partitions that disappeared (or left the mirror scope) would
	// make an action name topics the operator can no longer see.
	if len(present) != len(v.marks) {
		v.marks = make(map[PartKey]struct{}, len(present))
		for k := range present {
			v.marks[k] = struct{}{}
		}
	}
	v.sortRows()
	v.restoreCursor()
}

func byTopic(a, b *engine.PartitionSnapshot) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Mirror, b.Mirror))
}

func (v *Partitions) sortRows() {
	switch v.sortKey {
	case SortTopic:
		slices.SortStableFunc(v.rows, byTopic)
	case SortLag:
		slices.SortStableFunc(v.rows, func(a, b *engine.PartitionSnapshot) int {
			return cmp.Or(cmp.Compare(b.Lag, a.Lag), cmp.Compare(b.LagTime, a.LagTime), byTopic(a, b))
		})
	case SortState:
		slices.SortStableFunc(v.rows, func(a, b *engine.PartitionSnapshot) int {
			return cmp.Or(cmp.Compare(stateRank(a.State), stateRank(b.State)), byTopic(a, b))
		})
	}
}

// setFilter applies text as the topic filter (see Filter for "!re" and
// invalid expressions).
func (v *Partitions) setFilter(text string) {
	if v.filter.Set(text) {
		v.refilter()
	}
}

// Update implements Component.
func (v *Partitions) Update(msg tea.Msg) tea.Cmd {
	a, ok := v.update(msg, v.km, keymap.ScopePartitions)
	if !ok {
		return nil
	}
	switch a {
	case keymap.Mark:
		v.toggleMark()
	case keymap.Sort:
		v.sortKey = v.sortKey.next()
		v.sortRows()
		v.restoreCursor()
	case keymap.Detail:
		if key, ok := v.Selected(); ok {
			return emit(OpenDetailMsg(key))
		}
	case keymap.Back:
		return v.back()
	case keymap.Pause, keymap.Resume, keymap.Recover, keymap.Rebuild, keymap.Stop:
		if ts := v.targets(); len(ts) > 0 {
			return emit(ActionMsg{Action: a, Targets: ts})
		}
	case keymap.StopMirror:
		if name := v.currentMirror(); name != "" {
			return emit(ActionMsg{Action: a, Targets: []Target{wholeMirror(&v.snap, name)}})
		}
	default:
	}
	return nil
}

func (v *Partitions) toggleMark() {
	key, ok := v.Selected()
	if !ok {
		return
	}
	if _, marked := v.marks[key]; marked {
		delete(v.marks, key)
	} else {
		v.marks[key] = struct{}{}
	}
	v.moveTo(v.cursor + 1)
}

// back clears, one per press, the filter, the marks and the mirror scope.
// A topic opened from the topics view is left as a whole: after the marks,
// esc restores the table and goes back there.
func (v *Partitions) back() tea.Cmd {
	if o := v.fromTopics; o != nil && len(v.marks) == 0 {
		v.fromTopics = nil
		v.filter.Set(o.filter)
		v.mirror = o.mirror
		v.refilter()
		return emit(BackToTopicsMsg{})
	}
	switch {
	case v.filter.Active():
		v.setFilter("")
	case len(v.marks) > 0:
		clear(v.marks)
	case v.mirror != "":
		v.SetMirror("")
	}
	return nil
}

// targets are the topics of the marked rows, or of the cursor row when
// nothing is marked.
func (v *Partitions) targets() []Target {
	pairs := map[string]map[string]bool{}
	add := func(k PartKey) {
		if pairs[k.Mirror] == nil {
			pairs[k.Mirror] = map[string]bool{}
		}
		pairs[k.Mirror][k.Topic] = true
	}
	if len(v.marks) > 0 {
		for k := range v.marks {
			add(k)
		}
	} else if k, ok := v.Selected(); ok {
		add(k)
	}
	if len(pairs) == 0 {
		return nil
	}
	return targetsFor(&v.snap, pairs)
}

func (v *Partitions) currentMirror() string {
	if k, ok := v.Selected(); ok {
		return k.Mirror
	}
	if v.mirror != "" {
		return v.mirror
	}
	if len(v.snap.Mirrors) == 1 {
		return v.snap.Mirrors[0].Name
	}
	return ""
}

// Marked returns how many rows are marked.
func (v *Partitions) Marked() int { return len(v.marks) }

// FilterText returns the active topic filter.
func (v *Partitions) FilterText() string { return v.filter.Text() }
