package views

import (
	"cmp"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/keymap"
)

// TopicSortKey is the topics view order.
type TopicSortKey int8

const (
	TopicByName TopicSortKey = iota
	TopicByLag
	TopicByLagTime
	TopicByETA
	TopicByFailed
)

// String names the order as the info line shows it.
func (k TopicSortKey) String() string {
	switch k {
	case TopicByName:
		return "name"
	case TopicByLag:
		return "lag"
	case TopicByLagTime:
		return "lag time"
	case TopicByETA:
		return "ETA"
	case TopicByFailed:
		return "failed"
	}
	return "name"
}

func (k TopicSortKey) next() TopicSortKey {
	switch k {
	case TopicByName:
		return TopicByLag
	case TopicByLag:
		return TopicByLagTime
	case TopicByLagTime:
		return TopicByETA
	case TopicByETA:
		return TopicByFailed
	case TopicByFailed:
		return TopicByName
	}
	return TopicByName
}

// stateSlots sizes the per-topic state counts: ULERecovery is the last
// state (TestStateSlots keeps it so). An array rather than a map, because
// a snapshot of 10,000 one-partition topics builds 10,000 of them.
const stateSlots = int(partition.ULERecovery) + 1

// topicRow aggregates one (mirror, topic) of a snapshot.
type topicRow struct {
	mirror, topic  string
	parts          int
	counts         [stateSlots]int
	lag            int64
	lagKnown       int // partitions whose offsets on both sides are known
	lagTime        time.Duration
	bytes, records float64
	eta            ETA
}

func (r *topicRow) key() TopicKey { return TopicKey{r.mirror, r.topic} }

func (r *topicRow) add(p *engine.PartitionSnapshot) {
	r.parts++
	if int(p.State) < stateSlots {
		r.counts[p.State]++
	}
	if p.SourceHWM >= 0 && p.DestLogEnd >= 0 {
		r.lag += p.Lag
		r.lagKnown++
	}
	r.lagTime = max(r.lagTime, p.LagTime)
	r.bytes += p.BytesPerSec
	r.records += p.RecordsPerSec
}

// topicRows aggregates a snapshot per topic. Partitions come sorted by
// topic within a mirror, so a topic is a run and no map is needed.
func topicRows(snap *engine.Snapshot, etas *ETAs, into []topicRow) []topicRow {
	into = into[:0]
	for i := range snap.Mirrors {
		m := &snap.Mirrors[i]
		start := len(into)
		for j := range m.Partitions {
			p := &m.Partitions[j]
			if n := len(into); n == start || into[n-1].topic != p.Topic {
				into = append(into, topicRow{mirror: m.Name, topic: p.Topic})
			}
			into[len(into)-1].add(p)
		}
		for k := start; k < len(into); k++ {
			into[k].eta = etas.Topic(m.Name, into[k].topic)
		}
	}
	return into
}

// Topics is one row per (mirror, topic): what an operator reads first when
// a mirror has thousands of partitions. Rows are aggregated, filtered and
// sorted once per snapshot; a frame renders only the visible window.
type Topics struct {
	skin *Skin
	km   keymap.KeyMap

	// rows point into all
	list[*topicRow, TopicKey]

	snap       engine.Snapshot
	etas       *ETAs
	mirrorW    int
	all        []topicRow
	partitions int // in the snapshot
	sortKey    TopicSortKey
}

// NewTopics returns an empty topics view.
func NewTopics(skin *Skin, km keymap.KeyMap) *Topics {
	v := &Topics{skin: skin, km: km}
	v.list = newList((*topicRow).key, v.rebuild)
	return v
}

// SetSize implements Component.
func (v *Topics) SetSize(width, height int) {
	v.width, v.height = width, height
	v.cols = topicColumns(width, v.mirrorW)
	v.clampScroll()
}

// SetETAs hands over the catch-up estimates of the next snapshot.
func (v *Topics) SetETAs(e *ETAs) { v.etas = e }

// SetSnapshot aggregates snap per topic and rebuilds the row index,
// keeping the cursor on the same topic.
func (v *Topics) SetSnapshot(snap engine.Snapshot) {
	v.snap = snap
	if w := mirrorColumnWidth(&snap); w != v.mirrorW {
		v.mirrorW = w
		v.cols = topicColumns(v.width, v.mirrorW)
	}
	v.partitions = 0
	for i := range snap.Mirrors {
		v.partitions += len(snap.Mirrors[i].Partitions)
	}
	v.all = topicRows(&v.snap, v.etas, v.all)
	v.rebuild()
}

// Help implements Component.
func (v *Topics) Help() []keymap.Entry { return v.km.ForScope(keymap.ScopeTopics) }

// Capturing implements Component.
func (v *Topics) Capturing() bool { return v.filter.Editing() }

// Selected returns the topic under the cursor.
func (v *Topics) Selected() (TopicKey, bool) { return v.selected() }

func (v *Topics) rebuild() {
	v.rows = v.rows[:0]
	for i := range v.all {
		if v.topicMatches(v.all[i].topic) {
			v.rows = append(v.rows, &v.all[i])
		}
	}
	v.sortRows()
	v.restoreCursor()
}

func topicByName(a, b *topicRow) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.mirror, b.mirror))
}

// sortRows orders the rows; every order but the name puts the worst first.
func (v *Topics) sortRows() {
	var by func(a, b *topicRow) int
	switch v.sortKey {
	case TopicByName:
		by = func(*topicRow, *topicRow) int { return 0 }
	case TopicByLag:
		by = func(a, b *topicRow) int { return cmp.Compare(b.lag, a.lag) }
	case TopicByLagTime:
		by = func(a, b *topicRow) int { return cmp.Compare(b.lagTime, a.lagTime) }
	case TopicByETA:
		by = func(a, b *topicRow) int { return compareETA(b.eta, a.eta) }
	case TopicByFailed:
		by = func(a, b *topicRow) int {
			return cmp.Compare(b.counts[partition.Failed], a.counts[partition.Failed])
		}
	}
	slices.SortFunc(v.rows, func(a, b *topicRow) int { return cmp.Or(by(a, b), topicByName(a, b)) })
}

// Update implements Component.
func (v *Topics) Update(msg tea.Msg) tea.Cmd {
	a, ok := v.update(msg, v.km, keymap.ScopeTopics)
	if !ok {
		return nil
	}
	switch a {
	case keymap.TopicSort:
		v.sortKey = v.sortKey.next()
		v.sortRows()
		v.restoreCursor()
	case keymap.Detail:
		if k, ok := v.Selected(); ok {
			return emit(ShowTopicMsg(k))
		}
	case keymap.Back:
		if v.filter.Clear() {
			v.refilter()
		}
	case keymap.Pause, keymap.Resume, keymap.Recover, keymap.Rebuild, keymap.Stop:
		if k, ok := v.Selected(); ok {
			return emit(ActionMsg{Action: a, Targets: targetsFor(&v.snap, map[string]map[string]bool{k.Mirror: {k.Topic: true}})})
		}
	case keymap.StopMirror:
		if k, ok := v.Selected(); ok {
			return emit(ActionMsg{Action: a, Targets: []Target{wholeMirror(&v.snap, k.Mirror)}})
		}
	default:
	}
	return nil
}

// FilterText returns the active topic filter.
func (v *Topics) FilterText() string { return v.filter.Text() }
