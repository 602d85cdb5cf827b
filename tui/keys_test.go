package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/tui/tuitest"
)

func TestTabCyclesScreens(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{})
	got := []string{m.screen.String()}
	for range 5 {
		press(t, m, "tab")
		got = append(got, m.screen.String())
	}
	if want := "partitions events groups mirrors topics partitions"; strings.Join(got, " ") != want {
		t.Fatalf("tab order %q, want %q", strings.Join(got, " "), want)
	}
	press(t, m, "shift+tab")
	if m.screen != ScreenTopics {
		t.Fatalf("shift+tab from partitions went to %s", m.screen)
	}
}

func TestDetailOpensAndReturns(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{})
	press(t, m, "j", "j", "j", "j", "j", "j", "j", "j", "enter")
	if m.screen != ScreenDetail || m.detail.Key().Topic != "orders" || m.detail.Key().Partition != 3 {
		t.Fatalf("screen %s, detail %+v", m.screen, m.detail.Key())
	}
	press(t, m, "esc")
	if m.screen != ScreenPartitions {
		t.Fatalf("esc from detail went to %s", m.screen)
	}
	if k, _ := m.partitions.Selected(); k.Topic != "orders" || k.Partition != 3 {
		t.Fatalf("back on the table the cursor is on %+v", k)
	}
	press(t, m, "enter", "tab")
	if m.screen != ScreenEvents {
		t.Fatalf("tab from detail went to %s", m.screen)
	}
}

func TestMirrorEnterScopesThePartitions(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{})
	press(t, m, "1", "j", "enter")
	if m.screen != ScreenPartitions || m.partitions.Mirror() != tuitest.MirrorCB {
		t.Fatalf("screen %s, scope %q", m.screen, m.partitions.Mirror())
	}
	out := ansi.Strip(screen(t, m, colorprofile.NoTTY))
	if !strings.Contains(out, "showing 2 of 2") || !strings.Contains(out, "mirror c-to-b") || strings.Contains(out, "orders") {
		t.Fatalf("scoped table:\n%s", out)
	}
	press(t, m, "esc")
	if m.partitions.Mirror() != "" {
		t.Fatal("esc did not clear the mirror scope")
	}
}

func TestCommandLine(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{})
	for _, c := range []struct{ line, want string }{
		{"events", "events"}, {"groups", "groups"}, {"mirrors", "mirrors"}, {"partitions", "partitions"},
	} {
		press(t, m, ":")
		if !m.cmdOpen {
			t.Fatal(": did not open the command line")
		}
		typeText(t, m, c.line)
		press(t, m, "enter")
		if m.screen.String() != c.want {
			t.Errorf(":%s went to %s", c.line, m.screen)
		}
	}
	press(t, m, ":")
	typeText(t, m, "frobnicate")
	press(t, m, "enter")
	if !m.status.err || !strings.Contains(m.status.text, "unknown command :frobnicate") {
		t.Fatalf("status %+v", m.status)
	}
	press(t, m, ":")
	typeText(t, m, "help")
	press(t, m, "enter")
	if !m.help {
		t.Fatal(":help did not open help")
	}
	press(t, m, "q") // q closes help rather than quitting under it
	if m.help {
		t.Fatal("q did not close help")
	}
}

func TestHelpListsTheCurrentScreensKeys(t *testing.T) {
	m, _ := fixture(t, 100, 30, Options{LogPath: "/var/log/kmirror/console.log"})
	press(t, m, "?")
	out := ansi.Strip(screen(t, m, colorprofile.NoTTY))
	for _, want := range []string{"Keys — partitions view", "! s", "stop/failover topics", "/          filter", "log file: /var/log/kmirror/console.log"} {
		if !strings.Contains(out, want) {
			t.Errorf("partitions help lacks %q:\n%s", want, out)
		}
	}
	press(t, m, "esc", "tab", "?") // events
	out = ansi.Strip(screen(t, m, colorprofile.NoTTY))
	if !strings.Contains(out, "Keys — events view") || strings.Contains(out, "stop/failover") || strings.Contains(out, "filter topics") {
		t.Errorf("events help shows keys that do nothing there:\n%s", out)
	}
}

func TestKeysAreIgnoredWhenTooSmallExceptQuit(t *testing.T) {
	m, c := fixture(t, 70, 20, Options{})
	press(t, m, "s", "p", "?")
	if m.dialog != nil || m.help || len(c.Commands()) != 0 {
		t.Fatal("keys acted on a screen the operator cannot see")
	}
}
