package engine

import (
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// TestDocumentedSettings checks two columns of docs/configuration.md against
// the engine: writing a setting's documented default changes nothing, and
// its --alter column says whether a running mirror is reopened for it
// (needsReopen) or only its live settings change.
func TestDocumentedSettings(t *testing.T) {
	def := func(key, value string) store.MirrorDef {
		d := store.MirrorDef{Name: "m", SourceBootstrap: []string{"a:9092"}, Config: map[string]string{}}
		if key != "" {
			d.Config[key] = value
		}
		return d
	}
	config := func(d store.MirrorDef) MirrorConfig {
		t.Helper()
		c, err := mirrorConfig(d)
		if err != nil {
			t.Fatalf("%v: %v", d.Config, err)
		}
		c.SourceOpts = nil // functions: never equal
		c.MetaSync.state = nil
		return c
	}
	// withoutLive blanks what an --alter applies in place (liveSettings
	// and the throttle).
	withoutLive := func(c MirrorConfig) MirrorConfig {
		c.MetaSync, c.GroupSync, c.CheckpointInterval, c.ThrottleRate = metaSyncConfig{}, groupSync{}, 0, 0
		return c
	}
	def0 := def("", "")
	plain := config(def0)
	for _, s := range props.MirrorSettingsTable() {
		if s.Default != "" {
			if got := config(def(s.Key, s.Default)); !reflect.DeepEqual(got, plain) {
				t.Errorf("%s=%s, the documented default, changes the mirror:\n%+v\nwithout it:\n%+v", s.Key, s.Default, got, plain)
			}
		}
		d1 := def(s.Key, s.Example)
		c1 := config(d1)
		reopens := needsReopen(plain, def0, c1, d1)
		switch s.Alter {
		case props.AlterReopen:
			if !reopens {
				t.Errorf("%s: documented as reopening the mirror, but %s=%s does not", s.Key, s.Key, s.Example)
			}
		case props.AlterInPlace:
			if reopens || !reflect.DeepEqual(withoutLive(c1), withoutLive(plain)) {
				t.Errorf("%s: documented as applied in place, but %s=%s reopens the mirror (%v) or changes more than its live settings", s.Key, s.Key, s.Example, reopens)
			}
		case props.AlterNone:
			t.Errorf("%s: no --alter column", s.Key)
		}
	}
}
