package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/kmirror/kmirror/tui/tuitest"
)

// largeFixture is fixture over the many-topics snapshot, two steps of it so
// the catch-up estimates have two samples.
func largeFixture(t testing.TB, w, h int, opts Options) *Model {
	t.Helper()
	if opts.Now == nil {
		opts.Now = tuitest.Clock(4 * time.Second)
	}
	m := newModel(context.Background(), tuitest.NewController(tuitest.Large(1)), opts)
	t.Cleanup(m.cancel)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(snapshotMsg{snap: tuitest.Large(0)})
	m.Update(snapshotMsg{snap: tuitest.Large(1)})
	m.Update(eventsMsg{events: tuitest.Events()})
	return m
}

// goldenTopicScreens are the topics view's screens, reached from the view
// the console opens on for 406 partitions.
var goldenTopicScreens = []struct {
	name string
	keys []string
}{
	{"topics", nil},
	{"topics-by-eta", []string{"o", "o", "o", "g"}},
	{"topic-partitions", []string{"o", "o", "o", "g", "enter"}}, // the worst ETA: orders, with a stalled partition
	{"mirrors-eta", []string{"1"}},                              // each card's catch-up estimate
	{"topics-help", []string{"?"}},
}

func TestGoldenTopics(t *testing.T) {
	for _, sc := range goldenTopicScreens {
		for _, size := range [][2]int{{80, 24}, {160, 48}} {
			for _, theme := range []string{"dark", "light"} {
				t.Run(fmt.Sprintf("%s/%dx%d/%s", sc.name, size[0], size[1], theme), func(t *testing.T) {
					m := largeFixture(t, size[0], size[1], Options{Theme: theme})
					press(t, m, sc.keys...)
					golden.RequireEqual(t, screen(t, m, colorprofile.ASCII))
				})
			}
		}
		t.Run(sc.name+"/ascii", func(t *testing.T) {
			m := largeFixture(t, 80, 24, Options{Theme: "dark", ASCII: true})
			press(t, m, sc.keys...)
			requireASCIIGolden(t, screen(t, m, colorprofile.ASCII))
		})
	}
}

func TestDefaultScreen(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want Screen
	}{{0, ScreenPartitions}, {20, ScreenPartitions}, {48, ScreenPartitions}, {49, ScreenTopics}, {10_000, ScreenTopics}} {
		if got := defaultScreen(tc.n); got != tc.want {
			t.Errorf("defaultScreen(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	// Once the operator picks a screen, snapshots no longer move them.
	m := largeFixture(t, 120, 40, Options{})
	if m.screen != ScreenTopics {
		t.Fatalf("406 partitions open on %s, want topics", m.screen)
	}
	press(t, m, "3")
	m.Update(snapshotMsg{snap: tuitest.Large(2)})
	if m.screen != ScreenPartitions {
		t.Fatalf("a snapshot moved the operator to %s", m.screen)
	}
}

// TestTopicEnterAndBack checks enter opens the topic's partitions (its
// mirror only), esc from the detail returns to them and esc again to the
// topics view, with the partitions table as it was before.
func TestTopicEnterAndBack(t *testing.T) {
	m := largeFixture(t, 120, 40, Options{})
	press(t, m, "/")
	typeText(t, m, "^edge.logs$")
	press(t, m, "enter", "enter")
	if m.screen != ScreenPartitions || m.partitions.Mirror() != tuitest.MirrorCB {
		t.Fatalf("enter went to %s scoped to %q", m.screen, m.partitions.Mirror())
	}
	out := screen(t, m, colorprofile.NoTTY)
	if !strings.Contains(out, "showing 12 of 44") || strings.Contains(out, "edge.metrics") {
		t.Fatalf("the partitions of edge.logs:\n%s", out)
	}
	press(t, m, "enter", "esc", "esc")
	if m.screen != ScreenTopics {
		t.Fatalf("esc went to %s, want topics", m.screen)
	}
	if m.partitions.Mirror() != "" || m.partitions.FilterText() != "" {
		t.Fatalf("the partitions table kept scope %q filter %q", m.partitions.Mirror(), m.partitions.FilterText())
	}
	if m.topics.FilterText() != "^edge.logs$" {
		t.Fatalf("the topics filter became %q", m.topics.FilterText())
	}
}

// TestFlowTopics runs the topics path as a program: the console opens on
// the topics view, enter shows that topic's partitions, esc goes back.
func TestFlowTopics(t *testing.T) {
	c := tuitest.NewController(tuitest.Large(1))
	f := newFrames()
	m := newModel(t.Context(), c, Options{Tick: MinTick, Now: tuitest.Clock(4 * time.Second)})
	tm := teatest.NewTestModel(t, recorder{m: m, f: f}, teatest.WithInitialTermSize(120, 40))
	t.Cleanup(func() {
		tm.Send(key("ctrl+c"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(waitLimit))
	})
	fl := &flow{t: t, tm: tm, f: f, c: c}
	at := fl.wait("the topics view", contains("showing 27 of 27 topics (406 partitions)", "PARTS", "STATES"))
	fl.keys("j", "j")
	at = fl.waitAfter(at, "the cursor on billing.payments", func(s string) bool {
		return len(rowsWith(s, "> ", "billing.payments")) == 1
	})
	fl.keys("enter")
	at = fl.waitAfter(at, "the partitions of billing.payments", contains("showing 24 of 362", "filter /^billing\\.payments$/", "SRC-OFFSET"))
	fl.keys("esc")
	fl.waitAfter(at, "the topics view again", func(s string) bool {
		return strings.Contains(s, "showing 27 of 27 topics") && len(rowsWith(s, "> ", "billing.payments")) == 1
	})
}
