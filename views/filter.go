package views

import (
	"regexp"
	"strings"

	tea "charm.land/bubbletea/v2"
)

// Filter is the "/" filter every list shares: an RE2 expression, or "!re"
// to hide what matches. While it is edited each keystroke applies it; an
// invalid expression is reported and the previous filter stays in force, so
// a typo mid-drill never blanks the list.
type Filter struct {
	prompt  Prompt
	editing bool
	before  string // text when editing started, restored by esc

	text    string // the applied text, "!" included
	re      *regexp.Regexp
	exclude bool
	err     string
}

// FilterEvent says what a message did to the filter while it is edited.
type FilterEvent int8

const (
	FilterUnchanged FilterEvent = iota
	FilterChanged               // the applied filter changed: re-filter
	FilterClosed                // editing ended (the filter may have changed too)
)

// String names the event.
func (e FilterEvent) String() string {
	switch e {
	case FilterUnchanged:
		return "unchanged"
	case FilterChanged:
		return "changed"
	case FilterClosed:
		return "closed"
	}
	return "unknown"
}

// Open starts editing with the applied text.
func (f *Filter) Open() {
	f.editing, f.before = true, f.text
	f.prompt.SetValue(f.text)
}

// Editing reports whether the prompt is open.
func (f *Filter) Editing() bool { return f.editing }

// Text returns the applied filter ("" when none).
func (f *Filter) Text() string { return f.text }

// Err returns why the typed expression is not applied.
func (f *Filter) Err() string { return f.err }

// Active reports whether rows are being filtered.
func (f *Filter) Active() bool { return f.re != nil }

// Match reports whether a row described by s is shown.
func (f *Filter) Match(s string) bool {
	if f.re == nil {
		return true
	}
	return f.re.MatchString(s) != f.exclude
}

// Set applies text; it reports whether the applied filter changed.
func (f *Filter) Set(text string) bool {
	if text == "" || text == "!" {
		// A lone "!" is an exclusion not typed yet: show everything.
		changed := f.re != nil
		f.text, f.re, f.exclude, f.err = "", nil, false, ""
		return changed
	}
	exclude := strings.HasPrefix(text, "!")
	re, err := regexp.Compile(strings.TrimPrefix(text, "!"))
	if err != nil {
		f.err = "invalid regular expression: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ")
		return false
	}
	changed := text != f.text
	f.text, f.re, f.exclude, f.err = text, re, exclude, ""
	return changed
}

// Clear removes the filter; it reports whether there was one.
func (f *Filter) Clear() bool { return f.Set("") }

// Update applies a key press or a paste while editing: enter keeps a valid
// filter, esc restores the one in force before.
func (f *Filter) Update(msg tea.Msg) FilterEvent {
	switch f.prompt.Update(msg) {
	case PromptSubmitted:
		if f.err != "" {
			return FilterUnchanged
		}
		f.editing = false
		return FilterClosed
	case PromptCancelled:
		f.editing = false
		f.err = ""
		f.Set(f.before)
		return FilterClosed
	case PromptEditing:
	}
	if f.Set(f.prompt.Value()) {
		return FilterChanged
	}
	return FilterUnchanged
}

// PromptLine renders the open prompt with its error or hint.
func (f *Filter) PromptLine(s *Skin, width int) string {
	line := f.prompt.View(s, "/", width/2)
	if f.err != "" {
		return line + "  " + s.StatusError.Render(f.err)
	}
	return line + "  " + s.Subtle.Render("!re hides matches; enter keeps, esc restores")
}

// Label renders the applied filter for an info line, "" when none.
func (f *Filter) Label(s *Skin) string {
	if f.re == nil {
		return ""
	}
	shown := "/" + strings.TrimPrefix(f.text, "!") + "/"
	if f.exclude {
		shown = "not " + shown
	}
	return s.Label.Render("filter ") + s.Accent.Render(shown)
}
