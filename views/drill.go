package views

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/drill/step"
)

// DrillPanel is what the drill side panel shows besides the drill's own
// status: the operator's note being typed or kept for the next step, and
// the last message.
type DrillPanel struct {
	Status     step.Status
	Note       string // kept for the next step
	Editing    bool   // the note prompt is open
	Prompt     *Prompt
	Message    string
	MsgErr     bool
	NextKey    string // the key that runs the next step
	ConfirmKey string // the key that ticks the step's instruction as done
	NoteKey    string // the key that opens the note prompt
	PanelKey   string // the key that switches between panel and strip
	CostKey    string // the key that opens the explanation of the numbers
}

// drillMarker is the step's mark; the word beside a failed step keeps the
// meaning without colour.
func drillMarker(st step.State) string {
	switch st {
	case step.Passed:
		return "✓"
	case step.Failed:
		return "✗"
	case step.Running:
		return "…"
	case step.Pending:
		return " "
	}
	return "?"
}

// drillMinOutput is the fewest rows the panel keeps for a step's output:
// when the step list, the explanation and the numbers would leave less,
// the panel is drawn short (drillShort), so at 80×24, below the table, it
// still shows what the last step found.
const drillMinOutput = 6

// RenderDrill draws the panel in exactly width×height cells.
func RenderDrill(s *Skin, p DrillPanel, width, height int) string {
	if width < 10 || height < 3 {
		return block("", width, height)
	}
	inner := width - 2
	st := p.Status
	head := fmt.Sprintf("DR DRILL  step %d/%d", min(st.Current+1, len(st.Steps)), len(st.Steps))
	if st.Done() {
		head = "DR DRILL  complete"
	}
	steps := drillSteps(s, st, inner)

	// The focus is the running step, else the current one with what the
	// previous step found, so a result stays on screen until the next step.
	focus := min(st.Current, len(st.Steps)-1)
	var explain, about, look []string
	if !st.Done() {
		rec := st.Steps[focus]
		text, lookAt := rec.Explain, rec.LookAt
		if text == "" {
			text = rec.ID.Explain()
		}
		if lookAt == "" {
			lookAt = rec.ID.LookAt()
		}
		explain = wrapStyled(s.Text.Render, text, inner)
		if rec.Instruction != "" {
			// The checkbox is text, so it reads without colour too.
			box, style := "[ ] ", s.Warn.Render
			if !rec.Confirmed.IsZero() {
				box, style = "[x] ", s.OK.Render
			}
			about = append(about, wrapStyled(style, box+rec.Instruction, inner)...)
		}
		look = wrapStyled(s.Label.Render, "look at: "+lookAt, inner)
	} else if st.ReportPath != "" {
		about = append(about, wrapStyled(s.OK.Render, "report: "+st.ReportPath+".md and .json", inner)...)
	}
	keys := []string{drillNext(s, p, focus)}
	switch {
	case p.Editing && p.Prompt != nil:
		keys = append(keys, p.Prompt.View(s, "note: ", inner))
	case p.Note != "":
		keys = append(keys, s.Label.Render(ansi.Truncate("note: "+p.Note, inner, "…")))
	}
	var msg []string
	if p.Message != "" {
		style := s.StatusInfo.Render
		if p.MsgErr {
			style = s.StatusError.Render
		}
		msg = wrapStyled(style, p.Message, inner)
	}
	rule := s.Subtle.Render(strings.Repeat("─", inner))

	// What the drill measured so far, one number a line, until a step runs
	// again; the key opens the sentence that explains each.
	var cost []string
	if !st.Running && len(st.Cost) > 0 {
		cost = append(cost, s.Label.Render(ansi.Truncate("what it cost  ("+p.CostKey+" explains each number)", inner, "…")))
		for _, c := range st.Cost {
			cost = append(cost, ansi.Truncate(s.Label.Render(fit(c.Label, costLabelWidth, false)+" ")+s.Text.Render(c.Value), inner, "…"))
		}
		cost = append(cost, rule)
	}

	// The output of the step in focus fills what is left, newest last.
	show := focus
	if !st.Running && st.Steps[focus].State == step.Pending && focus > 0 {
		show = focus - 1
	}
	var lines []string
	if r := st.Steps[show]; r.State != step.Pending {
		lines = append(lines, s.Label.Render(ansi.Truncate(fmt.Sprintf("%d %s: %s", show+1, r.Title, r.Result), inner, "…")))
		for _, l := range r.Lines {
			lines = append(lines, wrapStyled(s.Text.Render, l, inner)...)
		}
		if r.Error != "" {
			lines = append(lines, wrapStyled(s.Err.Render, "error: "+r.Error, inner)...)
		}
	}
	out := append([]string{s.Title.Render(head)}, steps...)
	out = append(append(append(append(append(append(out, explain...), about...), look...), keys...), msg...), rule)
	out = append(out, cost...)
	if room := height - len(out); len(lines) > 0 && len(lines) > room && room < drillMinOutput {
		return drillShort(s, p, drillShortParts{head: s.Title.Render(head), show: show, focus: focus, explain: explain, about: about, keys: keys, msg: msg, lines: lines[1:], rule: rule}, width, height)
	}
	room := height - len(out)
	if room > 0 && len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	if room > 0 {
		out = append(out, lines...)
	}
	return drillBlock(out, width, height)
}

