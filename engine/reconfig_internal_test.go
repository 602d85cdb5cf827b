package engine

import (
	"testing"

	"github.com/kmirror/kmirror/engine/store"
)

func TestNeedsReopen(t *testing.T) {
	base := store.MirrorDef{Name: "m", SourceBootstrap: []string{"a:1"}, Config: map[string]string{}}
	with := func(f func(d *store.MirrorDef)) store.MirrorDef {
		d := base
		d.SourceBootstrap = append([]string(nil), base.SourceBootstrap...)
		d.Config, d.SourceConfig = map[string]string{}, map[string]string{}
		f(&d)
		return d
	}
	tests := []struct {
		name   string
		def    store.MirrorDef
		reopen bool
	}{
		{"nothing", with(func(*store.MirrorDef) {}), false},
		{"throttle", with(func(d *store.MirrorDef) { d.Config["mirror.replication.throttled.rate"] = "1000" }), false},
		{"excludes and intervals", with(func(d *store.MirrorDef) {
			d.Config["mirror.topics.exclude"] = "x.*"
			d.Config["mirror.metadata.refresh.interval.ms"] = "500"
			d.Config["mirror.state.checkpoint.interval.ms"] = "100"
			d.Config["mirror.groups.include"] = "app-.*"
		}), false},
		{"a default spelled out", with(func(d *store.MirrorDef) { d.Config["mirror.num.fetchers"] = "1" }), false},
		{"bootstrap", with(func(d *store.MirrorDef) { d.SourceBootstrap = []string{"a:2"} }), true},
		{"security", with(func(d *store.MirrorDef) { d.SourceConfig["security.protocol"] = "SSL" }), true},
		{"fetchers", with(func(d *store.MirrorDef) { d.Config["mirror.num.fetchers"] = "2" }), true},
		{"retries", with(func(d *store.MirrorDef) { d.Config["mirror.failed.retry.max.attempts"] = "0" }), true},
		{"gap policy", with(func(d *store.MirrorDef) { d.Config["mirror.gap.policy"] = "FILL" }), true},
	}
	cur, err := mirrorConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		cfg, err := mirrorConfig(tt.def)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := needsReopen(cur, base, cfg, tt.def); got != tt.reopen {
			t.Errorf("%s: reopen %v, want %v", tt.name, got, tt.reopen)
		}
	}
}
