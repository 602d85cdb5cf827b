// Package themes holds the console's colour palettes and turns a palette into
// the Styles value the views render with. Nothing here is a package-level
// style: callers build a Palette for the terminal they run on and pass the
// resulting Styles down.
package themes

import (
	"fmt"
	"image/color"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

// Name identifies a built-in theme.
type Name int8

const (
	Dark Name = iota
	Light
	HighContrast
)

// Names lists every theme in the order the help screen shows them.
var Names = []Name{Dark, Light, HighContrast}

// String returns the name accepted by --theme.
func (n Name) String() string {
	switch n {
	case Dark:
		return "dark"
	case Light:
		return "light"
	case HighContrast:
		return "high-contrast"
	}
	return "unknown"
}

// ParseName is the inverse of String.
func ParseName(s string) (Name, error) {
	for _, n := range Names {
		if n.String() == s {
			return n, nil
		}
	}
	return Dark, fmt.Errorf("unknown theme %q (want dark, light or high-contrast)", s)
}

// Palette is the semantic colour set every style is derived from. Views never
// name a concrete colour; they ask for "the source cluster colour" or "the
// error colour", so a theme can change all of them at once.
type Palette struct {
	Fg          color.Color // ordinary text
	Subtle      color.Color // secondary text, separators, unknown values
	Accent      color.Color // titles, keys, the active tab
	OK          color.Color // healthy: mirroring
	Warn        color.Color // needs attention soon: stopping/stopped, lag
	Err         color.Color // failed
	Paused      color.Color // deliberately idle
	Danger      color.Color // destructive actions and their dialogs
	Source      color.Color // the source cluster, wherever it is named
	Destination color.Color // the destination cluster, wherever it is named
	// Colorless is true for the NO_COLOR palette: every colour above is
	// lipgloss.NoColor and styles must carry meaning with attributes only.
	Colorless bool
}

// tone is one semantic colour given three times, so a 16- or 256-colour
// terminal gets a hand-picked colour instead of the nearest automatic match
// (automatic matching can collapse e.g. "paused" and "subtle" into one grey).
type tone struct {
	ansi, ansi256, truecolor string
}

type toneSet struct {
	fg, subtle, accent, ok, warn, err, paused, danger, source, destination tone
}

func tones(n Name) toneSet {
	switch n {
	case Dark:
		return toneSet{
			fg:          tone{"7", "252", "#D0D0D0"},
			subtle:      tone{"8", "244", "#808080"},
			accent:      tone{"12", "75", "#5FAFFF"},
			ok:          tone{"10", "77", "#5FD75F"},
			warn:        tone{"11", "220", "#FFD700"},
			err:         tone{"9", "203", "#FF5F5F"},
			paused:      tone{"13", "141", "#AF87FF"},
			danger:      tone{"1", "197", "#FF005F"},
			source:      tone{"14", "44", "#00D7D7"},
			destination: tone{"3", "208", "#FF8700"},
		}
	case Light:
		return toneSet{
			fg:          tone{"0", "235", "#262626"},
			subtle:      tone{"8", "242", "#6C6C6C"},
			accent:      tone{"4", "26", "#005FD7"},
			ok:          tone{"2", "28", "#008700"},
			warn:        tone{"3", "130", "#AF5F00"},
			err:         tone{"1", "160", "#D70000"},
			paused:      tone{"5", "91", "#8700AF"},
			danger:      tone{"1", "124", "#AF0000"},
			source:      tone{"6", "30", "#008787"},
			destination: tone{"5", "166", "#D75F00"},
		}
	case HighContrast:
		return toneSet{
			fg:          tone{"15", "231", "#FFFFFF"},
			subtle:      tone{"7", "250", "#BCBCBC"},
			accent:      tone{"14", "51", "#00FFFF"},
			ok:          tone{"10", "46", "#00FF00"},
			warn:        tone{"11", "226", "#FFFF00"},
			err:         tone{"9", "196", "#FF0000"},
			paused:      tone{"13", "201", "#FF00FF"},
			danger:      tone{"9", "196", "#FF0000"},
			source:      tone{"12", "39", "#00AFFF"},
			destination: tone{"11", "214", "#FFAF00"},
		}
	}
	return tones(Dark)
}

// NewPalette resolves theme n for a terminal with the given colour profile.
// ASCII and NoTTY profiles (which is what NO_COLOR and dumb terminals give)
// get the colourless palette.
func NewPalette(n Name, profile colorprofile.Profile) Palette {
	if profile == colorprofile.ASCII || profile == colorprofile.NoTTY {
		return NoColor()
	}
	if profile == colorprofile.Unknown {
		profile = colorprofile.TrueColor
	}
	pick := lipgloss.Complete(profile)
	c := func(t tone) color.Color {
		return pick(lipgloss.Color(t.ansi), lipgloss.Color(t.ansi256), lipgloss.Color(t.truecolor))
	}
	t := tones(n)
	return Palette{
		Fg:          c(t.fg),
		Subtle:      c(t.subtle),
		Accent:      c(t.accent),
		OK:          c(t.ok),
		Warn:        c(t.warn),
		Err:         c(t.err),
		Paused:      c(t.paused),
		Danger:      c(t.danger),
		Source:      c(t.source),
		Destination: c(t.destination),
	}
}

// NoColor is the palette for NO_COLOR and colourless terminals: no colour at
// all, so every distinction must come from text and attributes.
func NoColor() Palette {
	none := lipgloss.NoColor{}
	return Palette{
		Fg: none, Subtle: none, Accent: none, OK: none, Warn: none, Err: none,
		Paused: none, Danger: none, Source: none, Destination: none,
		Colorless: true,
	}
}
