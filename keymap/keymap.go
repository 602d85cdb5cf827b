// Package keymap is the console's single key table. The same table decides
// which key does what, what the "?" overlay lists for the current view, and
// the Markdown key table in docs/console.md, so the three can never disagree.
package keymap

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// Action is what a key asks the console to do.
type Action int8

const (
	None Action = iota
	Up
	Down
	PageUp
	PageDown
	Top
	Bottom
	Mark
	Filter
	Sort
	TopicSort
	Detail
	Back
	NextView
	PrevView
	JumpView
	Command
	Help
	TickFaster
	TickSlower
	Quit
	Pause
	Resume
	Recover
	Rebuild
	Stop
	StopMirror
	DrillNext
	DrillConfirm
	DrillNote
	DrillPanel
	DrillCost
)

// String names the action (used in tests and status messages).
func (a Action) String() string {
	switch a {
	case None:
		return "none"
	case Up:
		return "up"
	case Down:
		return "down"
	case PageUp:
		return "page-up"
	case PageDown:
		return "page-down"
	case Top:
		return "top"
	case Bottom:
		return "bottom"
	case Mark:
		return "mark"
	case Filter:
		return "filter"
	case Sort:
		return "sort"
	case TopicSort:
		return "topic-sort"
	case Detail:
		return "detail"
	case Back:
		return "back"
	case NextView:
		return "next-view"
	case PrevView:
		return "prev-view"
	case JumpView:
		return "jump-view"
	case Command:
		return "command"
	case Help:
		return "help"
	case TickFaster:
		return "tick-faster"
	case TickSlower:
		return "tick-slower"
	case Quit:
		return "quit"
	case Pause:
		return "pause"
	case Resume:
		return "resume"
	case Recover:
		return "recover"
	case Rebuild:
		return "rebuild"
	case Stop:
		return "stop"
	case StopMirror:
		return "stop-mirror"
	case DrillNext:
		return "drill-next"
	case DrillConfirm:
		return "drill-confirm"
	case DrillNote:
		return "drill-note"
	case DrillPanel:
		return "drill-panel"
	case DrillCost:
		return "drill-cost"
	}
	return "unknown"
}

// Group is the heading an entry is listed under in help.
type Group int8

const (
	GroupActions Group = iota
	GroupNavigation
	GroupViews
	GroupGeneral
	GroupDrill
)

// Groups lists the help headings in display order.
var Groups = []Group{GroupActions, GroupNavigation, GroupViews, GroupGeneral, GroupDrill}

// String returns the help heading.
func (g Group) String() string {
	switch g {
	case GroupActions:
		return "Actions"
	case GroupNavigation:
		return "Navigation"
	case GroupViews:
		return "Views"
	case GroupGeneral:
		return "General"
	case GroupDrill:
		return "DR drill"
	}
	return "Other"
}

// Scope is a set of console screens an entry works in. It is a bit set so one
// entry can belong to several screens; "?" shows only the current screen's.
// ScopeDrill is the DR drill panel: its keys work on every screen while the
// panel is shown, and "?" lists them then.
type Scope uint8

const (
	ScopeMirrors Scope = 1 << iota
	ScopePartitions
	ScopeDetail
	ScopeEvents
	ScopeGroups
	ScopeDrill
	ScopeTopics

	ScopeAll   = ScopeMirrors | ScopeTopics | ScopePartitions | ScopeDetail | ScopeEvents | ScopeGroups
	scopeLists = ScopeMirrors | ScopeTopics | ScopePartitions | ScopeEvents
)

// Screens lists the single scopes of the console's screens, in tab order
// (detail after the partitions it belongs to).
var Screens = []Scope{ScopeMirrors, ScopeTopics, ScopePartitions, ScopeDetail, ScopeEvents, ScopeGroups}

// String names a single scope (a set prints its members joined by "|").
func (s Scope) String() string {
	switch s {
	case ScopeMirrors:
		return "mirrors"
	case ScopeTopics:
		return "topics"
	case ScopePartitions:
		return "partitions"
	case ScopeDetail:
		return "detail"
	case ScopeEvents:
		return "events"
	case ScopeGroups:
		return "groups"
	case ScopeDrill:
		return "drill panel"
	case ScopeAll:
		return "all"
	case scopeLists: // a set like any other: its members, below
	}
	out := ""
	for _, one := range append(Screens, ScopeDrill) {
		if s&one != 0 {
			if out != "" {
				out += "|"
			}
			out += one.String()
		}
	}
	return out
}