// drillShortParts are the pieces of the panel that a short panel keeps.
type drillShortParts struct {
	show, focus                      int
	explain, about, keys, msg, lines []string
	head, rule                       string
}

// drillShort draws a panel too short for the step list: the step just run
// with the newest lines of its output under it, then the step in focus
// with the start of its explanation, the keys, an error if there is one
// (the step's mark says it passed), and the numbers in one line (c
// explains them anyway).
func drillShort(s *Skin, p DrillPanel, pt drillShortParts, width, height int) string {
	st, inner := p.Status, width-2
	var below []string
	if pt.focus != pt.show {
		below = append(below, drillStepLine(s, st, pt.focus, inner))
	}
	explain := pt.explain
	if len(explain) > drillShortExplain {
		explain = append(slices.Clone(explain[:drillShortExplain-1]), ansi.Truncate(explain[drillShortExplain-1], inner-1, "")+s.Text.Render("…"))
	}
	below = append(append(append(below, explain...), pt.about...), pt.keys...)
	if p.MsgErr {
		below = append(below, pt.msg...)
	}
	if len(st.Cost) > 0 && !st.Running {
		below = append(below, drillCostLine(s, p, inner))
	}
	lines := pt.lines
	if room := max(height-3-len(below), 0); len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	out := append([]string{pt.head, drillStepLine(s, st, pt.show, inner)}, lines...)
	out = append(append(out, pt.rule), below...)
	return drillBlock(out, width, height)
}

// drillBlock is the panel's lines, each after a margin of one cell, in
// exactly width×height cells.
func drillBlock(out []string, width, height int) string {
	if len(out) > height {
		out = out[:height]
	}
	for i := range out {
		out[i] = " " + out[i]
	}
	return block(strings.Join(out, "\n"), width, height)
}

// drillShortExplain is how many lines of the step's explanation a short
// panel keeps.
const drillShortExplain = 2

// drillSteps is the step list, one line a step, and the rule below it.
func drillSteps(s *Skin, st step.Status, inner int) []string {
	var out []string
	for i := range st.Steps {
		out = append(out, drillStepLine(s, st, i, inner))
	}
	return append(out, s.Subtle.Render(strings.Repeat("─", inner)))
}

// drillStepLine is step i's line: its mark, number and title, styled by
// its state.
func drillStepLine(s *Skin, st step.Status, i, inner int) string {
	r := st.Steps[i]
	line := fmt.Sprintf("%s %d %s", drillMarker(r.State), i+1, r.Title)
	if r.State == step.Failed {
		line += " — failed"
	}
	line = ansi.Truncate(line, inner, "…")
	switch {
	case r.State == step.Failed:
		return s.Err.Render(line)
	case i == st.Current:
		return s.Accent.Render(line)
	case r.State == step.Passed:
		return s.OK.Render(line)
	}
	return s.Subtle.Render(line)
}

