package tui

import (
	"fmt"

	"github.com/kmirror/kmirror/views"
)

// Minimum terminal size: the partitions table needs 80 columns for its
// failover columns, and 24 lines leave 16 table rows under the header.
const (
	MinWidth  = 80
	MinHeight = 24
)

// Body rows the drill panel below must leave: enough for a table's info
// line, header and a few rows; fewer only when the operator asked with d.
const (
	minBodyBesideDrill = 8
	minBodyForced      = 4
)

// Overlay is what is drawn over the screen.
type Overlay int8

const (
	OverlayNone Overlay = iota
	OverlayHelp
	OverlayConfirm
	OverlayCost // the drill's numbers explained
)

// String names the overlay.
func (o Overlay) String() string {
	switch o {
	case OverlayNone:
		return "none"
	case OverlayHelp:
		return "help"
	case OverlayConfirm:
		return "confirm"
	case OverlayCost:
		return "cost"
	}
	return "unknown"
}

// Rect is a cell rectangle.
type Rect struct{ X, Y, W, H int }

// LayoutState is everything besides the terminal size that changes the
// layout.
type LayoutState struct {
	// HeaderH is the header's height (views.MinHeaderHeight when zero); it
	// grows by a line when the state counts do not fit on one.
	HeaderH int
	Overlay Overlay
	// OverlayW and OverlayH are the size the overlay's content asks for,
	// border included; the layout shrinks it to fit.
	OverlayW, OverlayH int
	// DrillW is the drill panel's width beside the body, DrillH its height
	// below it; both zero without a drill.
	DrillW, DrillH int
	// DrillStrip asks for the one-line strip instead of the panel (the
	// operator hid it); DrillForce keeps the panel below even when it leaves
	// the body fewer than the usual rows (the operator asked for it).
	DrillStrip, DrillForce bool
}

// Layout places every section. It is a pure function of its inputs so it
// can be tested without a terminal.
type Layout struct {
	TooSmall bool
	Message  string // the too-small message
	Header   Rect
	Tabs     Rect
	Body     Rect
	Status   Rect
	Overlay  Rect // zero when there is no overlay
	Drill    Rect // zero without a drill panel
	// DrillStrip is the one-line drill strip under the body, shown when a
	// drill runs but its panel is hidden or does not fit.
	DrillStrip Rect
}

// ComputeLayout lays out a width×height terminal.
func ComputeLayout(width, height int, st LayoutState) Layout {
	if width < MinWidth || height < MinHeight {
		return Layout{
			TooSmall: true,
			Message:  fmt.Sprintf("terminal too small (need %d×%d, have %d×%d)", MinWidth, MinHeight, width, height),
		}
	}
	hh := st.HeaderH
	if hh <= 0 {
		hh = views.MinHeaderHeight
	}
	l := Layout{
		Header: Rect{0, 0, width, hh},
		Tabs:   Rect{0, hh, width, 1},
		Body:   Rect{0, hh + 1, width, height - hh - 2},
		Status: Rect{0, height - 1, width, 1},
	}
	switch {
	case st.DrillW > 0 && width-st.DrillW-1 >= MinWidth:
		// One column separates the panel from the body.
		l.Body.W = width - st.DrillW - 1
		l.Drill = Rect{width - st.DrillW, l.Body.Y, st.DrillW, l.Body.H}
	case st.DrillH > 0 && (l.Body.H-st.DrillH >= minBodyBesideDrill || st.DrillForce && l.Body.H-st.DrillH >= minBodyForced):
		l.Body.H -= st.DrillH
		l.Drill = Rect{0, l.Body.Y + l.Body.H, width, st.DrillH}
	case st.DrillW > 0 || st.DrillH > 0 || st.DrillStrip:
		// The panel does not fit (80×24) or is hidden: a drill must never
		// vanish without a hint, so one line says where it stands.
		l.Body.H--
		l.DrillStrip = Rect{0, l.Body.Y + l.Body.H, width, 1}
	}
	if st.Overlay != OverlayNone {
		// The overlay may cover everything but the status line, which keeps
		// showing what the console is doing; two columns stay visible at each
		// side so it reads as a box over the screen.
		w := min(max(st.OverlayW, 20), width-4)
		h := min(max(st.OverlayH, 5), height-1)
		l.Overlay = Rect{(width - w) / 2, (height - 1 - h) / 2, w, h}
	}
	return l
}
