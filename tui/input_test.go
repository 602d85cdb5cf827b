package tui

import (
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/tui/tuitest"
)

// TestFlowPasteIntoFilter pastes into "/" the way a terminal delivers it
// (one bracketed paste, trailing newline included): the filter applies,
// the newline neither submits nor sticks, and "!re" hides what matches. A
// paste with no prompt open does nothing, never acting as keys.
func TestFlowPasteIntoFilter(t *testing.T) {
	fl := startFlow(t, 100, 30, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))

	fl.tm.Send(tea.PasteMsg{Content: "Sp"}) // S would open the stop dialog, p would pause
	fl.keys("/")
	fl.tm.Send(tea.PasteMsg{Content: "^orders$\n"})
	at := fl.wait("the pasted filter applied while typing", func(s string) bool {
		return strings.Contains(s, "/^orders$") && len(rowsWith(s, "payments")) == 0
	})
	fl.keys("enter")
	at = fl.waitAfter(at, "the filter kept", contains("showing 6 of 20", "filter /^orders$/"))

	fl.keys("/")
	fl.keys("home")
	fl.tm.Send(tea.PasteMsg{Content: "!"})
	fl.keys("enter")
	fl.waitAfter(at, "the exclusion", contains("showing 14 of 20", "filter not /^orders$/"))
	if got := rowsWith(fl.last(), "orders", "MIRRORING"); len(got) != 0 {
		t.Fatalf("!^orders$ still shows orders rows: %q", got)
	}
	fl.neverShown(0, "a paste outside a prompt opened a dialog", "Stop the whole mirror")
	fl.noCommands("a paste")
}

// TestFlowPasteTypedStopConfirmation pastes the mirror name into the
// typed confirmation: with its newline it matches and, on enter, stops the
// mirror; a paste into a y/n dialog does not answer it.
func TestFlowPasteTypedStopConfirmation(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))

	fl.keys("s")
	at := fl.wait("the y/n stop dialog", contains("[y] stop"))
	fl.tm.Send(tea.PasteMsg{Content: "y"})
	fl.keys("esc")
	at = fl.waitAfter(at, "the dialog cancelled", contains("cancelled: nothing was sent"))
	fl.noCommands("a pasted y answering the dialog")

	fl.keys("S")
	at = fl.waitAfter(at, "the typed confirmation", contains("Type a-to-b and press enter"))
	fl.tm.Send(tea.PasteMsg{Content: "a-to-b\r\n"})
	at = fl.waitAfter(at, "the pasted name", contains("> a-to-b"))
	fl.noCommands("the paste submitting the confirmation")
	fl.keys("enter")
	fl.waitAfter(at, "the a-to-b partitions STOPPED", func(s string) bool {
		return statesAre("orders", 6, "STOPPED")(s) && statesAre("payments", 4, "STOPPED")(s)
	})
	want := []engine.Command{{Kind: engine.CmdStop, Mirror: tuitest.MirrorAB}}
	if got := fl.c.Commands(); !commandsEqual(got, want) {
		t.Fatalf("commands = %+v, want %+v", got, want)
	}
}

// lineOf returns the screen line index of the first line matching re.
func lineOf(t *testing.T, screen string, re string) int {
	t.Helper()
	rx := regexp.MustCompile(re)
	for i, l := range strings.Split(screen, "\n") {
		if rx.MatchString(l) {
			return i
		}
	}
	t.Fatalf("no line matches %s:\n%s", re, screen)
	return -1
}

// TestFlowMouseClickSelectsRow clicks a partitions row (the cursor moves
// there, and an action then names that row), scrolls with the wheel and
// clicks a tab.
func TestFlowMouseClickSelectsRow(t *testing.T) {
	fl := startFlow(t, 100, 30, Options{})
	first := fl.wait("the partitions table", contains("showing 20 of 20"))
	_ = first
	y := lineOf(t, fl.last(), `payments\s+2\s`)
	fl.tm.Send(tea.MouseClickMsg{X: 10, Y: y, Button: tea.MouseLeft})
	at := fl.wait("the cursor on payments/2", func(s string) bool {
		return len(rowsWith(s, "> ", "payments", " 2 ")) == 1
	})
	fl.keys("s")
	at = fl.waitAfter(at, "the stop dialog for payments", contains("mirror a-to-b: payments", "[y] stop"))
	fl.keys("esc")
	at = fl.waitAfter(at, "the dialog closed", contains("cancelled: nothing was sent"))

	fl.tm.Send(tea.MouseWheelMsg{X: 10, Y: y, Button: tea.MouseWheelDown})
	at = fl.waitAfter(at, "the wheel moved the cursor three rows", func(s string) bool {
		return len(rowsWith(s, "> ", "shipments")) == 1 || len(rowsWith(s, "> ", "payments", " 5 ")) == 1 ||
			!strings.Contains(s, "> a-to-b payments         2")
	})

	tabs := lineOf(t, fl.last(), `1 mirrors .* 5 groups`)
	x := strings.Index(strings.Split(fl.last(), "\n")[tabs], "4 events")
	fl.tm.Send(tea.MouseClickMsg{X: x, Y: tabs, Button: tea.MouseLeft})
	fl.waitAfter(at, "the events view", contains("TIME UTC", "LEVEL", "WHERE"))
}

