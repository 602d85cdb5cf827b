package views

import (
	"testing"

	"github.com/charmbracelet/colorprofile"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/themes"
)

// palettes returns every palette the console can run with: each theme on
// each colour profile, plus NO_COLOR.
func palettes() map[string]themes.Palette {
	out := map[string]themes.Palette{"no-color": themes.NoColor()}
	for _, n := range themes.Names {
		for _, p := range []colorprofile.Profile{colorprofile.TrueColor, colorprofile.ANSI256, colorprofile.ANSI} {
			out[n.String()+"/"+p.String()] = themes.NewPalette(n, p)
		}
	}
	return out
}

func TestEveryStateHasADistinctStyleAndLabelInEveryTheme(t *testing.T) {
	for name, pal := range palettes() {
		styles := map[string]partition.State{}
		labels := map[string]partition.State{}
		for _, st := range partition.States {
			// The same text in two styles renders the same only if the
			// styles are the same.
			r := StateStyle(pal, st).Render("X")
			if prev, dup := styles[r]; dup {
				t.Errorf("%s: %s and %s render alike: %q", name, prev, st, r)
			}
			styles[r] = st
			l := StateLabel(st)
			if l == "" || l != st.String() {
				t.Errorf("%s: label of %d is %q, want %q", name, st, l, st.String())
			}
			if prev, dup := labels[l]; dup {
				t.Errorf("label %q used by %s and %s", l, prev, st)
			}
			labels[l] = st
		}
	}
}

// Without colour, attributes alone must tell states apart, and the problem
// states must stand out (FAILED is reverse video, the loudest attribute).
func TestStatesWithoutColourUseAttributes(t *testing.T) {
	p := themes.NoColor()
	if got := StateStyle(p, partition.Failed); !got.GetReverse() || !got.GetBold() {
		t.Errorf("FAILED without colour: reverse=%v bold=%v, want both", got.GetReverse(), got.GetBold())
	}
	for _, st := range partition.States {
		s := StateStyle(p, st)
		if r := s.Render("X"); st != partition.Mirroring && r == "X" {
			t.Errorf("%s has no attribute without colour", st)
		}
	}
}

func TestSkinCachesEveryState(t *testing.T) {
	skin := NewSkin(themes.NewPalette(themes.Dark, colorprofile.TrueColor))
	for _, st := range partition.States {
		if got, want := skin.State(st).Render("X"), StateStyle(skin.Palette, st).Render("X"); got != want {
			t.Errorf("%s: skin %q, mapping %q", st, got, want)
		}
	}
}

func TestStateRankIsATotalOrder(t *testing.T) {
	seen := map[int]partition.State{}
	for _, st := range partition.States {
		r := stateRank(st)
		if prev, dup := seen[r]; dup {
			t.Errorf("%s and %s share rank %d", prev, st, r)
		}
		seen[r] = st
	}
	if stateRank(partition.Failed) != 0 {
		t.Error("FAILED must sort first")
	}
}
