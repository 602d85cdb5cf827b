package docgen

import (
	"strings"
	"testing"
)

func TestReplaceAndSection(t *testing.T) {
	doc := "# T\n\n<!-- BEGIN GENERATED keys: regenerate with X -->\nold\n<!-- END GENERATED keys -->\nafter\n"
	got, err := Replace(doc, "keys", "new 1\nnew 2\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# T\n\n<!-- BEGIN GENERATED keys: regenerate with X -->\nnew 1\nnew 2\n<!-- END GENERATED keys -->\nafter\n"
	if got != want {
		t.Fatalf("Replace:\n%s\nwant:\n%s", got, want)
	}
	if body, err := Section(got, "keys"); err != nil || body != "new 1\nnew 2\n" {
		t.Fatalf("Section = %q, %v", body, err)
	}
	for _, bad := range []string{"no markers", "<!-- BEGIN GENERATED keys: x -->\nno end\n", "<!-- END GENERATED keys -->\n<!-- BEGIN GENERATED keys: x -->\n"} {
		if _, err := Section(bad, "keys"); err == nil || !strings.Contains(err.Error(), "marker") {
			t.Errorf("%q: err %v, want a missing marker", bad, err)
		}
	}
	if _, err := Section(doc, "other"); err == nil {
		t.Error("another section's markers were taken")
	}
}
