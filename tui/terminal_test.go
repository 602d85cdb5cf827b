package tui

import (
	"image/color"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/kmirror/kmirror/themes"
)

// TestGoldenASCII pins the console on a terminal whose locale is not UTF-8:
// the help box and the dialog have ASCII borders and no glyph is outside
// ASCII, while the layout stays the one of the UTF-8 screens.
func TestGoldenASCII(t *testing.T) {
	for _, sc := range []struct {
		name string
		keys []string
	}{
		{"partitions", nil},
		{"help", []string{"?"}},
		{"confirm-stop-mirror", []string{"S"}},
		{"detail", []string{"j", "j", "j", "j", "j", "j", "j", "j", "enter"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			m, _ := fixture(t, 80, 24, Options{Theme: "dark", ASCII: true})
			press(t, m, sc.keys...)
			requireASCIIGolden(t, screen(t, m, colorprofile.ASCII))
		})
	}
}

func TestUTF8Locale(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false}, // the C locale
		{map[string]string{"LANG": "en_US.UTF-8"}, true},
		{map[string]string{"LANG": "de_DE.utf8"}, true},
		{map[string]string{"LANG": "en_US.UTF-8", "LC_ALL": "C"}, false},  // LC_ALL wins
		{map[string]string{"LANG": "C", "LC_CTYPE": "en_GB.UTF-8"}, true}, // LC_CTYPE before LANG
		{map[string]string{"LANG": "en_US.ISO-8859-1"}, false},
		{map[string]string{"LC_ALL": "", "LANG": "POSIX"}, false},
	} {
		got := utf8Locale(func(k string) string { return tc.env[k] })
		if got != tc.want {
			t.Errorf("%v: utf8Locale = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestThemeFromBackground checks that without --theme a light terminal
// background picks the light theme (and a dark one dark), that the model
// asks for the colour at start, and that an explicit theme ignores it.
func TestThemeFromBackground(t *testing.T) {
	white := tea.BackgroundColorMsg{Color: color.RGBA{0xfa, 0xfa, 0xfa, 0xff}}
	black := tea.BackgroundColorMsg{Color: color.RGBA{0x10, 0x10, 0x10, 0xff}}

	m, _ := fixture(t, 160, 48, Options{}) // tall enough for help's last line
	if !m.themeAuto || m.theme != themes.Dark {
		t.Fatalf("no --theme: auto=%v theme=%s, want auto with dark until the terminal answers", m.themeAuto, m.theme)
	}
	m.Update(white)
	if m.theme != themes.Light {
		t.Fatalf("light background: theme %s, want light", m.theme)
	}
	if m.skin.Palette != themes.NewPalette(themes.Light, m.profile) {
		t.Error("the skin was not rebuilt for the light theme")
	}
	press(t, m, "?")
	if out := screen(t, m, colorprofile.NoTTY); !strings.Contains(out, "light (terminal background)") {
		t.Errorf("help does not say where the theme came from:\n%s", out)
	}
	m.Update(black)
	if m.theme != themes.Dark {
		t.Fatalf("dark background: theme %s, want dark", m.theme)
	}

	fixed, _ := fixture(t, 80, 24, Options{Theme: "dark"})
	fixed.Update(white)
	if fixed.theme != themes.Dark {
		t.Errorf("--theme dark switched to %s on a light background", fixed.theme)
	}
}
