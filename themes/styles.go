package themes

import "charm.land/lipgloss/v2"

// Styles is every piece of console chrome, derived from one Palette. The
// per-state partition styles are not here: that mapping belongs to the views
// that show states (STYLE rule 11), built from Palette.
type Styles struct {
	Palette Palette

	Text   lipgloss.Style
	Subtle lipgloss.Style
	Accent lipgloss.Style // values the operator set: the filter, typed input
	Title  lipgloss.Style // the product name and section titles
	Label  lipgloss.Style // "lag", "RPO≈": names next to values

	Source      lipgloss.Style // source cluster names and ids
	Destination lipgloss.Style // destination cluster names and ids

	OK     lipgloss.Style
	Warn   lipgloss.Style
	Err    lipgloss.Style
	Paused lipgloss.Style
	Danger lipgloss.Style

	ColumnHeader lipgloss.Style
	// Selected is the cursor row. Reverse video keeps it visible without
	// colour; the ">" gutter mark repeats it as text.
	Selected lipgloss.Style
	Marked   lipgloss.Style

	TabActive   lipgloss.Style
	TabInactive lipgloss.Style

	StatusInfo  lipgloss.Style
	StatusError lipgloss.Style
	Badge       lipgloss.Style // READ-ONLY and similar mode markers

	Overlay       lipgloss.Style // help box
	Dialog        lipgloss.Style // dangerous confirmation box
	DialogTitle   lipgloss.Style
	HelpKey       lipgloss.Style
	HelpDesc      lipgloss.Style
	HelpDangerKey lipgloss.Style
}

// NewStyles derives the console styles from p.
func NewStyles(p Palette) Styles {
	base := lipgloss.NewStyle().Foreground(p.Fg)
	return Styles{
		Palette: p,

		Text:   base,
		Subtle: lipgloss.NewStyle().Foreground(p.Subtle),
		Accent: lipgloss.NewStyle().Foreground(p.Accent),
		Title:  lipgloss.NewStyle().Foreground(p.Accent).Bold(true),
		Label:  lipgloss.NewStyle().Foreground(p.Subtle),

		Source:      lipgloss.NewStyle().Foreground(p.Source).Bold(true),
		Destination: lipgloss.NewStyle().Foreground(p.Destination).Bold(true),

		OK:     lipgloss.NewStyle().Foreground(p.OK),
		Warn:   lipgloss.NewStyle().Foreground(p.Warn).Bold(true),
		Err:    lipgloss.NewStyle().Foreground(p.Err).Bold(true),
		Paused: lipgloss.NewStyle().Foreground(p.Paused),
		Danger: lipgloss.NewStyle().Foreground(p.Danger).Bold(true),

		ColumnHeader: lipgloss.NewStyle().Foreground(p.Subtle).Bold(true),
		Selected:     lipgloss.NewStyle().Reverse(true).Bold(true),
		Marked:       lipgloss.NewStyle().Foreground(p.Accent).Bold(true),

		TabActive:   lipgloss.NewStyle().Foreground(p.Accent).Bold(true).Reverse(true),
		TabInactive: lipgloss.NewStyle().Foreground(p.Subtle),

		StatusInfo:  lipgloss.NewStyle().Foreground(p.Fg),
		StatusError: lipgloss.NewStyle().Foreground(p.Err).Bold(true),
		Badge:       lipgloss.NewStyle().Foreground(p.Warn).Bold(true).Reverse(true),

		Overlay: lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).
			BorderForeground(p.Accent).Padding(0, 1),
		Dialog: lipgloss.NewStyle().Border(lipgloss.DoubleBorder()).
			BorderForeground(p.Danger).Padding(0, 1),
		DialogTitle:   lipgloss.NewStyle().Foreground(p.Danger).Bold(true).Underline(true),
		HelpKey:       lipgloss.NewStyle().Foreground(p.Accent).Bold(true),
		HelpDesc:      base,
		HelpDangerKey: lipgloss.NewStyle().Foreground(p.Danger).Bold(true).Underline(true),
	}
}

// ASCII returns s with ASCII box borders, for terminals that cannot draw
// the rounded and double box-drawing characters.
func (s Styles) ASCII() Styles {
	s.Overlay = s.Overlay.Border(lipgloss.ASCIIBorder())
	s.Dialog = s.Dialog.Border(lipgloss.ASCIIBorder())
	return s
}
