package themes

import (
	"image/color"
	"regexp"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

func fields(p Palette) map[string]color.Color {
	return map[string]color.Color{
		"Fg": p.Fg, "Subtle": p.Subtle, "Accent": p.Accent, "OK": p.OK, "Warn": p.Warn, "Err": p.Err,
		"Paused": p.Paused, "Danger": p.Danger, "Source": p.Source, "Destination": p.Destination,
	}
}

func TestParseName(t *testing.T) {
	for _, n := range Names {
		got, err := ParseName(n.String())
		if err != nil || got != n {
			t.Errorf("ParseName(%q) = %v, %v", n, got, err)
		}
	}
	if _, err := ParseName("solarized"); err == nil {
		t.Error("unknown theme accepted")
	}
}

func TestEveryThemeHasEveryColourOnEveryColourTerminal(t *testing.T) {
	for _, n := range Names {
		for _, prof := range []colorprofile.Profile{colorprofile.TrueColor, colorprofile.ANSI256, colorprofile.ANSI} {
			p := NewPalette(n, prof)
			if p.Colorless {
				t.Errorf("%s/%s: colourless", n, prof)
			}
			for name, c := range fields(p) {
				if _, none := c.(lipgloss.NoColor); none || c == nil {
					t.Errorf("%s/%s: %s has no colour", n, prof, name)
				}
			}
			// The two clusters must never look alike: an operator reads
			// "which side is this" from the colour.
			if p.Source == p.Destination {
				t.Errorf("%s/%s: source and destination share a colour", n, prof)
			}
		}
	}
}

// Each profile gets the colour written for it, not an automatic
// approximation.
func TestFallbacksAreHandPicked(t *testing.T) {
	p := NewPalette(Dark, colorprofile.ANSI256)
	if _, ok := p.Err.(lipgloss.ANSIColor); !ok {
		t.Errorf("256-colour Err is %T, want an ANSI256 index", p.Err)
	}
	p = NewPalette(Dark, colorprofile.ANSI)
	if got := lipgloss.NewStyle().Foreground(p.Err).Render("x"); got != "\x1b[91mx\x1b[m" {
		t.Errorf("16-colour Err renders %q", got)
	}
}

func TestNoColorMeansNoColourAtAll(t *testing.T) {
	sgrColour := regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7]|10[0-7])[;m]`)
	for _, p := range []Palette{NoColor(), NewPalette(Dark, colorprofile.ASCII), NewPalette(Light, colorprofile.NoTTY)} {
		if !p.Colorless {
			t.Fatal("palette for a colourless terminal has colours")
		}
		s := NewStyles(p)
		for name, st := range map[string]lipgloss.Style{
			"Text": s.Text, "Title": s.Title, "Source": s.Source, "Destination": s.Destination, "Err": s.Err,
			"Selected": s.Selected, "TabActive": s.TabActive, "Badge": s.Badge, "Dialog": s.Dialog, "Overlay": s.Overlay,
		} {
			if out := st.Render("text"); sgrColour.MatchString(out) {
				t.Errorf("%s renders a colour without colour: %q", name, out)
			}
		}
	}
}

// Without colour the cursor row and the active tab must still stand out.
func TestSelectionIsVisibleWithoutColour(t *testing.T) {
	s := NewStyles(NoColor())
	if !s.Selected.GetReverse() || !s.TabActive.GetReverse() || !s.Badge.GetReverse() {
		t.Error("selection, active tab and badge must use reverse video")
	}
}

func TestNameString(t *testing.T) {
	if Dark.String() != "dark" || Light.String() != "light" || HighContrast.String() != "high-contrast" || Name(42).String() != "unknown" {
		t.Error("theme names changed")
	}
}
