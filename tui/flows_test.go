package tui

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/tui/tuitest"
)

const waitLimit = 5 * time.Second

type flow struct {
	t  *testing.T
	tm *teatest.TestModel
	f  *frames
	c  *tuitest.Controller
}

// startFlow runs the console as a real Bubble Tea program (teatest) over
// the fake engine, with the fastest tick and a fixed clock.
func startFlow(t *testing.T, w, h int, opts Options) *flow {
	t.Helper()
	opts.Tick = MinTick
	if opts.Now == nil {
		opts.Now = tuitest.Clock(2 * time.Second)
	}
	c := tuitest.NewController(tuitest.Snapshot())
	f := newFrames()
	m := newModel(t.Context(), c, opts)
	tm := teatest.NewTestModel(t, recorder{m: m, f: f}, teatest.WithInitialTermSize(w, h))
	fl := &flow{t: t, tm: tm, f: f, c: c}
	t.Cleanup(func() {
		tm.Send(key("ctrl+c"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(waitLimit))
	})
	return fl
}

func (fl *flow) keys(ks ...string) {
	for _, k := range ks {
		fl.tm.Send(key(k))
	}
}

func (fl *flow) wait(what string, cond func(string) bool) int {
	fl.t.Helper()
	return fl.f.waitFrom(fl.t, 0, waitLimit, what, cond)
}

func (fl *flow) waitAfter(from int, what string, cond func(string) bool) int {
	fl.t.Helper()
	return fl.f.waitFrom(fl.t, from, waitLimit, what, cond)
}

func contains(parts ...string) func(string) bool {
	return func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	}
}

// rowState returns the STATE shown on the partitions row of topic/p.
func rowState(screen, topic string, p int) string {
	re := regexp.MustCompile(`(?m)\s` + regexp.QuoteMeta(topic) + `\s+` + fmt.Sprint(p) + `\s+([A-Z_]+)\s`)
	if m := re.FindStringSubmatch(screen); m != nil {
		return m[1]
	}
	return ""
}

func statesAre(topic string, parts int, want string) func(string) bool {
	return func(s string) bool {
		for p := 0; p < parts; p++ {
			if rowState(s, topic, p) != want {
				return false
			}
		}
		return true
	}
}

func TestFlowFilterSelectPause(t *testing.T) {
	fl := startFlow(t, 100, 30, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20", "payments"))

	fl.keys("/")
	fl.tm.Type("pay")
	fl.keys("enter")
	fl.wait("the filtered table", contains("showing 4 of 20", "filter /pay/"))

	fl.keys("j", "j", "j") // payments/3, the MIRRORING one
	at := fl.wait("the cursor on payments/3", func(s string) bool {
		return len(rowsWith(s, "> ", "payments", "MIRRORING")) == 1
	})
	if got := rowState(fl.last(), "payments", 3); got != "MIRRORING" {
		t.Fatalf("payments/3 starts %s, want MIRRORING", got)
	}

	fl.keys("p")
	pausing := fl.waitAfter(at, "payments/3 PAUSING", func(s string) bool { return rowState(s, "payments", 3) == "PAUSING" })
	fl.waitAfter(pausing, "every payments partition PAUSED", statesAre("payments", 4, "PAUSED"))

	fl.neverShown(at, "pause opened a confirmation", "[y]", "Type a-to-b")
	want := []engine.Command{{Kind: engine.CmdPause, Mirror: tuitest.MirrorAB, Topics: []string{"payments"}}}
	if got := fl.c.Commands(); !commandsEqual(got, want) {
		t.Fatalf("commands = %+v, want %+v", got, want)
	}
}

func TestFlowStopAsksThenStops(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))
	fl.keys("/")
	fl.tm.Type("^orders$")
	fl.keys("enter")
	fl.wait("the orders rows", contains("showing 6 of 20"))

	fl.keys("s")
	at := fl.wait("the stop dialog", contains("Stop mirroring (failover)", "mirror a-to-b: orders", "Total: 1 topic, 6 partitions.", "[y] stop"))
	fl.noCommands("the stop key before confirming")

	fl.keys("n")
	at = fl.waitAfter(at, "the dialog to close", contains("cancelled: nothing was sent"))
	fl.noCommands("n")

	fl.keys("s")
	at = fl.waitAfter(at, "the stop dialog again", contains("[y] stop"))
	fl.keys("y")
	fl.waitAfter(at, "every orders partition STOPPED", statesAre("orders", 6, "STOPPED"))
	want := []engine.Command{{Kind: engine.CmdStop, Mirror: tuitest.MirrorAB, Topics: []string{"orders"}}}
	if got := fl.c.Commands(); !commandsEqual(got, want) {
		t.Fatalf("commands = %+v, want %+v", got, want)
	}
}

