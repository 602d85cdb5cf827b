package views

import (
	"slices"

	"github.com/kmirror/kmirror/engine/partition"
)

// colID names a partitions-table column.
type colID int8

const (
	colMirror colID = iota
	colTopic
	colPartition
	colState
	colSrcOffset
	colDstOffset
	colLag
	colLagTime
	colEpoch
	colLME
	colRate
	colETA
	colParts  // topics view: partitions of the topic
	colStates // topics view: compact state counts
)

// String returns the column title.
func (c colID) String() string {
	switch c {
	case colMirror:
		return "MIRROR"
	case colTopic:
		return "TOPIC"
	case colPartition:
		return "P"
	case colState:
		return "STATE"
	case colSrcOffset:
		return "SRC-OFFSET"
	case colDstOffset:
		return "DST-OFFSET"
	case colLag:
		return "LAG"
	case colLagTime:
		return "LAG-TIME"
	case colEpoch:
		return "EPOCH"
	case colLME:
		return "LME"
	case colRate:
		return "RATE"
	case colETA:
		return "ETA"
	case colParts:
		return "PARTS"
	case colStates:
		return "STATES"
	}
	return "?"
}

type column struct {
	id    colID
	width int
	right bool
}

const (
	gutterWidth   = 2 // cursor mark and row mark
	minTopicWidth = 14
	maxMirrorCol  = 12
)

// partitionColumns decides which columns fit in width. The columns an
// operator needs to judge a failover (topic, partition, state, both offsets,
// lag, lag time) always show; epoch, rate and LME join as the terminal gets
// wider, in that order, while the topic keeps at least minTopicWidth cells.
// Epoch comes first: it is five cells and it is what tells a diverged
// partition (an unclean leader election on the source) at a glance, so it
// stays at 120 columns with the drill panel beside the table.
// The topic column takes whatever is left.
// mirrorW is the MIRROR column width (0 for none): the longest mirror name,
// capped.
func partitionColumns(width, mirrorW int) []column {
	hasEpoch := func(cols []column) bool {
		return slices.ContainsFunc(cols, func(c column) bool { return c.id == colEpoch })
	}
	cols := partitionColumnsWith(width, mirrorW, 13, minTopicWidth)
	if hasEpoch(cols) {
		return cols
	}
	// Several mirrors at 80 columns: the epochs stay (the design asks
	// for them live per partition), the state names shorten (shortState),
	// the topic gives two cells and a long mirror name what else is needed.
	for mw := mirrorW; ; mw-- {
		if narrow := partitionColumnsWith(width, mw, shortStateWidth, minTopicWidth-2); hasEpoch(narrow) {
			return narrow
		}
		if mw <= len("MIRROR") {
			return cols
		}
	}
}

// partitionColumnsWith is partitionColumns with the state column stateW
// cells wide and the topic kept at topicMin cells at least.
func partitionColumnsWith(width, mirrorW, stateW, topicMin int) []column {
	fixed := []column{
		{colPartition, 3, true},
		{colState, stateW, false},
		{colSrcOffset, 10, true},
		{colDstOffset, 10, true},
		{colLag, 7, true},
		{colLagTime, 8, true},
	}
	// ETA joins last: it is derived from the lag beside it, and the
	// topics view shows it at every width.
	optional := []column{{colEpoch, 5, true}, {colRate, 10, true}, {colLME, 14, true}, {colETA, 8, true}}

	used := gutterWidth
	for _, c := range fixed {
		used += 1 + c.width
	}
	if mirrorW > 0 {
		// Long mirror names give way before the failover columns do.
		mirrorW = max(min(mirrorW, width-used-topicMin-1), len("MIRROR"))
		used += mirrorW + 1
	}
	chosen := map[colID]column{}
	for _, c := range fixed {
		chosen[c.id] = c
	}
	for _, c := range optional {
		if width-(used+1+c.width) < topicMin {
			break
		}
		used += 1 + c.width
		chosen[c.id] = c
	}
	topic := width - used
	if topic < topicMin {
		topic = topicMin
	}
	chosen[colTopic] = column{colTopic, topic, false}
	if mirrorW > 0 {
		chosen[colMirror] = column{colMirror, mirrorW, false}
	}
	return inOrder(chosen, partitionOrder)
}

// partitionOrder is the partitions table's left-to-right order: the ETA
// sits by the lag it is computed from.
var partitionOrder = []colID{colMirror, colTopic, colPartition, colState, colSrcOffset, colDstOffset, colLag, colLagTime, colETA, colEpoch, colLME, colRate}

func inOrder(chosen map[colID]column, order []colID) []column {
	var out []column
	for _, id := range order {
		if c, ok := chosen[id]; ok {
			out = append(out, c)
		}
	}
	return out
}

// topicColumns lays out the topics view. Every column but RATE always
// shows: one topic row is what an operator judges a failover by at 10,000
// partitions, so its lag, lag time and ETA never give way. RATE joins when
// the topic keeps minTopicWidth; past 120 columns the state counts get room
// for five states without truncation. The topic takes what is left.
func topicColumns(width, mirrorW int) []column {
	states := 16
	if width >= 120 {
		states = 26
	}
	fixed := []column{
		{colParts, 5, true},
		{colStates, states, false},
		{colLag, 7, true},
		{colLagTime, 8, true},
		{colETA, 8, true},
	}
	used := gutterWidth
	for _, c := range fixed {
		used += 1 + c.width
	}
	chosen := map[colID]column{}
	for _, c := range fixed {
		chosen[c.id] = c
	}
	if mirrorW > 0 {
		mirrorW = max(min(mirrorW, width-used-minTopicWidth-1), len("MIRROR"))
		used += mirrorW + 1
		chosen[colMirror] = column{colMirror, mirrorW, false}
	}
	if rate := (column{colRate, 10, true}); width-(used+1+rate.width) >= minTopicWidth {
		used += 1 + rate.width
		chosen[colRate] = rate
	}
	chosen[colTopic] = column{colTopic, max(width-used, minTopicWidth), false}
	return inOrder(chosen, topicOrder)
}

var topicOrder = []colID{colMirror, colTopic, colParts, colStates, colLag, colLagTime, colETA, colRate}

// shortStateWidth is the state column's width with shortState's names.
const shortStateWidth = 9

// shortState is a state's name in at most shortStateWidth cells, for a
// table that would otherwise drop the epochs: the long names of transient
// states are cut to what still reads as them.
func shortState(st partition.State) string {
	switch st {
	case partition.LogAlignment:
		return "LOG_ALIGN"
	case partition.EpochFencing:
		return "FENCING"
	case partition.ULERecovery:
		return "ULE_RECOV"
	case partition.Unknown, partition.Mirroring, partition.Pausing, partition.Paused,
		partition.Stopping, partition.Stopped, partition.Failed:
	}
	return StateLabel(st)
}

// stateText is a state's name as a state column of width cells shows it.
func stateText(st partition.State, width int) string {
	if width < len(StateLabel(st)) {
		return shortState(st)
	}
	return StateLabel(st)
}
