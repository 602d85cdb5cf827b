package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/tui/tuitest"
)

func TestEventBurstIsCoalescedInOrder(t *testing.T) {
	c := tuitest.NewController(tuitest.Snapshot())
	m := newModel(context.Background(), c, Options{Now: tuitest.Clock(0)})
	defer m.cancel()
	for i := range 3 {
		c.Emit(engine.Event{Level: engine.LevelInfo, Mirror: "a-to-b", Partition: -1, Message: string(rune('a' + i))})
	}
	msg, ok := m.waitEvents()().(eventsMsg)
	if !ok || msg.closed || len(msg.events) != 3 {
		t.Fatalf("got %+v", msg)
	}
	for i, ev := range msg.events {
		if ev.Message != string(rune('a'+i)) {
			t.Fatalf("event %d is %q: out of order", i, ev.Message)
		}
	}
	if next := m.onEvents(msg); next == nil {
		t.Fatal("the wait was not re-armed")
	}
	if m.events.Len() != 3 {
		t.Fatalf("event log holds %d events", m.events.Len())
	}
}

func TestClosedEventStreamStopsWaitingAndSaysSo(t *testing.T) {
	c := tuitest.NewController(tuitest.Snapshot())
	m := newModel(context.Background(), c, Options{Now: tuitest.Clock(0)})
	defer m.cancel()
	c.Emit(engine.Event{Message: "last"})
	c.Close()
	msg := m.waitEvents()().(eventsMsg)
	if !msg.closed || len(msg.events) != 1 {
		t.Fatalf("got %+v", msg)
	}
	if next := m.onEvents(msg); next != nil {
		t.Fatal("waiting re-armed on a closed channel")
	}
	if !m.status.err || !strings.Contains(m.status.text, "event stream closed") {
		t.Fatalf("status %+v", m.status)
	}
}

func TestEventWaitEndsWhenTheConsoleQuits(t *testing.T) {
	c := tuitest.NewController(tuitest.Snapshot())
	m := newModel(context.Background(), c, Options{})
	done := make(chan tea.Msg)
	go func() { done <- m.waitEvents()() }()
	m.quit()
	select {
	case msg := <-done:
		if msg != nil {
			t.Fatalf("got %+v after quit", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event wait outlived the console")
	}
}

func TestOnlyTheTickLoopRearms(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{}) // the fixture's first snapshot started the loop
	if !m.ticking {
		t.Fatal("first snapshot did not start the tick loop")
	}
	if cmd := m.onSnapshot(snapshotMsg{snap: tuitest.Snapshot()}); cmd != nil {
		t.Fatal("an extra poll started a second tick loop")
	}
	if cmd := m.onSnapshot(snapshotMsg{snap: tuitest.Snapshot(), rearm: true}); cmd == nil {
		t.Fatal("the tick loop did not re-arm")
	}
}

// blockingController blocks in every call, like an engine whose network is
// down. The console must stay responsive anyway: Update never calls it.
type blockingController struct{ never chan struct{} }

func (b blockingController) Snapshot() engine.Snapshot { <-b.never; return engine.Snapshot{} }
func (b blockingController) Events() <-chan engine.Event {
	return nil
}

func (b blockingController) Control(ctx context.Context, _ engine.Command) error {
	<-b.never
	return nil
}

func TestUpdateNeverCallsTheEngine(t *testing.T) {
	b := blockingController{never: make(chan struct{})}
	defer close(b.never)
	m := newModel(context.Background(), b, Options{Now: tuitest.Clock(0)})
	defer m.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Init() // builds commands, runs none
		m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
		m.Update(tea.ColorProfileMsg{Profile: colorprofile.ANSI256})
		m.Update(snapshotMsg{snap: tuitest.Snapshot(), rearm: true})
		for _, k := range []string{"p", "s", "y", "S", "esc", "tab", "?", "esc", "+", "enter", "R"} {
			m.Update(key(k))
		}
		_ = m.View()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Update or View blocked on the engine")
	}
}

func TestControlOutcomeReachesStatusAndLog(t *testing.T) {
	m, _ := fixture(t, 80, 24, Options{})
	before := m.events.Len()
	cmd := engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b", Topics: []string{"orders"}}
	if next := m.onControlDone(controlDoneMsg{cmd: cmd, err: errors.New("partition not owned here")}); next != nil {
		t.Error("a failed command triggered a poll")
	}
	if !m.status.err || m.status.text != "stop a-to-b: orders failed: partition not owned here" {
		t.Fatalf("status %+v", m.status)
	}
	if m.events.Len() != before+1 {
		t.Fatal("the failure is not in the event log")
	}
	if next := m.onControlDone(controlDoneMsg{cmd: cmd}); next == nil {
		t.Error("a successful command did not poll for its effect")
	}
	if m.status.err || m.status.text != "stop a-to-b: orders accepted by the engine" {
		t.Fatalf("status %+v", m.status)
	}
}

func TestDescribeCommand(t *testing.T) {
	cases := map[string]engine.Command{
		"pause a-to-b (whole mirror)":         {Kind: engine.CmdPause, Mirror: "a-to-b"},
		"recover with rebuild a-to-b: orders": {Kind: engine.CmdRecover, Mirror: "a-to-b", Topics: []string{"orders"}, Rebuild: true},
		"resume c-to-b: telemetry, audit":     {Kind: engine.CmdResume, Mirror: "c-to-b", Topics: []string{"telemetry", "audit"}},
	}
	for want, cmd := range cases {
		if got := describeCommand(cmd); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
