package tui

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/views"
)

func TestLayoutAt80x24(t *testing.T) {
	l := ComputeLayout(80, 24, LayoutState{})
	want := Layout{
		Header: Rect{0, 0, 80, views.MinHeaderHeight},
		Tabs:   Rect{0, 4, 80, 1},
		Body:   Rect{0, 5, 80, 18},
		Status: Rect{0, 23, 80, 1},
	}
	if l != want {
		t.Fatalf("got %+v\nwant %+v", l, want)
	}
}

func TestLayoutTallHeaderShrinksTheBody(t *testing.T) {
	l := ComputeLayout(80, 24, LayoutState{HeaderH: 5})
	if l.Header.H != 5 || l.Tabs.Y != 5 || l.Body.Y != 6 || l.Body.H != 17 || l.Status.Y != 23 {
		t.Fatalf("got %+v", l)
	}
}

func TestLayoutTooSmall(t *testing.T) {
	for _, sz := range [][2]int{{79, 24}, {80, 23}, {0, 0}, {200, 10}} {
		l := ComputeLayout(sz[0], sz[1], LayoutState{Overlay: OverlayHelp, OverlayW: 50, OverlayH: 10})
		want := fmt.Sprintf("terminal too small (need 80×24, have %d×%d)", sz[0], sz[1])
		if !l.TooSmall || l.Message != want {
			t.Errorf("%v: TooSmall=%v message %q, want %q", sz, l.TooSmall, l.Message, want)
		}
		if l.Body != (Rect{}) || l.Overlay != (Rect{}) {
			t.Errorf("%v: sections laid out on a too-small terminal: %+v", sz, l)
		}
	}
}

// Whatever the size, the sections tile the screen from top to bottom with
// no gap or overlap, and an overlay stays inside the screen and off the
// status line.
func TestLayoutInvariants(t *testing.T) {
	for w := 80; w <= 300; w += 37 {
		for h := 24; h <= 120; h += 13 {
			for _, hh := range []int{0, 4, 5} {
				for _, ov := range []LayoutState{{}, {Overlay: OverlayHelp, OverlayW: 96, OverlayH: 30}, {Overlay: OverlayConfirm, OverlayW: 400, OverlayH: 400}} {
					ov.HeaderH = hh
					l := ComputeLayout(w, h, ov)
					if l.TooSmall {
						t.Fatalf("%dx%d reported too small", w, h)
					}
					y := 0
					for _, r := range []Rect{l.Header, l.Tabs, l.Body, l.Status} {
						if r.X != 0 || r.W != w || r.Y != y || r.H < 1 {
							t.Fatalf("%dx%d %+v: section %+v does not follow at y=%d", w, h, ov, r, y)
						}
						y += r.H
					}
					if y != h {
						t.Fatalf("%dx%d: sections cover %d lines", w, h, y)
					}
					if ov.Overlay == OverlayNone {
						if l.Overlay != (Rect{}) {
							t.Fatalf("overlay without one: %+v", l.Overlay)
						}
						continue
					}
					o := l.Overlay
					if o.X < 2 || o.X+o.W > w-2 || o.Y < 0 || o.Y+o.H > h-1 {
						t.Fatalf("%dx%d: overlay %+v leaves the screen or covers the status line", w, h, o)
					}
					if o.W > ov.OverlayW || o.H > ov.OverlayH {
						t.Fatalf("overlay %+v larger than asked %dx%d", o, ov.OverlayW, ov.OverlayH)
					}
				}
			}
		}
	}
}

func TestLayoutCentresTheOverlay(t *testing.T) {
	l := ComputeLayout(160, 48, LayoutState{Overlay: OverlayConfirm, OverlayW: 76, OverlayH: 15})
	if want := (Rect{42, 16, 76, 15}); l.Overlay != want {
		t.Fatalf("overlay %+v, want %+v", l.Overlay, want)
	}
}

func TestOverlayString(t *testing.T) {
	for o, want := range map[Overlay]string{OverlayNone: "none", OverlayHelp: "help", OverlayConfirm: "confirm"} {
		if o.String() != want {
			t.Errorf("%d: %q", o, o.String())
		}
	}
}
