package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/themes"
	"github.com/kmirror/kmirror/views"
)

var twoTopics = []views.Target{{Mirror: "a-to-b", Topics: []string{"orders", "payments"}, Partitions: 10}}

func TestYesNoDialog(t *testing.T) {
	for k, want := range map[string]dialogResult{"y": dialogConfirmed, "Y": dialogConfirmed, "n": dialogCancelled, "esc": dialogCancelled, "x": dialogOpen, "enter": dialogOpen} {
		d := newStopDialog(twoTopics)
		if got := d.update(key(k)); got != want {
			t.Errorf("%q: %s, want %s", k, got, want)
		}
	}
}

func TestTypedDialogNeedsTheExactName(t *testing.T) {
	d := newStopMirrorDialog(views.Target{Mirror: "a-to-b", Partitions: 18})
	if d.update(key("y")) != dialogOpen {
		t.Fatal("y confirmed a typed dialog")
	}
	if d.update(key("enter")) != dialogOpen || !d.mismatch {
		t.Fatal("enter with the wrong text did not report a mismatch")
	}
	d.update(key("ctrl+u"))
	for _, r := range "a-to-b" {
		d.update(key(string(r)))
	}
	if d.mismatch {
		t.Fatal("typing did not clear the mismatch")
	}
	if d.update(key("enter")) != dialogConfirmed {
		t.Fatal("the exact name did not confirm")
	}
	if len(d.cmds) != 1 || d.cmds[0].Kind != engine.CmdStop || d.cmds[0].Topics != nil || d.cmds[0].Mirror != "a-to-b" {
		t.Fatalf("commands %+v", d.cmds)
	}
}

func TestRebuildDialogSendsRecoverWithRebuild(t *testing.T) {
	d := newRebuildDialog(twoTopics)
	if d.require != "a-to-b" {
		t.Fatalf("rebuild requires %q", d.require)
	}
	if len(d.cmds) != 1 || d.cmds[0].Kind != engine.CmdRecover || !d.cmds[0].Rebuild {
		t.Fatalf("commands %+v", d.cmds)
	}
}

func TestDialogNamesExactlyWhatItStops(t *testing.T) {
	skin := views.NewSkin(themes.NewPalette(themes.Dark, colorprofile.TrueColor))
	d := newStopDialog(twoTopics)
	out := ansi.Strip(d.view(skin, 70, 30))
	for _, want := range []string{"mirror a-to-b: orders, payments", "Total: 2 topics, 10 partitions.", "[y] stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("dialog lacks %q:\n%s", want, out)
		}
	}
	// Too many topics for the box: the list is cut, the totals never are.
	var many []string
	for i := range 200 {
		many = append(many, "topic-"+strings.Repeat("x", i%7)+itoa(i))
	}
	d = newStopDialog([]views.Target{{Mirror: "a-to-b", Topics: many, Partitions: 1600}})
	out = ansi.Strip(d.view(skin, 70, 18))
	if n := strings.Count(out, "\n") + 1; n > 18 {
		t.Errorf("dialog is %d lines, asked for 18", n)
	}
	for _, want := range []string{"more lines (the totals below are exact)", "Total: 200 topics, 1600 partitions.", "[y] stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("cut dialog lacks %q:\n%s", want, out)
		}
	}
}

func TestReadOnlyModelRefusesActions(t *testing.T) {
	m, c := fixture(t, 80, 24, Options{ReadOnly: true})
	for _, a := range []keymap.Action{keymap.Pause, keymap.Stop, keymap.StopMirror, keymap.Rebuild} {
		if cmd := m.onAction(views.ActionMsg{Action: a, Targets: twoTopics}); cmd != nil || m.dialog != nil {
			t.Errorf("%s: read-only model acted", a)
		}
	}
	if len(c.Commands()) != 0 {
		t.Fatal("commands reached the engine")
	}
}

func TestPauseNeedsNoConfirmationButStopDoes(t *testing.T) {
	m, c := fixture(t, 80, 24, Options{})
	press(t, m, "p")
	if m.dialog != nil {
		t.Fatal("pause opened a dialog")
	}
	if got := c.Commands(); len(got) != 1 || got[0].Kind != engine.CmdPause {
		t.Fatalf("commands %+v", got)
	}
	press(t, m, "s")
	if m.dialog == nil {
		t.Fatal("stop did not ask")
	}
	if len(c.Commands()) != 1 {
		t.Fatal("stop was sent before confirming")
	}
	press(t, m, "y")
	if got := c.Commands(); len(got) != 2 || got[1].Kind != engine.CmdStop || strings.Join(got[1].Topics, ",") != "audit-log" {
		t.Fatalf("commands %+v", got)
	}
}
