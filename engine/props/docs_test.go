package props

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/docgen"
)

var updateDocs = flag.Bool("update", false, "rewrite the settings tables in docs/configuration.md")

// TestDocsConfiguration checks the settings tables of docs/configuration.md
// are exactly ConfigurationMarkdown; regenerate them with
//
//	go test ./engine/props -run TestDocs -update
func TestDocsConfiguration(t *testing.T) {
	docgen.Check(t, "../../docs/configuration.md", "configuration", ConfigurationMarkdown(), *updateDocs, "go test ./engine/props -run TestDocs -update")
}

// TestEverySettingIsDocumented: a key is added to a table, and the table
// needs its meaning, values and default for the docs.
func TestEverySettingIsDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, table := range [][]Setting{mirrorSettings, clientSettings} {
		for _, s := range table {
			if seen[s.Key] {
				t.Errorf("%s is listed twice", s.Key)
			}
			seen[s.Key] = true
			if s.Meaning == "" || s.Values() == "" || (s.Default == "") == (s.Unset == "") {
				t.Errorf("%s: meaning %q, values %q, default %q, unset %q: want a meaning, values and either a default or what unset means",
					s.Key, s.Meaning, s.Values(), s.Default, s.Unset)
			}
		}
	}
	for k := range known {
		if !seen[k] {
			t.Errorf("%s is read but not in a settings table", k)
		}
	}
	if got, want := len(known), len(mirrorSettings)+len(clientSettings); got != want {
		t.Errorf("%d keys known, %d in the tables", got, want)
	}
}

// TestMirrorSettingExamples: each mirror setting's documented default and
// example are valid, the example changes the parsed settings, and the
// setting says what --alter does with it. The engine's tests check that the
// default changes nothing and the --alter column.
func TestMirrorSettingExamples(t *testing.T) {
	for _, s := range mirrorSettings {
		if !strings.HasPrefix(s.Key, "mirror.") {
			t.Errorf("%s: a mirror setting is stored under mirror.*", s.Key)
		}
		if s.Alter == AlterNone {
			t.Errorf("%s: the docs need what --alter does with it", s.Key)
		}
		for _, v := range []string{s.Default, s.Example} {
			if v == "" && s.Default == "" {
				continue
			}
			if _, err := ParseMirrorSettings(FromMap(map[string]string{KeyBootstrapServers: "a:9092", s.Key: v})); err != nil {
				t.Errorf("%s=%s: %v", s.Key, v, err)
			}
		}
		got, err := ParseMirrorSettings(FromMap(map[string]string{KeyBootstrapServers: "a:9092", s.Key: s.Example}))
		if err == nil && reflect.DeepEqual(got, DefaultMirrorSettings()) {
			t.Errorf("%s: the example %q is the default", s.Key, s.Example)
		}
	}
	for _, s := range clientSettings {
		if s.Alter != AlterNone || strings.HasPrefix(s.Key, "mirror.") {
			t.Errorf("%s: a client setting", s.Key)
		}
		if s.Default != "" {
			if _, err := ValidateClientConfig(FromMap(map[string]string{s.Key: s.Default})); err != nil {
				t.Errorf("%s=%s: %v", s.Key, s.Default, err)
			}
		}
	}
}
