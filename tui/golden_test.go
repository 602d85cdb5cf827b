package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/golden"
)

// Golden files live in testdata/TestGolden*/…; regenerate them with
//
//	go test ./tui -run Golden -update
//
// and review the diff like code. Every screen is rendered from the fixed
// fixture snapshot with a fixed clock, so nothing depends on when or where
// the test runs.

// goldenScreens are the screens, each reached the way an operator would.
var goldenScreens = []struct {
	name string
	keys []string
}{
	{"partitions", nil},
	{"mirrors", []string{"1"}},
	{"detail", []string{"j", "j", "j", "j", "j", "j", "j", "j", "enter"}}, // orders/3, FAILED
	{"events", []string{"tab"}},
	{"groups", []string{"tab", "tab"}},
	{"help", []string{"?"}},
	{"confirm-stop", []string{"space", "j", "j", "j", "j", "j", "j", "j", "s"}}, // marked audit-log/0 + cursor orders/3
	{"confirm-stop-mirror", []string{"S", "a", "-", "t", "o"}},
	{"filter-invalid", []string{"/", "o", "r", "d", "("}},
}

func TestGolden(t *testing.T) {
	for _, sc := range goldenScreens {
		for _, size := range [][2]int{{80, 24}, {160, 48}} {
			for _, theme := range []string{"dark", "light"} {
				name := fmt.Sprintf("%s/%dx%d/%s", sc.name, size[0], size[1], theme)
				t.Run(name, func(t *testing.T) {
					m, _ := fixture(t, size[0], size[1], Options{Theme: theme})
					press(t, m, sc.keys...)
					golden.RequireEqual(t, screen(t, m, colorprofile.ASCII))
				})
			}
		}
	}
}

// TestGoldenReadOnly pins what a read-only operator sees: no action keys in
// the hints or the help, and the READ-ONLY badge.
func TestGoldenReadOnly(t *testing.T) {
	for _, sc := range []struct {
		name string
		keys []string
	}{{"partitions", nil}, {"help", []string{"?"}}} {
		t.Run(sc.name, func(t *testing.T) {
			m, _ := fixture(t, 80, 24, Options{ReadOnly: true})
			press(t, m, sc.keys...)
			golden.RequireEqual(t, screen(t, m, colorprofile.ASCII))
		})
	}
}

// TestGoldenColour pins the colours each theme really emits on a 256-colour
// terminal (the ASCII goldens above cannot show them), and that NO_COLOR
// emits none.
func TestGoldenColour(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"dark", Options{Theme: "dark"}},
		{"light", Options{Theme: "light"}},
		{"high-contrast", Options{Theme: "high-contrast"}},
		{"no-color", Options{Theme: "dark", NoColor: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := fixture(t, 80, 24, tc.opts)
			m.Update(tea.ColorProfileMsg{Profile: colorprofile.ANSI256})
			out := screen(t, m, colorprofile.ANSI256)
			golden.RequireEqual(t, out)
			colour := regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7]|10[0-7])(;[0-9;]*)?m`)
			if tc.opts.NoColor && colour.MatchString(out) {
				t.Errorf("NO_COLOR output has a colour sequence: %q", colour.FindString(out))
			}
			if !tc.opts.NoColor && !colour.MatchString(out) {
				t.Errorf("%s output has no colour at all", tc.name)
			}
		})
	}
}

// TestGoldenTooSmall checks the message replaces the whole screen.
func TestGoldenTooSmall(t *testing.T) {
	m, _ := fixture(t, 60, 20, Options{})
	out := screen(t, m, colorprofile.NoTTY)
	if !strings.Contains(out, "terminal too small (need 80×24, have 60×20)") {
		t.Fatalf("no size message:\n%s", out)
	}
	if strings.Contains(out, "MIRRORING") {
		t.Fatalf("the table is drawn under the size message:\n%s", out)
	}
	golden.RequireEqual(t, out)
}
