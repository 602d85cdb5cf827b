package tui

import (
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/views"
)

// confirmDialog guards a dangerous action. It names exactly what will be
// affected and holds the commands it will send; nothing is sent unless the
// operator confirms. With require set, confirming means typing that text
// (the mirror name) and enter; otherwise y confirms and n or esc cancels.
type confirmDialog struct {
	title    string
	intro    string   // what the action does
	items    []string // exactly what it applies to, one line each
	total    string   // the exact totals, always shown even if items are cut
	require  string   // text to type, "" for y/n
	verb     string   // what y does: "stop", "rebuild"
	prompt   views.Prompt
	mismatch bool
	cmds     []engine.Command
	quit     bool // confirming quits the console (and its instance); cmds is empty
}

// dialogResult is what a key did to the dialog.
type dialogResult int8

const (
	dialogOpen dialogResult = iota
	dialogConfirmed
	dialogCancelled
)

// String names the result.
func (r dialogResult) String() string {
	switch r {
	case dialogOpen:
		return "open"
	case dialogConfirmed:
		return "confirmed"
	case dialogCancelled:
		return "cancelled"
	}
	return "unknown"
}

func (d *confirmDialog) update(k tea.KeyPressMsg) dialogResult {
	if d.require == "" {
		switch k.String() {
		case "y", "Y":
			return dialogConfirmed
		case "n", "N", "esc":
			return dialogCancelled
		}
		return dialogOpen
	}
	switch d.prompt.Update(k) {
	case views.PromptCancelled:
		return dialogCancelled
	case views.PromptSubmitted:
		if d.prompt.Value() == d.require {
			return dialogConfirmed
		}
		d.mismatch = true
	case views.PromptEditing:
		d.mismatch = false
	}
	return dialogOpen
}

// paste types pasted text into a typed confirmation; a y/n dialog takes
// no paste, so pasted text can never answer it.
func (d *confirmDialog) paste(p tea.PasteMsg) {
	if d.require == "" {
		return
	}
	d.prompt.Update(p)
	d.mismatch = false
}

// view renders the dialog's content for an inner width, cutting the item
// list (never the totals or the question) to fit maxLines.
func (d *confirmDialog) view(skin *views.Skin, width, maxLines int) string {
	wrap := func(s string) []string { return strings.Split(ansi.Wrap(s, width, " ,"), "\n") }
	head := []string{skin.DialogTitle.Render(d.title), ""}
	head = append(head, wrap(d.intro)...)
	var tail []string
	tail = append(tail, "", skin.Text.Bold(true).Render(d.total), "")
	if d.require == "" {
		tail = append(tail, skin.Danger.Render("[y] "+d.verb)+skin.Text.Render("   [n] cancel"))
	} else {
		tail = append(tail, wrap(skin.Text.Render("Type ")+skin.Danger.Render(d.require)+skin.Text.Render(" and press enter to "+d.verb+"; esc cancels."))...)
		tail = append(tail, d.prompt.View(skin, "> ", width))
		if d.mismatch {
			tail = append(tail, skin.StatusError.Render(fmt.Sprintf("%q does not match %q: nothing was sent", d.prompt.Value(), d.require)))
		}
	}
	var items []string
	for _, it := range d.items {
		items = append(items, wrap("  "+it)...)
	}
	room := maxLines - len(head) - len(tail)
	if len(items) > room {
		cut := max(room-1, 0)
		items = append(items[:cut:cut], skin.Subtle.Render(fmt.Sprintf("  … %d more lines (the totals below are exact)", len(items)-cut)))
	}
	lines := append(append(head, items...), tail...)
	return strings.Join(lines, "\n")
}

// commandsFor builds one engine command per target.
func commandsFor(kind engine.CommandKind, rebuild bool, targets []views.Target) []engine.Command {
	out := make([]engine.Command, 0, len(targets))
	for _, t := range targets {
		out = append(out, engine.Command{Kind: kind, Mirror: t.Mirror, Topics: t.Topics, Rebuild: rebuild})
	}
	return out
}

func totals(targets []views.Target) (topics, parts int) {
	for _, t := range targets {
		topics += len(t.Topics)
		parts += t.Partitions
	}
	return topics, parts
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func itoa(n int) string { return strconv.Itoa(n) }

func topicItems(targets []views.Target) []string {
	var out []string
	for _, t := range targets {
		out = append(out, "mirror "+t.Mirror+": "+strings.Join(t.Topics, ", "))
	}
	return out
}

func newStopDialog(targets []views.Target) *confirmDialog {
	topics, parts := totals(targets)
	return &confirmDialog{
		title: "Stop mirroring (failover)",
		intro: "Stops mirroring every partition of these topics. Their last mirrored offsets are " +
			"recorded, open mirrored transactions are aborted, and the destination topics become " +
			"writable so clients can fail over:",
		items: topicItems(targets),
		total: "Total: " + plural(topics, "topic", "topics") + ", " + plural(parts, "partition", "partitions") + ".",
		verb:  "stop",
		cmds:  commandsFor(engine.CmdStop, false, targets),
	}
}

func newStopMirrorDialog(t views.Target) *confirmDialog {
	return &confirmDialog{
		title: "Stop the whole mirror " + t.Mirror + " (failover)",
		intro: "Stops mirroring every topic of mirror " + t.Mirror + ". Last mirrored offsets are " +
			"recorded, open mirrored transactions are aborted, and every destination topic of the " +
			"mirror becomes writable.",
		total:   "Total: all " + plural(t.Partitions, "partition", "partitions") + " of mirror " + t.Mirror + ".",
		require: t.Mirror,
		verb:    "stop the mirror",
		cmds:    commandsFor(engine.CmdStop, false, []views.Target{t}),
	}
}

func newRebuildDialog(targets []views.Target) *confirmDialog {
	topics, parts := totals(targets)
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Mirror
	}
	return &confirmDialog{
		title: "Recover with rebuild (destructive)",
		intro: "For diverged partitions of these topics, the destination-only records are copied to a " +
			"quarantine topic, then the destination topic is deleted, recreated and mirrored again " +
			"from the source. Consumers of these topics on the destination see the topic recreated:",
		items:   topicItems(targets),
		total:   "Total: " + plural(topics, "topic", "topics") + ", " + plural(parts, "partition", "partitions") + ".",
		require: strings.Join(names, ", "),
		verb:    "rebuild",
		cmds:    commandsFor(engine.CmdRecover, true, targets),
	}
}
