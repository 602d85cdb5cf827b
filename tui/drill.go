package tui

import (
	"context"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/kmirror/kmirror/drill/step"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/views"
)

// DrillDriver is the guided DR drill as the console sees it. Status must be
// cheap and never block on a running step; Next runs the current step and
// Confirm ticks the current step's instruction and runs it; both may take
// as long as the step's waits, so they are only called from a command
// goroutine.
type DrillDriver interface {
	Status() step.Status
	Next(ctx context.Context, note string) error
	Confirm(ctx context.Context, note string) error
}

// drillStepTimeout bounds one step started from the console; the drill's
// own waits are shorter, this only keeps a hung step from outliving it.
const drillStepTimeout = 10 * time.Minute

// drillRefresh is how often the panel re-reads a running step's progress,
// so a failover shows partition by partition.
const drillRefresh = 200 * time.Millisecond

// drillDoneMsg reports that a step finished.
type drillDoneMsg struct{ err error }

// drillTickMsg re-reads the drill status while a step runs.
type drillTickMsg struct{}

// drillPanel is the side panel's state; the drill itself is the driver's.
type drillPanelState struct {
	drv     DrillDriver
	status  step.Status
	prompt  views.Prompt
	editing bool
	note    string
	msg     string
	msgErr  bool
	show    drillShow
	cost    bool // the explanation of the numbers is open
}

// drillShow is how the operator chose to see the drill with d.
type drillShow int8

const (
	drillAuto  drillShow = iota // the panel where it fits, else the strip
	drillStrip                  // the strip everywhere
	drillPanel                  // the panel, below the body if need be
)

// String names the choice.
func (d drillShow) String() string {
	switch d {
	case drillAuto:
		return "auto"
	case drillStrip:
		return "strip"
	case drillPanel:
		return "panel"
	}
	return "unknown"
}

func newDrillPanel(drv DrillDriver) *drillPanelState {
	return &drillPanelState{drv: drv, status: drv.Status()}
}

// Panel sizes: beside the screens when the terminal is wide enough to keep
// the partitions table's 80 columns, else below them.
const (
	drillMinW   = 34
	drillMaxW   = 48
	drillBelowH = 12
)

// drillLayout adds the drill's wishes to st: the panel's width (beside) or
// height (below), or the strip.
func (m *Model) drillLayout(st *LayoutState) {
	if m.drill == nil {
		return
	}
	switch {
	case m.drill.show == drillStrip:
		st.DrillStrip = true
	case m.width-drillMinW-1 >= MinWidth:
		st.DrillW = min(drillMaxW, m.width-MinWidth-1)
	default:
		st.DrillH, st.DrillForce = drillBelowH, m.drill.show == drillPanel
	}
}

// toggleDrill switches between what is shown now, panel or strip.
func (m *Model) toggleDrill() {
	lay := ComputeLayout(m.width, m.height, m.layoutState())
	if lay.DrillStrip.H > 0 {
		m.drill.show = drillPanel
	} else {
		m.drill.show = drillStrip
	}
	m.relayout()
}

// bodyView renders the active screen and, when a drill runs, its panel.
func (m *Model) bodyView(lay Layout) string {
	body := views.Block(m.active().View(), lay.Body.W, lay.Body.H)
	if m.drill != nil && lay.DrillStrip.H > 0 {
		return body + "\n" + views.RenderDrillStrip(m.skin, m.drillView(), lay.DrillStrip.W)
	}
	if m.drill == nil || lay.Drill.W == 0 || lay.Drill.H == 0 {
		return body
	}
	panel := views.RenderDrill(m.skin, m.drillView(), lay.Drill.W, lay.Drill.H)
	if lay.Drill.Y > lay.Body.Y { // below
		return body + "\n" + panel
	}
	sep := views.Block(m.skin.Subtle.Render(repeatLines("│", lay.Body.H)), 1, lay.Body.H)
	return lipgloss.JoinHorizontal(lipgloss.Top, body, sep, panel)
}

func repeatLines(s string, n int) string {
	out := make([]byte, 0, n*(len(s)+1))
	for i := range n {
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, s...)
	}
	return string(out)
}

func (m *Model) drillView() views.DrillPanel {
	p := m.drill
	keyOf := func(a keymap.Action) string {
		if e, ok := m.km.Lookup(a); ok {
			return e.Binding.Help().Key
		}
		return ""
	}
	return views.DrillPanel{
		Status: p.status, Note: p.note, Editing: p.editing, Prompt: &p.prompt,
		Message: p.msg, MsgErr: p.msgErr,
		NextKey: keyOf(keymap.DrillNext), ConfirmKey: keyOf(keymap.DrillConfirm), NoteKey: keyOf(keymap.DrillNote),
		PanelKey: keyOf(keymap.DrillPanel), CostKey: keyOf(keymap.DrillCost),
	}
}

