package views

import (
	"charm.land/lipgloss/v2"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/themes"
)

// StateStyle is the state → style mapping. Every state gets a colour from the
// palette AND its own combination of attributes, so two states stay distinct
// on a 16-colour terminal that maps their colours to the same slot, and with
// NO_COLOR. The pattern: transitional states (…ING, alignment, fencing) are
// italic; problem states are bold; FAILED is reverse video so it is the
// loudest thing on screen.
func StateStyle(p themes.Palette, s partition.State) lipgloss.Style {
	st := lipgloss.NewStyle()
	switch s {
	case partition.Unknown:
		return st.Foreground(p.Subtle).Underline(true)
	case partition.LogAlignment:
		return st.Foreground(p.Accent).Italic(true)
	case partition.EpochFencing:
		return st.Foreground(p.Accent).Italic(true).Underline(true)
	case partition.Mirroring:
		return st.Foreground(p.OK)
	case partition.Pausing:
		return st.Foreground(p.Paused).Italic(true).Faint(true)
	case partition.Paused:
		return st.Foreground(p.Paused).Faint(true)
	case partition.Stopping:
		return st.Foreground(p.Warn).Italic(true).Bold(true)
	case partition.Stopped:
		return st.Foreground(p.Warn).Bold(true)
	case partition.Failed:
		return st.Foreground(p.Err).Bold(true).Reverse(true)
	case partition.ULERecovery:
		return st.Foreground(p.Danger).Bold(true).Underline(true)
	}
	return st.Foreground(p.Subtle).Underline(true)
}

// StateLabel is the text shown for a state: the name --describe prints, so an
// operator can grep the console and the CLI for the same word.
func StateLabel(s partition.State) string { return s.String() }

// stateRank orders states by how urgently an operator must look at them, for
// the "state" sort: failures first, healthy mirroring last.
func stateRank(s partition.State) int {
	switch s {
	case partition.Failed:
		return 0
	case partition.ULERecovery:
		return 1
	case partition.Unknown:
		return 2
	case partition.Stopping:
		return 3
	case partition.Pausing:
		return 4
	case partition.LogAlignment:
		return 5
	case partition.EpochFencing:
		return 6
	case partition.Stopped:
		return 7
	case partition.Paused:
		return 8
	case partition.Mirroring:
		return 9
	}
	return 2
}
