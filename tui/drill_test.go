package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/drill"
)

// fakeDrill is a drill driver whose steps pass at once with one line each,
// recording the note each step was run with. A step in failOnce fails the
// first time it runs.
type fakeDrill struct {
	mu       sync.Mutex
	st       drill.Status
	notes    map[drill.StepID]string
	failOnce map[drill.StepID]bool
}

func newFakeDrill() *fakeDrill {
	f := &fakeDrill{notes: map[drill.StepID]string{}, failOnce: map[drill.StepID]bool{}}
	for _, id := range drill.Steps {
		f.st.Steps = append(f.st.Steps, drill.StepRecord{ID: id, Step: id.String(), Title: id.Title(), State: drill.Pending, Result: "pending"})
	}
	return f
}

func (f *fakeDrill) Status() drill.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.Steps = slices.Clone(f.st.Steps)
	return st
}

// instruct makes step id the operator's: it runs only once confirmed.
func (f *fakeDrill) instruct(id drill.StepID, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Steps[id].Instruction = text
}

func (f *fakeDrill) Confirm(ctx context.Context, note string) error {
	f.mu.Lock()
	if f.st.Done() {
		f.mu.Unlock()
		return drill.ErrDone
	}
	r := &f.st.Steps[f.st.Current]
	if r.Instruction == "" {
		f.mu.Unlock()
		return drill.ErrNothingToConfirm
	}
	r.Confirmed = time.Unix(1, 0)
	f.mu.Unlock()
	return f.Next(ctx, note)
}

func (f *fakeDrill) Next(_ context.Context, note string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.Done() {
		return drill.ErrDone
	}
	r := &f.st.Steps[f.st.Current]
	if r.NeedsConfirm() {
		return drill.ErrNeedsConfirm
	}
	f.notes[r.ID] = note
	if f.failOnce[r.ID] {
		delete(f.failOnce, r.ID)
		r.State, r.Result, r.Error = drill.Failed, "failed", "source cluster A unreachable"
		return errors.New("step " + r.Step + ": source cluster A unreachable")
	}
	r.State, r.Result, r.Error, r.Note = drill.Passed, "passed", "", note
	r.Lines = []string{fmt.Sprintf("did %s", r.Step)}
	if r.ID == drill.StepReport {
		f.st.ReportPath = "/tmp/kmirror-drill-test"
	}
	f.st.Current++
	return nil
}

func (f *fakeDrill) note(id drill.StepID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notes[id]
}

func startDrillFlow(t *testing.T, w, h int, drv DrillDriver) *flow {
	t.Helper()
	return startFlow(t, w, h, Options{Drill: drv})
}

// TestFlowDrillPanelAdvancesThroughEveryStep walks the panel from preflight
// to the report with n, writes a note with i, and retries a failed step.
func TestFlowDrillPanelAdvancesThroughEveryStep(t *testing.T) {
	fd := newFakeDrill()
	fd.failOnce[drill.StepPreflight] = true
	fl := startDrillFlow(t, 120, 40, fd)
	at := fl.wait("the drill panel at step 1", contains("DR DRILL  step 1/8", "1 Preflight", "8 Report", "n run step 1", "look at:"))

	fl.keys("n")
	at = fl.waitAfter(at, "preflight failed and offered again", contains("✗ 1 Preflight — failed", "n retry step 1", "source cluster A unreachable"))

	fl.keys("i")
	fl.tm.Type("lag was fine")
	fl.keys("enter")
	at = fl.waitAfter(at, "the note kept for the next step", contains("note: lag was fine"))

	fl.keys("n")
	at = fl.waitAfter(at, "preflight passed", contains("DR DRILL  step 2/8", "✓ 1 Preflight", "did preflight", "n run step 2"))
	if got := fd.note(drill.StepPreflight); got != "lag was fine" {
		t.Fatalf("preflight ran with note %q, want %q", got, "lag was fine")
	}
	for i, id := range drill.Steps[1 : len(drill.Steps)-1] {
		fl.keys("n")
		at = fl.waitAfter(at, "step "+id.String()+" passed", contains(fmt.Sprintf("step %d/8", i+3), "did "+id.String()))
	}
	fl.keys("n")
	fl.waitAfter(at, "the drill complete with its report path", contains("DR DRILL  complete", "report: /tmp/kmirror-drill-test.md", "✓ 8 Report"))
	if got := fd.note(drill.StepSnapshot); got != "" {
		t.Fatalf("the note was reused for the snapshot step: %q", got)
	}
}