func TestFlowStopMirrorNeedsTypedName(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))

	fl.keys("S")
	at := fl.wait("the typed confirmation", contains("Stop the whole mirror a-to-b", "Type a-to-b and press enter"))

	fl.keys("y", "enter") // y is just text here; "y" is not the mirror name
	at = fl.waitAfter(at, "the mismatch", contains(`"y" does not match "a-to-b": nothing was sent`))
	fl.keys("ctrl+u")
	fl.tm.Type("a-to-c")
	fl.keys("enter")
	at = fl.waitAfter(at, "the second mismatch", contains(`"a-to-c" does not match "a-to-b"`))
	fl.noCommands("a wrong name")

	fl.keys("ctrl+u")
	fl.tm.Type("a-to-b")
	fl.keys("enter")
	fl.waitAfter(at, "the a-to-b partitions STOPPED", func(s string) bool {
		return statesAre("orders", 6, "STOPPED")(s) && statesAre("payments", 4, "STOPPED")(s)
	})
	want := []engine.Command{{Kind: engine.CmdStop, Mirror: tuitest.MirrorAB}}
	if got := fl.c.Commands(); !commandsEqual(got, want) {
		t.Fatalf("commands = %+v, want %+v", got, want)
	}
}

func TestFlowReadOnlyHidesActions(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{ReadOnly: true})
	fl.wait("the partitions table", contains("showing 20 of 20", "READ-ONLY"))

	fl.keys("s", "S", "p", "B", "?")
	help := fl.wait("the help overlay", contains("Keys — partitions view"))
	screen := fl.f.since(help)[0]
	for _, gone := range []string{"stop/failover", "pause topics", "resume topics", "recover", "! "} {
		if strings.Contains(screen, gone) {
			t.Errorf("read-only help lists %q:\n%s", gone, screen)
		}
	}
	if !strings.Contains(screen, "actions are disabled in this session") {
		t.Errorf("read-only help does not say actions are disabled:\n%s", screen)
	}
	fl.neverShown(0, "read-only console opened a stop dialog", "Stop mirroring", "Stop the whole mirror")
	fl.noCommands("read-only console")
}

func TestFlowControlErrorIsShown(t *testing.T) {
	fl := startFlow(t, 100, 30, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))
	fl.c.SetError(errors.New("not the owner of a-to-b/audit-log"))
	fl.keys("p") // cursor is on audit-log/0
	at := fl.wait("the error in the status line", contains("pause a-to-b: audit-log failed: not the owner of a-to-b/audit-log"))
	fl.keys("tab") // partitions → events
	fl.waitAfter(at, "the error in the event log", contains("TIME UTC", "ERROR", "console: pause a-to-b: audit-log failed"))
}

func TestFlowEventsArrive(t *testing.T) {
	fl := startFlow(t, 100, 30, Options{})
	fl.keys("tab")
	fl.wait("the events view", contains("TIME UTC", "no events yet"))
	for i := range 3 {
		fl.c.Emit(engine.Event{Time: tuitest.T0, Level: engine.LevelWarn, Mirror: tuitest.MirrorAB,
			Topic: "orders", Partition: int32(i), Message: fmt.Sprintf("leader moved %d", i)})
	}
	fl.wait("three events", contains("a-to-b/orders/0", "leader moved 0", "leader moved 1", "leader moved 2"))
}

func TestFlowTickKeys(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{})
	fl.wait("the tab bar", contains("refresh 250ms"))
	fl.keys("-", "-")
	fl.wait("a slower refresh", contains("refresh 1s", "refreshing every 1s"))
	fl.keys("+")
	fl.wait("a faster refresh", contains("refresh 500ms"))
}

func TestFlowTooSmall(t *testing.T) {
	fl := startFlow(t, 79, 24, Options{})
	fl.wait("the size message", contains("terminal too small (need 80×24, have 79×24)"))
	// The renderer really drew it on the (fake) terminal.
	teatest.WaitFor(t, fl.tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("terminal too small (need 80×24, have 79×24)"))
	}, teatest.WithDuration(waitLimit))
}

func TestFlowQuit(t *testing.T) {
	fl := startFlow(t, 80, 24, Options{})
	fl.wait("the partitions table", contains("showing 20 of 20"))
	fl.keys("q")
	fl.tm.WaitFinished(t, teatest.WithFinalTimeout(waitLimit))
	if _, ok := fl.tm.FinalModel(t).(recorder); !ok {
		t.Fatalf("final model is %T", fl.tm.FinalModel(t))
	}
}

// noCommands fails the test if the console sent any command; what names
// what would have sent it.
func (fl *flow) noCommands(what string) {
	fl.t.Helper()
	if got := fl.c.Commands(); len(got) != 0 {
		fl.t.Fatalf("%s sent commands: %+v", what, got)
	}
}

// neverShown fails the test if a frame from from on contains any of
// texts; what names what it would have opened.
func (fl *flow) neverShown(from int, what string, texts ...string) {
	fl.t.Helper()
	for _, s := range fl.f.since(from) {
		for _, text := range texts {
			if strings.Contains(s, text) {
				fl.t.Fatalf("%s:\n%s", what, s)
			}
		}
	}
}

func (fl *flow) last() string {
	s, _ := fl.f.last()
	return s
}

func commandsEqual(a, b []engine.Command) bool {
	return slices.EqualFunc(a, b, func(x, y engine.Command) bool {
		return x.Kind == y.Kind && x.Mirror == y.Mirror && x.Rebuild == y.Rebuild && slices.Equal(x.Topics, y.Topics)
	})
}
