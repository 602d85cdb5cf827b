package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// The docs tests keep README.md and docs/ true of the code: the generated
// tables have their own tests (engine/props, keymap); these check what is
// written by hand against what the code names.

// pendingDocs are pages the README and the index link to that another
// change writes. A missing one is allowed; one that exists is checked like
// any other page, and must then be removed from here.
var pendingDocs = []string{}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docPages are README.md and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocsReadme: the README stays short and starts with the two commands a
// newcomer runs, the test command being .ci/run's.
func TestDocsReadme(t *testing.T) {
	readme := readDoc(t, "README.md")
	if len(readme) > 10*1024 {
		t.Errorf("README.md is %d bytes; keep it at 10 KB or less and move detail into docs/", len(readme))
	}
	ci := readDoc(t, ".ci/run")
	goTest := regexp.MustCompile(`(?m)^go test -race [^\n]*\./\.\.\.$`).FindString(ci)
	pkgs := regexp.MustCompile(`apt-get install -y -qq ([a-z0-9 .+-]+?) >`).FindStringSubmatch(ci)
	if goTest == "" || pkgs == nil {
		t.Fatalf(".ci/run has no go test or apt-get install line:\n%s", ci)
	}
	lines := strings.Split(readme, "\n")
	if len(lines) < 5 || lines[0] != "# kmirror" || lines[2] != "```sh" {
		t.Fatalf("README.md must open with its title and a sh block of the set-up commands:\n%s", strings.Join(lines[:min(5, len(lines))], "\n"))
	}
	if !strings.HasPrefix(lines[3], "go run . demo ") {
		t.Errorf("README.md's first command is %q, want go run . demo", lines[3])
	}
	want := "apt-get install -y " + pkgs[1] + " && " + goTest + " "
	if !strings.HasPrefix(lines[4], want) {
		t.Errorf("README.md's second command is %q, want it to start %q (.ci/run's)", lines[4], want)
	}
	pages, _ := filepath.Glob("docs/*.md")
	for _, p := range append(pages, pendingDocs...) {
		if p == "docs/README.md" {
			continue
		}
		if !strings.Contains(readme, "]("+p+")") {
			t.Errorf("README.md does not link to %s", p)
		}
		if !strings.Contains(readDoc(t, "docs/README.md"), "]("+strings.TrimPrefix(p, "docs/")+")") {
			t.Errorf("docs/README.md does not link to %s", p)
		}
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(doc string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(doc, -1) {
		out = append(out, headingAnchor(m[1]))
	}
	return out
}

// TestDocsLinksResolve: every relative link of the docs names a file that
// exists and, with a #fragment, a heading of it.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range docPages(t) {
		doc := readDoc(t, page)
		for _, m := range link.FindAllStringSubmatch(doc, -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				if slices.Contains(pendingDocs, path) {
					continue
				}
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if frag != "" && !slices.Contains(anchors(string(b)), frag) {
				t.Errorf("%s links to %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
	for _, p := range pendingDocs {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists now: remove it from pendingDocs", p)
		}
	}
}

// section returns the text under the heading that starts with head, up to
// the next heading of the same or a higher level.
func section(t *testing.T, doc, head string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+head)
	if i < 0 {
		t.Fatalf("no heading %q", head)
	}
	level := strings.Index(head, " ")
	rest := doc[i+1+len(head):]
	for j := 0; j < len(rest); j++ {
		if rest[j] == '\n' && strings.HasPrefix(rest[j+1:], "#") {
			n := strings.IndexFunc(rest[j+1:], func(r rune) bool { return r != '#' })
			if n <= level {
				return rest[:j]
			}
		}
	}
	return rest
}

// mentions reports whether text names the flag --name itself, not a longer
// one that starts with it.
func mentions(text, name string) bool {
	flag := "--" + name
	for i := strings.Index(text, flag); i >= 0; {
		end := i + len(flag)
		if end == len(text) || !(text[end] == '-' || text[end] >= 'a' && text[end] <= 'z') {
			return true
		}
		j := strings.Index(text[end:], flag)
		if j < 0 {
			break
		}
		i = end + j
	}
	return false
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestDocsCLIHasEveryFlag: docs/cli.md names every flag of every mode in
// that mode's section (completion's modeFlags, which a test checks against
// the modes' --help), every action and option in Actions, every JSON field
// the actions print, and the exit codes.
func TestDocsCLIHasEveryFlag(t *testing.T) {
	doc := readDoc(t, "docs/cli.md")
	for mode, flags := range modeFlags {
		sec := section(t, doc, fmt.Sprintf("## `kmirror %s`", mode))
		for _, f := range flags {
			if !mentions(sec, strings.TrimPrefix(f, "--")) {
				t.Errorf("docs/cli.md's kmirror %s section does not name %s", mode, f)
			}
		}
	}
	actions := section(t, doc, "## Actions")
	for _, f := range commonFlags {
		if !mentions(actions, f) {
			t.Errorf("docs/cli.md's Actions do not name --%s", f)
		}
	}
	for _, a := range actionSpecs {
		if !strings.Contains(actions, "| `--"+a.name+"` |") {
			t.Errorf("docs/cli.md's action table has no row for --%s", a.name)
		}
		for _, o := range a.options {
			if !mentions(actions, o) {
				t.Errorf("docs/cli.md's Actions do not name --%s (of --%s)", o, a.name)
			}
		}
	}
	output := section(t, doc, "## Output")
	for _, v := range []any{listRow{}, engine.DescribeRow{}, configView{}, appliedConfig{}} {
		for _, f := range jsonFields(v) {
			if !strings.Contains(output, "`"+f+"`") {
				t.Errorf("docs/cli.md's Output does not name the JSON field %s of %T", f, v)
			}
		}
	}
	codes := section(t, doc, "## Exit codes")
	for _, c := range []int{exitOK, exitFail, exitUsage} {
		if !strings.Contains(codes, fmt.Sprintf("| `%d` |", c)) {
			t.Errorf("docs/cli.md's Exit codes lack %d", c)
		}
	}
}

// TestDocsRunbookNamesEveryCause: every cause a FAILED partition can carry
// has a row, with its remedy, in the runbook.
func TestDocsRunbookNamesEveryCause(t *testing.T) {
	table := section(t, readDoc(t, "docs/runbook.md"), "## FAILED causes")
	for _, c := range partition.Causes {
		if c == partition.CauseNone {
			continue
		}
		if !strings.Contains(table, "\n| `"+c.String()+"` |") {
			t.Errorf("docs/runbook.md's FAILED causes have no row for %s", c)
		}
	}
}

// TestDocsNamesRealTests: every test, benchmark and fuzz target the docs
// name in backquotes is defined, and every repository path they name
// exists, so the reliability table and the design map cannot point at
// something renamed or gone.
func TestDocsNamesRealTests(t *testing.T) {
	defined := map[string]bool{}
	files := map[string]bool{} // base names of the repository's files
	fn := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		files[d.Name()] = true
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range fn.FindAllStringSubmatch(string(b), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`\n]+)`")
	testName := regexp.MustCompile(`^(?:Test|Benchmark|Fuzz)[A-Z]\w*$`)
	pathLike := regexp.MustCompile(`^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$`)
	for _, page := range docPages(t) {
		for _, m := range code.FindAllStringSubmatch(readDoc(t, page), -1) {
			tok := m[1]
			switch {
			case testName.MatchString(tok):
				if !defined[tok] {
					t.Errorf("%s names %s, which no test file defines", page, tok)
				}
			case !pathLike.MatchString(tok):
			case strings.Contains(tok, "/"):
				top, _, _ := strings.Cut(tok, "/")
				if _, err := os.Stat(top); err != nil || top == "." || top == ".." {
					continue // not a path in this repository (a record key, an ACL prefix, a file written in ./)
				}
				if _, err := os.Stat(tok); err != nil {
					t.Errorf("%s names %s, which does not exist", page, tok)
				}
			case strings.HasSuffix(tok, ".go"):
				if !files[tok] {
					t.Errorf("%s names %s, which is no file of the repository", page, tok)
				}
			}
		}
	}
}
