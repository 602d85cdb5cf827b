package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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

// needsReopen reports whether going from the running configuration to
// cfg changes what a running mirror cannot change in place: the source
// connection (bootstrap, security) or the data path (fetchers, in-flight
// appends, gap policy, retries, the write guard). Settings are compared
// with their defaults applied: spelling out a default changes nothing.
func needsReopen(cur MirrorConfig, curDef store.MirrorDef, cfg MirrorConfig, def store.MirrorDef) bool {
	if !slices.Equal(curDef.SourceBootstrap, def.SourceBootstrap) || !maps.Equal(curDef.SourceConfig, def.SourceConfig) {
		return true
	}
	type dataPath struct {
		fetchers, inFlight, attempts      int
		fetchWait, retryInitial, retryMax time.Duration
		fetchBytes, minBytes, maxBytes    int32
		gapFill, unclean, guard           bool
	}
	path := func(c MirrorConfig) dataPath {
		_ = c.defaults() // c is a copy; errors are the name's and bootstrap's, compared above
		return dataPath{c.NumFetchers, c.MaxInFlight, c.RetryAttempts, c.FetchMaxWait, c.RetryInitial, c.RetryMax,
			c.PartitionFetchBytes, c.FetchMinBytes, c.FetchResponseMaxBytes, c.GapFill, c.UncleanRecovery, c.WriteGuard}
	}
	return path(cur) != path(cfg)
}

// applyDefs brings every mirror this instance runs to its recorded
// definition: an --alter takes effect here without a restart.
func (c *coordinator) applyDefs(ctx context.Context) {
	ms := c.e.mirrorList()
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
		// valid, and say so once per definition.
		l := *m.settings()
		l.def = def
		m.live.Store(&l)
		c.e.emit(LevelError, def.Name, "", -1, "altered configuration not applied: "+err.Error())
		return
	}
	m.setLive(cfg, def)
	if needsReopen(m.cfg, cur, cfg, def) {
		c.reopen(ctx, m, cfg)
		return
	}
	throttle := "unthrottled"
	if cfg.ThrottleRate > 0 {
		throttle = fmt.Sprintf("throttle %d B/s", cfg.ThrottleRate)
	}
	c.e.emit(LevelInfo, def.Name, "", -1, fmt.Sprintf("configuration of %s applied in place (%s)", configAt(def).Format(time.RFC3339), throttle))
}

// reopen closes a running mirror so that the next reconcile opens it
// with cfg: a new bootstrap or source security needs a new source client,
// and the fetchers and appenders read their settings once. The partitions
// restart from their records, as when their shard moves to another
// instance: they realign, and none is failed over.
func (c *coordinator) reopen(ctx context.Context, m *mirror, cfg MirrorConfig) {
	c.e.emit(LevelInfo, m.cfg.Name, "", -1, fmt.Sprintf("configuration of %s changes the source connection or the data path: reopening the mirror (bootstrap %s); its partitions realign",
		configAt(m.settings().def).Format(time.RFC3339), strings.Join(cfg.SourceBootstrap, ",")))
	for _, t := range m.topicList() {
		m.removeTopic(t)
	}
	for p := range c.sent {
		if p.Mirror == m.cfg.Name {
			delete(c.sent, p)
		}
	}
	c.e.mu.Lock()
	delete(c.e.mirrors, m.cfg.Name)
	c.e.mu.Unlock()
	m.close()
	delete(c.discovered, m.cfg.Name)
	c.reconcileMirror(ctx, m.cfg.Name)
}

// reconcileMirror opens a mirror again at once rather than at the next
// tick; its topics start from their records on the reconcile that follows.
func (c *coordinator) reconcileMirror(ctx context.Context, name string) {
	if def, ok := c.cat.Mirrors[name]; ok {
		_, _ = c.mirror(ctx, def) // a failure is reported and retried by reconcile
	}
}
