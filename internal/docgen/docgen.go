// Package docgen keeps the generated sections of the Markdown docs in step
// with the code they describe. A section sits between two marker lines:
//
//	<!-- BEGIN GENERATED name: regenerate with CMD -->
//	...
//	<!-- END GENERATED name -->
//
// A package's docs test calls Check with what the section must hold: with
// -update it rewrites the section, and without it fails when they differ.
package docgen

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func markers(name string) (begin, end string) {
	return "<!-- BEGIN GENERATED " + name + ":", "<!-- END GENERATED " + name + " -->"
}

// section finds the body of section name in doc: the text after the
// begin marker's line, up to the end marker.
func section(doc, name string) (start, end int, err error) {
	b, e := markers(name)
	i := strings.Index(doc, b)
	if i < 0 {
		return 0, 0, fmt.Errorf("no %q marker", b)
	}
	nl := strings.IndexByte(doc[i:], '\n')
	if nl < 0 {
		return 0, 0, fmt.Errorf("nothing after the %q marker", b)
	}
	start = i + nl + 1
	j := strings.Index(doc[start:], e)
	if j < 0 {
		return 0, 0, fmt.Errorf("no %q marker after %q", e, b)
	}
	return start, start + j, nil
}

// Section returns the body of section name in doc.
func Section(doc, name string) (string, error) {
	start, end, err := section(doc, name)
	if err != nil {
		return "", err
	}
	return doc[start:end], nil
}

// Replace returns doc with the body of section name replaced by body.
func Replace(doc, name, body string) (string, error) {
	start, end, err := section(doc, name)
	if err != nil {
		return "", err
	}
	return doc[:start] + body + doc[end:], nil
}

// Check compares section name of the file at path with want; with update
// it first rewrites the section. regen is the command that does that, named
// in the failure.
func Check(t testing.TB, path, name, want string, update bool, regen string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if update {
		if doc, err = Replace(doc, name, want); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Section(doc, name)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got != want {
		t.Errorf("%s: section %s differs from the code (%s rewrites it); it should read:\n%s", path, name, regen, want)
	}
}