// TestDrillKeysLeaveTheConsoleKeysAlone checks that with the panel open the
// console's own keys still work and typing a note does not trigger them.
func TestDrillKeysLeaveTheConsoleKeysAlone(t *testing.T) {
	fd := newFakeDrill()
	m, _ := fixture(t, 120, 40, Options{Drill: fd})
	press(t, m, "tab")
	if m.screen != ScreenEvents {
		t.Fatalf("tab moved to %s, want events", m.screen)
	}
	press(t, m, "i", "q", "s")
	if m.drill.note != "" || !m.drill.editing {
		t.Fatalf("typing a note: editing=%v note=%q", m.drill.editing, m.drill.note)
	}
	press(t, m, "enter")
	if m.drill.note != "qs" {
		t.Fatalf("note %q, want %q", m.drill.note, "qs")
	}
	if out := screen(t, m, colorprofile.ASCII); !strings.Contains(out, "note: qs") {
		t.Fatalf("the note is not shown:\n%s", out)
	}
}

// TestDrillPanelLayout checks the panel's place: beside the body when the
// table keeps its 80 columns, below it otherwise.
func TestDrillPanelLayout(t *testing.T) {
	beside := ComputeLayout(120, 40, LayoutState{DrillW: 39})
	if beside.Body.W != 80 || beside.Drill != (Rect{81, beside.Body.Y, 39, beside.Body.H}) {
		t.Fatalf("120 columns: body %+v drill %+v", beside.Body, beside.Drill)
	}
	below := ComputeLayout(90, 40, LayoutState{DrillH: 12})
	if below.Body.W != 90 || below.Drill.Y != below.Body.Y+below.Body.H || below.Drill.H != 12 {
		t.Fatalf("90 columns: body %+v drill %+v", below.Body, below.Drill)
	}
	none := ComputeLayout(120, 40, LayoutState{})
	if none.Drill != (Rect{}) || none.Body.W != 120 {
		t.Fatalf("no drill: body %+v drill %+v", none.Body, none.Drill)
	}
}

// TestFlowDrillInstructionIsTickedNotRun checks a step that is the
// operator's: n does not run it, x ticks its checkbox and runs it.
func TestFlowDrillInstructionIsTickedNotRun(t *testing.T) {
	fd := newFakeDrill()
	fd.instruct(drill.StepPreflight, "Stop the brokers of A.")
	fl := startDrillFlow(t, 120, 40, fd)
	at := fl.wait("the instruction unticked", contains("[ ] Stop the brokers of A.", "x done: tick step 1"))
	fl.keys("n")
	at = fl.waitAfter(at, "n refused", contains("this step is yours", "tick it with x"))
	if st := fd.Status(); st.Current != 0 || st.Steps[0].State != drill.Pending {
		t.Fatalf("n ran the operator's step: %+v", st.Steps[0])
	}
	fl.keys("x")
	fl.waitAfter(at, "the step ticked and run", contains("DR DRILL  step 2/8", "✓ 1 Preflight", "did preflight"))
	if st := fd.Status(); st.Steps[0].Confirmed.IsZero() {
		t.Fatal("x did not confirm the step")
	}
}

// TestHelpListsDrillKeysWithThePanel checks "?" lists the drill's keys, from
// the key table, on every screen while the panel is shown, and not without.
func TestHelpListsDrillKeysWithThePanel(t *testing.T) {
	drillKeys := []string{"DR drill", "n          run the next step", "x          tick: I did it", "i          note for the report"}
	for _, keys := range [][]string{{"?"}, {"tab", "?"}, {"shift+tab", "?"}} {
		m, _ := fixture(t, 120, 40, Options{Drill: newFakeDrill()})
		press(t, m, keys...)
		out := ansi.Strip(screen(t, m, colorprofile.NoTTY))
		for _, want := range drillKeys {
			if !strings.Contains(out, want) {
				t.Errorf("help after %v lacks %q:\n%s", keys, want, out)
			}
		}
	}
	m, _ := fixture(t, 120, 40, Options{})
	press(t, m, "?")
	if out := ansi.Strip(screen(t, m, colorprofile.NoTTY)); strings.Contains(out, "DR drill") || strings.Contains(out, "tick: I did it") {
		t.Errorf("help lists drill keys without a drill:\n%s", out)
	}
}