// TestFilterEveryList checks "/" filters the mirrors, events and groups
// lists, "!re" inverts it and esc clears it.
func TestFilterEveryList(t *testing.T) {
	for _, tc := range []struct {
		jump, filter   string
		shown, notShow string
	}{
		{"1", "c-to", "c-to-b", "  a-to-b "},
		{"2", "^tele", "telemetry", "payments"},
		{"4", "diverged", "destination diverged", "mirror started"},
		{"4", "!INFO", "destination diverged", "mirror started"},
		{"5", "bill", "billing", "fraud-check"},
	} {
		t.Run(tc.jump+tc.filter, func(t *testing.T) {
			m, _ := fixture(t, 120, 40, Options{})
			press(t, m, tc.jump, "/")
			typeText(t, m, tc.filter)
			press(t, m, "enter")
			out := screen(t, m, colorprofile.NoTTY)
			if !strings.Contains(out, tc.shown) || strings.Contains(out, tc.notShow) {
				t.Fatalf("/%s: want %q shown and %q hidden:\n%s", tc.filter, tc.shown, tc.notShow, out)
			}
			press(t, m, "esc")
			if out := screen(t, m, colorprofile.NoTTY); !strings.Contains(out, tc.notShow) {
				t.Fatalf("esc did not clear /%s:\n%s", tc.filter, out)
			}
		})
	}
}

// TestEscBacksOutEverywhere checks esc closes each thing on top, one per
// press, on every screen.
func TestEscBacksOutEverywhere(t *testing.T) {
	m, _ := fixture(t, 120, 40, Options{})
	press(t, m, "?")
	press(t, m, "esc")
	if m.help {
		t.Fatal("esc left the help open")
	}
	press(t, m, ":")
	press(t, m, "esc")
	if m.cmdOpen {
		t.Fatal("esc left the : line open")
	}
	press(t, m, "3", "enter")
	if m.screen != ScreenDetail {
		t.Fatalf("enter on the partitions went to %s, want detail", m.screen)
	}
	press(t, m, "esc")
	if m.screen != ScreenPartitions {
		t.Fatalf("esc from detail went to %s", m.screen)
	}
	press(t, m, "S")
	press(t, m, "esc")
	if m.dialog != nil {
		t.Fatal("esc left the dialog open")
	}
	for i, want := range []Screen{ScreenMirrors, ScreenTopics, ScreenPartitions, ScreenEvents, ScreenGroups} {
		press(t, m, itoa(i+1))
		if m.screen != want {
			t.Fatalf("%d went to %s, want %s", i+1, m.screen, want)
		}
	}
}

// TestGoldenDrillStrip pins the 80×24 console with a drill: the panel does
// not fit, so the strip names the step and the next key, and d shows the
// panel below the table anyway.
func TestGoldenDrillStrip(t *testing.T) {
	for _, sc := range []struct {
		name string
		keys []string
	}{{"strip", nil}, {"panel", []string{"d"}}} {
		t.Run(sc.name, func(t *testing.T) {
			m, _ := fixture(t, 80, 24, Options{Theme: "dark", Drill: newFakeDrill()})
			press(t, m, sc.keys...)
			out := screen(t, m, colorprofile.ASCII)
			plain := screen(t, m, colorprofile.NoTTY)
			switch sc.name {
			case "strip":
				if !strings.Contains(plain, "DR DRILL 1/") || !strings.Contains(plain, "d panel") || !strings.Contains(plain, "n run step 1") {
					t.Fatalf("no drill strip at 80x24:\n%s", plain)
				}
			case "panel":
				if !strings.Contains(plain, "DR DRILL  step 1/") {
					t.Fatalf("d did not show the panel:\n%s", plain)
				}
			}
			golden.RequireEqual(t, out)
		})
	}
}

// TestEpochStaysBesideTheDrillPanel checks that at 120 columns, with the
// drill panel taking the right side, the partitions table of the drilled
// mirror keeps EPOCH. (With several mirrors the MIRROR column takes those
// cells.)
func TestEpochStaysBesideTheDrillPanel(t *testing.T) {
	m, _ := fixture(t, 120, 40, Options{Drill: newFakeDrill()})
	one := tuitest.Snapshot()
	one.Mirrors = one.Mirrors[:1]
	m.Update(snapshotMsg{snap: one})
	out := screen(t, m, colorprofile.NoTTY)
	if !strings.Contains(out, "DR DRILL  step") {
		t.Fatalf("no drill panel at 120 columns:\n%s", out)
	}
	if head := strings.Split(out, "\n")[lineOf(t, out, `TOPIC\s+P\s+STATE`)]; !strings.Contains(head, "EPOCH") {
		t.Fatalf("the partitions header lost EPOCH beside the drill panel: %q", head)
	}
}