// Entry is one row of the key table.
type Entry struct {
	Action  Action
	Binding key.Binding
	Group   Group
	Scope   Scope
	// Mutating entries send a command to the engine; read-only mode drops
	// them, because read-only means the console takes no action at all.
	Mutating bool
	// Dangerous entries stop mirroring or destroy data; they always open a
	// confirmation dialog and are marked in help.
	Dangerous bool
	// Note says what the confirmation asks for, shown in docs/console.md.
	Note string
	// Long is the docs/console.md description; the binding's help text is the short
	// one that fits the help overlay.
	Long string
}

// entry builds a table row; desc is short enough for the help overlay at
// 80 columns, long (optional) is the docs/console.md wording.
func entry(a Action, g Group, s Scope, keys []string, helpKey, desc, long string) Entry {
	if long == "" {
		long = desc
	}
	return Entry{
		Action:  a,
		Binding: key.NewBinding(key.WithKeys(keys...), key.WithHelp(helpKey, desc)),
		Group:   g,
		Scope:   s,
		Long:    long,
	}
}

func mutating(e Entry) Entry { e.Mutating = true; return e }

func dangerous(e Entry, note string) Entry {
	e.Mutating, e.Dangerous, e.Note = true, true, note
	return e
}

// Table returns the full key table, including the entries read-only mode
// removes. It is built fresh on each call so callers cannot change a shared
// copy.
func Table() []Entry {
	const target = ScopeTopics | ScopePartitions | ScopeDetail
	const targetOrMirror = ScopeMirrors | target
	const nav = ScopeAll
	const lists = scopeLists | ScopeGroups
	return []Entry{
		mutating(entry(Pause, GroupActions, targetOrMirror, []string{"p"}, "p", "pause topics",
			"pause the selected or marked topics (mirrors view: the whole mirror)")),
		mutating(entry(Resume, GroupActions, targetOrMirror, []string{"r"}, "r", "resume topics",
			"resume the selected or marked topics (mirrors view: the whole mirror)")),
		mutating(entry(Recover, GroupActions, targetOrMirror, []string{"R"}, "R", "recover FAILED",
			"recover FAILED partitions of the selected or marked topics (mirrors view: the whole mirror)")),
		dangerous(entry(Rebuild, GroupActions, target, []string{"B"}, "B", "recover with rebuild",
			"recover with rebuild: quarantine destination-only records, recreate and re-mirror diverged topics"),
			"type the mirror name"),
		dangerous(entry(Stop, GroupActions, target, []string{"s"}, "s", "stop/failover topics",
			"stop mirroring the selected or marked topics (failover: they become writable)"),
			"confirm y/n"),
		dangerous(entry(StopMirror, GroupActions, targetOrMirror, []string{"S"}, "S", "stop/failover mirror",
			"stop mirroring every topic of the mirror (failover)"),
			"type the mirror name"),

		entry(Up, GroupNavigation, nav, []string{"up", "k"}, "↑/k", "up", ""),
		entry(Down, GroupNavigation, nav, []string{"down", "j"}, "↓/j", "down", ""),
		entry(PageUp, GroupNavigation, nav, []string{"pgup"}, "pgup", "page up", ""),
		entry(PageDown, GroupNavigation, nav, []string{"pgdown"}, "pgdn", "page down", ""),
		entry(Top, GroupNavigation, nav, []string{"home", "g"}, "home/g", "first row", ""),
		entry(Bottom, GroupNavigation, nav, []string{"end", "G"}, "end/G", "last row / follow",
			"last row (events view: follow new events)"),
		entry(Mark, GroupNavigation, ScopePartitions, []string{"space"}, "space", "mark/unmark row",
			"mark or unmark the row; actions then apply to the marked rows' topics"),
		entry(Filter, GroupNavigation, lists, []string{"/"}, "/", "filter (regex, !re)",
			"filter the list by regular expression (RE2): topics, mirror names, events, group names; `!re` hides what matches; enter keeps it, esc restores the previous one"),
		entry(Sort, GroupNavigation, ScopePartitions, []string{"o"}, "o", "sort: topic/lag/state",
			"cycle the sort order: topic, lag (largest first), state (failures first)"),
		entry(TopicSort, GroupNavigation, ScopeTopics, []string{"o"}, "o", "cycle the sort order",
			"cycle the topics order: name, then worst first by lag, lag time, catch-up ETA, failed partitions"),
		entry(Detail, GroupNavigation, ScopeMirrors|ScopeTopics|ScopePartitions, []string{"enter"}, "enter", "open",
			"open the partition detail (topics view: that topic's partitions; mirrors view: that mirror's partitions)"),
		entry(Back, GroupNavigation, ScopeAll, []string{"esc"}, "esc", "back / clear",
			"back out: closes the prompt, dialog, help or detail; then clears the filter, then the marks, then the mirror scope; partitions opened from the topics view go back to it"),

		entry(NextView, GroupViews, ScopeAll, []string{"tab"}, "tab", "next view", ""),
		entry(PrevView, GroupViews, ScopeAll, []string{"shift+tab"}, "shift+tab", "previous view", ""),
		entry(JumpView, GroupViews, ScopeAll, []string{"1", "2", "3", "4", "5"}, "1-5", "jump to a view",
			"jump to a view by its tab number: 1 mirrors, 2 topics, 3 partitions, 4 events, 5 groups"),
		entry(Command, GroupViews, ScopeAll, []string{":"}, ":", "command line",
			"command line: :mirrors :topics :partitions :events :groups :help :quit"),

		entry(Help, GroupGeneral, ScopeAll, []string{"?"}, "?", "show/hide help", ""),
		entry(TickFaster, GroupGeneral, ScopeAll, []string{"+"}, "+", "refresh faster",
			"refresh more often (down to every 250ms)"),
		entry(TickSlower, GroupGeneral, ScopeAll, []string{"-"}, "-", "refresh slower",
			"refresh less often (up to every 10s)"),
		entry(Quit, GroupGeneral, ScopeAll, []string{"q", "ctrl+c"}, "q/ctrl+c", "quit",
			"quit the console (an in-process engine stops with it)"),

		// The drill panel's keys act on every screen while it is shown, so
		// they must not collide with any screen's keys (space marks rows).
		mutating(entry(DrillNext, GroupDrill, ScopeDrill, []string{"n"}, "n", "run the next step",
			"run the drill's next step, or retry a failed one (the failover step stops the mirror)")),
		mutating(entry(DrillConfirm, GroupDrill, ScopeDrill, []string{"x"}, "x", "tick: I did it",
			"tick the step's instruction as done (real clusters: the outage, the client switch) and run the step")),
		entry(DrillNote, GroupDrill, ScopeDrill, []string{"i"}, "i", "note for the report",
			"write a note for the drill report; it is kept with the next step that runs"),
		entry(DrillPanel, GroupDrill, ScopeDrill, []string{"d"}, "d", "panel / one-line strip",
			"switch between the drill panel and a one-line strip (step, next action); a terminal too small for the panel starts with the strip"),
		entry(DrillCost, GroupDrill, ScopeDrill, []string{"c"}, "c", "what it cost",
			"explain each number the drill measured in one sentence: what it means for the business and what would shrink it (esc or c closes)"),
	}
}

