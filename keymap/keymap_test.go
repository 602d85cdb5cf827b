package keymap

import (
	"flag"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/kmirror/kmirror/internal/docgen"
)

func press(s string) tea.KeyPressMsg {
	switch s {
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

func TestEveryActionHasOneEntry(t *testing.T) {
	seen := map[Action]int{}
	for _, e := range Table() {
		seen[e.Action]++
		if e.Action.String() == "unknown" {
			t.Errorf("action %d has no name", e.Action)
		}
		if h := e.Binding.Help(); h.Key == "" || h.Desc == "" {
			t.Errorf("%s: missing help text", e.Action)
		}
	}
	for a := Up; a <= DrillNote; a++ {
		if seen[a] != 1 {
			t.Errorf("%s: %d entries, want 1", a, seen[a])
		}
	}
}

// TestNoKeyConflictsWithinAScope also checks each screen together with the
// drill panel, whose keys work on every screen while it is shown.
func TestNoKeyConflictsWithinAScope(t *testing.T) {
	for _, s := range Screens {
		owner := map[string]Action{}
		for _, e := range New(false).ForScope(s | ScopeDrill) {
			for _, k := range e.Binding.Keys() {
				if prev, ok := owner[k]; ok {
					t.Errorf("scope %s: key %q bound to %s and %s", s, k, prev, e.Action)
				}
				owner[k] = e.Action
			}
		}
	}
}

func TestDangerousEntriesAreMutatingAndExplained(t *testing.T) {
	want := map[Action]bool{Stop: true, StopMirror: true, Rebuild: true}
	for _, e := range Table() {
		if e.Dangerous != want[e.Action] {
			t.Errorf("%s: dangerous=%v, want %v", e.Action, e.Dangerous, want[e.Action])
		}
		if e.Dangerous && (!e.Mutating || e.Note == "") {
			t.Errorf("%s: dangerous entries must be mutating and say what confirmation they need", e.Action)
		}
	}
}

func TestReadOnlyRemovesEveryAction(t *testing.T) {
	ro := New(true)
	for _, e := range ro.Entries() {
		if e.Mutating {
			t.Errorf("read-only key map still has %s", e.Action)
		}
	}
	for _, k := range []string{"p", "r", "R", "B", "s", "S"} {
		if a := ro.Match(press(k), ScopeAll); a != None {
			t.Errorf("read-only: key %q matched %s", k, a)
		}
	}
	if _, ok := ro.Lookup(Stop); ok {
		t.Error("read-only: Lookup(Stop) found an entry")
	}
	if !ro.ReadOnly() {
		t.Error("ReadOnly() = false")
	}
}

func TestMatchRespectsScope(t *testing.T) {
	km := New(false)
	cases := []struct {
		key   string
		scope Scope
		want  Action
	}{
		{"s", ScopePartitions, Stop},
		{"s", ScopeMirrors, None}, // a mirror-wide stop is S, with its typed confirmation
		{"S", ScopeMirrors, StopMirror},
		{"p", ScopeMirrors, Pause},
		{"p", ScopeEvents, None},
		{"space", ScopePartitions, Mark},
		{"/", ScopePartitions, Filter},
		{"o", ScopePartitions, Sort},
		{"o", ScopeTopics, TopicSort},
		{"enter", ScopeTopics, Detail},
		{"space", ScopeTopics, None}, // topic rows are not marked
		{"enter", ScopePartitions, Detail},
		{"esc", ScopeDetail, Back},
		{"tab", ScopeEvents, NextView},
		{"?", ScopeGroups, Help},
		{"+", ScopeAll, TickFaster},
		{"-", ScopeAll, TickSlower},
		{"q", ScopeDetail, Quit},
		{"ctrl+c", ScopeDetail, Quit},
		{"j", ScopeEvents, Down},
		{"n", ScopeDrill, DrillNext},
		{"x", ScopeDrill, DrillConfirm},
		{"i", ScopeDrill, DrillNote},
		{"n", ScopePartitions, None}, // only with the drill panel
		{"space", ScopeDrill, None},  // space marks rows; the drill ticks with x
	}
	for _, c := range cases {
		if got := km.Match(press(c.key), c.scope); got != c.want {
			t.Errorf("Match(%q, %s) = %s, want %s", c.key, c.scope, got, c.want)
		}
	}
}

func TestMarkdownTableListsEveryKey(t *testing.T) {
	md := MarkdownTable()
	if !strings.HasPrefix(md, "| Key | Does | Views | Notes |\n|---|---|---|---|\n") {
		t.Fatalf("unexpected table head:\n%s", md)
	}
	rows := strings.Count(md, "\n") - 2
	if rows != len(Table()) {
		t.Errorf("%d rows, want %d", rows, len(Table()))
	}
	for _, want := range []string{
		"| `s` | stop mirroring the selected or marked topics (failover: they become writable) | topics, partitions, detail | **dangerous**: confirm y/n; hidden with `--read-only` |",
		"| `S` | stop mirroring every topic of the mirror (failover) | mirrors, topics, partitions, detail | **dangerous**: type the mirror name; hidden with `--read-only` |",
		"| `/` | filter the list by regular expression (RE2): topics, mirror names, events, group names; `!re` hides what matches; enter keeps it, esc restores the previous one | mirrors, topics, partitions, events, groups |  |",
		"| `esc` | back out: closes the prompt, dialog, help or detail; then clears the filter, then the marks, then the mirror scope; partitions opened from the topics view go back to it | all |  |",
		"| `q` / `ctrl+c` |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestScopeString(t *testing.T) {
	if got := (ScopeMirrors | ScopeEvents).String(); got != "mirrors|events" {
		t.Errorf("got %q", got)
	}
	if ScopeAll.String() != "all" {
		t.Errorf("ScopeAll = %q", ScopeAll.String())
	}
}

var updateDocs = flag.Bool("update", false, "rewrite the key table in docs/console.md from the key table")

// TestDocsConsoleKeys checks the key table of docs/console.md is exactly
// MarkdownTable; regenerate it with
//
//	go test ./keymap -run TestDocs -update
func TestDocsConsoleKeys(t *testing.T) {
	docgen.Check(t, "../docs/console.md", "console-keys", MarkdownTable(), *updateDocs, "go test ./keymap -run TestDocs -update")
	for _, want := range []string{"| `n` | run the drill's next step", "| `x` | tick the step's instruction", "| `i` | write a note for the drill report"} {
		if !strings.Contains(MarkdownTable(), want) {
			t.Errorf("the key table lacks %q", want)
		}
	}
}