// drillKey handles the drill's keys; ok is false for keys it leaves to the
// console. While the note is typed every key but ctrl+c is the note's.
func (m *Model) drillKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	p := m.drill
	if p == nil || k.String() == "ctrl+c" {
		return nil, false
	}
	if p.cost {
		// The explanation is on top: it takes every key, and its own,
		// esc and q close it.
		switch m.km.Match(k, keymap.ScopeDrill|m.screen.scope()) {
		case keymap.DrillCost, keymap.Back, keymap.Quit:
			p.cost = false
		default:
		}
		return nil, true
	}
	if p.editing {
		switch p.prompt.Update(k) {
		case views.PromptSubmitted:
			p.note, p.editing = p.prompt.Value(), false
		case views.PromptCancelled:
			p.editing = false
		case views.PromptEditing:
		}
		return nil, true
	}
	if m.dialog != nil || m.cmdOpen || m.help || m.active().Capturing() {
		return nil, false
	}
	switch m.km.Match(k, keymap.ScopeDrill) {
	case keymap.DrillNext:
		return m.drillRun(false), true
	case keymap.DrillConfirm:
		return m.drillRun(true), true
	case keymap.DrillNote:
		p.editing = true
		p.prompt.SetValue(p.note)
		return nil, true
	case keymap.DrillPanel:
		m.toggleDrill()
		return nil, true
	case keymap.DrillCost:
		p.status = p.drv.Status()
		p.cost = true
		return nil, true
	default:
	}
	return nil, false
}

// drillRun starts the current step in a command goroutine: with confirm,
// the operator ticks its instruction first. A step with an unticked
// instruction is not run by n, and one without is not ticked by x.
func (m *Model) drillRun(confirm bool) tea.Cmd {
	p := m.drill
	p.status = p.drv.Status()
	switch {
	case p.status.Running:
		p.msg, p.msgErr = "a step is running: wait for it", false
		return nil
	case p.status.Done():
		p.msg, p.msgErr = "the drill is complete", false
		return nil
	}
	cur := p.status.Steps[p.status.Current]
	switch {
	case confirm && cur.Instruction == "":
		p.msg, p.msgErr = "this step has nothing to tick: "+m.drillView().NextKey+" runs it", false
		return nil
	case !confirm && cur.NeedsConfirm():
		p.msg, p.msgErr = "this step is yours: do what it says, then tick it with "+m.drillView().ConfirmKey, false
		return nil
	}
	note := p.note
	p.note, p.msg, p.msgErr = "", "", false
	p.status.Running = true
	ctx, drv := m.ctx, p.drv
	run := func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, drillStepTimeout)
		defer cancel()
		if confirm {
			return drillDoneMsg{err: drv.Confirm(cctx, note)}
		}
		return drillDoneMsg{err: drv.Next(cctx, note)}
	}
	return tea.Batch(run, drillTick())
}

// drillHelp is the drill panel's keys, for the help overlay while the
// panel is shown.
func (m *Model) drillHelp() []keymap.Entry {
	if m.drill == nil {
		return nil
	}
	return m.km.ForScope(keymap.ScopeDrill)
}

func drillTick() tea.Cmd {
	return tea.Tick(drillRefresh, func(time.Time) tea.Msg { return drillTickMsg{} })
}

// onDrill handles the drill's messages.
func (m *Model) onDrill(msg tea.Msg) tea.Cmd {
	p := m.drill
	if p == nil {
		return nil
	}
	switch msg := msg.(type) {
	case drillTickMsg:
		p.status = p.drv.Status()
		if p.status.Running {
			return drillTick()
		}
	case drillDoneMsg:
		p.status = p.drv.Status()
		switch {
		case msg.err == nil && p.status.Done():
			p.msg, p.msgErr = "drill complete", false
		case msg.err == nil:
			p.msg, p.msgErr = "step passed", false
		case errors.Is(msg.err, step.ErrBusy):
			p.msg, p.msgErr = "a step is running: wait for it", false
		case errors.Is(msg.err, step.ErrNeedsConfirm):
			p.msg, p.msgErr = "this step is yours: do what it says, then tick it", false
		default:
			p.msg, p.msgErr = msg.err.Error(), true
		}
		// Show the step's effect on the tables now, not at the next tick.
		return m.pollNow()
	}
	return nil
}

// refreshDrill re-reads the drill's status on every snapshot, so a step
// started elsewhere (or the console's own S) is reflected.
func (m *Model) refreshDrill() {
	if m.drill != nil {
		m.drill.status = m.drill.drv.Status()
	}
}
