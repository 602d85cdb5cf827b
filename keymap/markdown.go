package keymap

//go:generate go test . -run TestDocs -update

import (
	"strings"
)

// MarkdownTable renders the whole key table (read-only entries included, and
// marked) as a Markdown table for docs/console.md. It comes from Table, like the
// keys and the help overlay, so the docs cannot drift from the console.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Key | Does | Views | Notes |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, g := range Groups {
		for _, e := range Table() {
			if e.Group != g {
				continue
			}
			h := e.Binding.Help()
			var notes []string
			if e.Dangerous {
				notes = append(notes, "**dangerous**: "+e.Note)
			}
			if e.Mutating {
				notes = append(notes, "hidden with `--read-only`")
			}
			b.WriteString("| ")
			b.WriteString(mdCode(h.Key))
			b.WriteString(" | ")
			b.WriteString(mdEscape(e.Long))
			b.WriteString(" | ")
			b.WriteString(strings.ReplaceAll(e.Scope.String(), "|", ", "))
			b.WriteString(" | ")
			b.WriteString(strings.Join(notes, "; "))
			b.WriteString(" |\n")
		}
	}
	return b.String()
}

// mdCode renders "q/ctrl+c" as `q` / `ctrl+c`; a lone "/" stays one key.
func mdCode(keys string) string {
	if keys == "/" {
		return "`/`"
	}
	parts := strings.Split(keys, "/")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, " / ")
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