// drillCostLine is the numbers in one line, for a short panel.
func drillCostLine(s *Skin, p DrillPanel, inner int) string {
	var parts []string
	for _, c := range p.Status.Cost {
		parts = append(parts, c.Label+" "+c.Value)
	}
	return ansi.Truncate(s.Label.Render("cost ("+p.CostKey+"): ")+s.Text.Render(strings.Join(parts, ", ")), inner, "…")
}

// wrapStyled wraps text to width and styles each line.
func wrapStyled(style func(...string) string, text string, width int) []string {
	var out []string
	for _, l := range strings.Split(ansi.Wordwrap(text, width, " "), "\n") {
		out = append(out, style(ansi.Truncate(l, width, "…")))
	}
	return out
}

// drillNext is the drill's next action with its key.
func drillNext(s *Skin, p DrillPanel, focus int) string {
	st := p.Status
	switch {
	case st.Running:
		return s.Warn.Render("running " + st.Steps[focus].Title + "…")
	case st.Done():
		return s.Subtle.Render("every step has run")
	case st.Steps[focus].NeedsConfirm():
		return s.HelpKey.Render(p.ConfirmKey) + " " + s.Text.Render(fmt.Sprintf("done: tick step %d", focus+1)) +
			"  " + s.HelpKey.Render(p.NoteKey) + " " + s.Text.Render("note")
	}
	verb := "run"
	if st.Steps[focus].State == step.Failed {
		verb = "retry"
	}
	return s.HelpKey.Render(p.NextKey) + " " + s.Text.Render(fmt.Sprintf("%s step %d", verb, focus+1)) +
		"  " + s.HelpKey.Render(p.NoteKey) + " " + s.Text.Render("note")
}

// RenderDrillStrip is the drill in one line, for a terminal too small for
// the panel (or an operator who hid it): the step, the next action and the
// key that brings the panel back, so the drill never vanishes silently.
// A message (a failed step's error) replaces the step title.
func RenderDrillStrip(s *Skin, p DrillPanel, width int) string {
	st := p.Status
	if len(st.Steps) == 0 {
		return block("", width, 1)
	}
	focus := min(st.Current, len(st.Steps)-1)
	head := s.Title.Render(fmt.Sprintf(" DR DRILL %d/%d ", focus+1, len(st.Steps)))
	what := s.Accent.Render(st.Steps[focus].Title)
	switch {
	case st.Done():
		head, what = s.Title.Render(" DR DRILL complete "), s.Subtle.Render("")
	case p.Editing && p.Prompt != nil:
		what = p.Prompt.View(s, "note: ", width/3)
	case p.Message != "" && p.MsgErr:
		what = s.StatusError.Render(p.Message)
	case st.Steps[focus].State == step.Failed:
		what = s.Err.Render(st.Steps[focus].Title + " failed")
	}
	tail := "  " + s.HelpKey.Render(p.PanelKey) + " " + s.Subtle.Render("panel")
	room := max(width-ansi.StringWidth(head)-ansi.StringWidth(tail), 0)
	mid := ansi.Truncate(what+"  "+drillNext(s, p, focus), room, "…")
	return block(head+mid+strings.Repeat(" ", max(room-ansi.StringWidth(mid), 0))+tail, width, 1)
}

// costLabelWidth is the label column of the drill's numbers.
const costLabelWidth = 17

// RenderDrillCost explains each number the drill measured: the number, and
// one sentence on what it means for the business and what would shrink it.
// The result is width cells wide; the caller draws the box.
func RenderDrillCost(s *Skin, st step.Status, closeKey string, width int) string {
	out := []string{s.Title.Render("What the failover cost") + s.Subtle.Render("   (esc or "+closeKey+" closes)")}
	if len(st.Cost) == 0 {
		out = append(out, wrapStyled(s.Subtle.Render, "Nothing measured yet: the numbers come with the outage, the verify step and the failback rehearsal.", width)...)
	}
	for _, c := range st.Cost {
		// The number leads its sentence, so each takes as few lines as
		// its words need.
		para := s.Label.Render(c.Label+":") + " " + s.Title.Render(c.Value) + s.Text.Render(" — "+c.Meaning)
		out = append(out, strings.Split(ansi.Wordwrap(para, width, " "), "\n")...)
	}
	return strings.Join(out, "\n")
}
