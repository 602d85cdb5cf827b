package views

import (
	"strings"

	"github.com/kmirror/kmirror/keymap"
)

const helpKeyWidth = 10

// HelpInfo is what the help overlay says besides the keys.
type HelpInfo struct {
	Screen   string // the screen whose keys are listed
	ReadOnly bool
	LogPath  string
	Theme    string
}

// RenderHelp lists entries (the current screen's keys, from the key table,
// and the drill panel's while it is shown) in two columns: actions, views
// and general keys on the left, navigation and the drill on the right.
// Dangerous keys are marked with "!" as text, not only colour. The result
// is at most width cells wide; the caller draws the box.
func RenderHelp(skin *Skin, entries []keymap.Entry, info HelpInfo, width int) string {
	s := skin
	byGroup := map[keymap.Group][]keymap.Entry{}
	danger := false
	for _, e := range entries {
		byGroup[e.Group] = append(byGroup[e.Group], e)
		danger = danger || e.Dangerous
	}
	section := func(g keymap.Group, colW int) []string {
		es := byGroup[g]
		if len(es) == 0 {
			return nil
		}
		out := []string{s.Title.Render(g.String())}
		for _, e := range es {
			h := e.Binding.Help()
			keyStyle, mark := s.HelpKey, "  "
			if e.Dangerous {
				keyStyle, mark = s.HelpDangerKey, s.Danger.Render("!")+" "
			}
			desc := fit(h.Desc, max(colW-helpKeyWidth-3, 4), false)
			out = append(out, mark+keyStyle.Render(fit(h.Key, helpKeyWidth, false))+" "+s.HelpDesc.Render(strings.TrimRight(desc, " ")))
		}
		return out
	}

	twoCols := width >= 64
	colW := width
	if twoCols {
		colW = (width - 2) / 2
	}
	var left, right []string
	for _, g := range []keymap.Group{keymap.GroupActions, keymap.GroupViews, keymap.GroupGeneral} {
		if sec := section(g, colW); sec != nil {
			if len(left) > 0 {
				left = append(left, "")
			}
			left = append(left, sec...)
		}
	}
	// The drill panel's keys go under navigation, where the right column
	// has room even at 80×24.
	nav := section(keymap.GroupNavigation, colW)
	if dr := section(keymap.GroupDrill, colW); dr != nil {
		nav = append(append(nav, ""), dr...)
	}
	if twoCols {
		right = nav
	} else {
		left = append(append(left, ""), nav...)
	}

	var b strings.Builder
	b.WriteString(s.Title.Render("Keys — "+info.Screen+" view") + s.Subtle.Render("   (esc or ? closes)"))
	for i := 0; i < max(len(left), len(right)); i++ {
		b.WriteByte('\n')
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		if twoCols {
			b.WriteString(fit(l, colW, false) + "  " + r)
		} else {
			b.WriteString(l)
		}
	}
	b.WriteString("\n")
	if danger {
		b.WriteString("\n" + s.Danger.Render("!") + s.Text.Render(" asks for confirmation before it acts"))
	}
	if info.ReadOnly {
		b.WriteString("\n" + s.Badge.Render(" READ-ONLY ") + s.Text.Render(" actions are disabled in this session"))
	}
	logLine := "log file: " + info.LogPath
	if info.LogPath == "" {
		logLine = "log file: none (logging disabled)"
	}
	if info.Theme != "" {
		logLine += "   theme: " + info.Theme
	}
	b.WriteString("\n" + s.Subtle.Render(logLine))
	return b.String()
}
