package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// liveSettings are the settings of a running mirror that an --alter
// changes in place: its partitions keep MIRRORING. The mirror's goroutines
// read them anew every round (settings), never from cfg.
type liveSettings struct {
	def        store.MirrorDef // the definition applied; zero for a mirror not from __mirror_state
	metaSync   metaSyncConfig
	groupSync  groupSync
	checkpoint time.Duration
}

// liveKeys are the mirror.* settings applied without reopening the mirror.
var liveKeys = []string{
	props.KeyThrottledRate, props.KeyTopicsExclude, props.KeyTopicsInclude, props.KeyTopicPropertiesExclude,
	props.KeyACLInclude, props.KeyGroupsInclude, props.KeyGroupsExclude, props.KeyMetadataRefresh,
	props.KeyCheckpointInterval,
}

// settings returns the live settings; a mirror built without openMirror
// (in tests) has only its cfg.
func (m *mirror) settings() *liveSettings {
	if l := m.live.Load(); l != nil {
		return l
	}
	return &liveSettings{metaSync: m.cfg.MetaSync, groupSync: m.cfg.GroupSync, checkpoint: m.cfg.CheckpointInterval}
}

// setLive publishes the live part of cfg, keeping the metadata sync's
// status and an ad-hoc mirror's include.
func (m *mirror) setLive(cfg MirrorConfig, def store.MirrorDef) {
	ms := cfg.MetaSync
	if old := m.live.Load(); old != nil {
		ms.state, ms.Include = old.metaSync.state, old.metaSync.Include
	}
	m.live.Store(&liveSettings{def: def, metaSync: ms, groupSync: cfg.GroupSync, checkpoint: cfg.CheckpointInterval})
	m.bucket.SetRate(cfg.ThrottleRate)
}

// configAt identifies a definition's version: its last --alter, or its
// creation.
func configAt(def store.MirrorDef) time.Time {
	if !def.UpdatedAt.IsZero() {
		return def.UpdatedAt
	}
	return def.CreatedAt
}

// needsReopen reports whether going from old to def changes what a
// running mirror cannot change in place: the source connection (bootstrap,
// security) or the data path (fetchers, in-flight appends, gap policy,
// retries, the write guard).
func needsReopen(old, def store.MirrorDef) bool {
	if !slices.Equal(old.SourceBootstrap, def.SourceBootstrap) || !maps.Equal(old.SourceConfig, def.SourceConfig) {
		return true
	}
	fixed := func(c map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range c {
			if !slices.Contains(liveKeys, props.Canonical(k)) {
				out[props.Canonical(k)] = strings.TrimSpace(v)
			}
		}
		return out
	}
	return !maps.Equal(fixed(old.Config), fixed(def.Config))
}

// applyDefs brings every mirror this instance runs to its recorded
// definition: an --alter takes effect here without a restart.
func (c *coordinator) applyDefs(ctx context.Context) {
	c.e.mu.Lock()
	ms := make([]*mirror, 0, len(c.e.mirrors))
	for _, m := range c.e.mirrors {
		ms = append(ms, m)
	}
	c.e.mu.Unlock()
	for _, m := range ms {
		def, ok := c.cat.Mirrors[m.cfg.Name]
		cur := m.settings().def
		if !ok || cur.Name == "" || configAt(cur).Equal(configAt(def)) {
			continue
		}
		c.applyDef(ctx, m, cur, def)
	}
}

func (c *coordinator) applyDef(ctx context.Context, m *mirror, cur, def store.MirrorDef) {
	cfg, err := mirrorConfig(def)
	if err != nil {
		// Recorded by a newer or broken kmirror: keep running what was
		// valid, and say so every time the definition changes.
		m.setLive(m.cfg, def)
		c.e.emit(LevelError, def.Name, "", -1, "altered configuration not applied: "+err.Error())
		return
	}
	m.setLive(cfg, def)
	throttle := "unthrottled"
	if cfg.ThrottleRate > 0 {
		throttle = fmt.Sprintf("throttle %d B/s", cfg.ThrottleRate)
	}
	c.e.emit(LevelInfo, def.Name, "", -1, fmt.Sprintf("configuration of %s applied in place (%s)", configAt(def).Format(time.RFC3339), throttle))
	if needsReopen(cur, def) {
		c.reopen(ctx, m, cfg)
	}
}

// reopen is filled in below.
func (c *coordinator) reopen(ctx context.Context, m *mirror, cfg MirrorConfig) {
	c.e.emit(LevelWarn, m.cfg.Name, "", -1, "the new source connection and data path settings take effect when the instance restarts")
}