// KeyMap is the table as one console session uses it.
type KeyMap struct {
	entries  []Entry
	readOnly bool
}

// New returns the key map; with readOnly every mutating entry is gone, so
// its key does nothing and help does not list it.
func New(readOnly bool) KeyMap {
	var es []Entry
	for _, e := range Table() {
		if readOnly && e.Mutating {
			continue
		}
		es = append(es, e)
	}
	return KeyMap{entries: es, readOnly: readOnly}
}

// ReadOnly reports whether actions were removed.
func (k KeyMap) ReadOnly() bool { return k.readOnly }

// Entries returns the active entries in table order.
func (k KeyMap) Entries() []Entry { return append([]Entry(nil), k.entries...) }

// ForScope returns the active entries that work in scope s.
func (k KeyMap) ForScope(s Scope) []Entry {
	var out []Entry
	for _, e := range k.entries {
		if e.Scope&s != 0 {
			out = append(out, e)
		}
	}
	return out
}

// Match returns the action msg triggers in scope s, or None.
func (k KeyMap) Match(msg tea.KeyPressMsg, s Scope) Action {
	for _, e := range k.entries {
		if e.Scope&s != 0 && key.Matches(msg, e.Binding) {
			return e.Action
		}
	}
	return None
}

// Lookup returns the entry for a, if the action is active.
func (k KeyMap) Lookup(a Action) (Entry, bool) {
	for _, e := range k.entries {
		if e.Action == a {
			return e, true
		}
	}
	return Entry{}, false
}
