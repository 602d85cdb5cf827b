package engine

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// discover keeps regex-started mirrors growing on instances that share
// __mirror_state: new source topics matching a started topic's pattern get
// their own topic record (desired start), exactly as --start would have
// written, once per mirror.metadata.refresh.interval.ms. Only the instance
// owning the mirror definition's shard does it, so records are not written
// twice. Topics with a record (a stopped one included) are never
// rediscovered.
func (c *coordinator) discover(ctx context.Context) {
	if !c.e.gate.Allowed() {
		return // the group may have replaced this instance: it writes no records
	}
	for _, name := range c.cat.MirrorNames() {
		if !c.owned[store.MirrorShard(name)] {
			continue
		}
		def := c.cat.Mirrors[name]
		settings, err := mirrorSettings(def)
		if err != nil {
			continue
		}
		c.e.mu.Lock()
		m, ok := c.e.mirrors[name]
		c.e.mu.Unlock()
		if !ok && (len(def.Patterns) > 0 || len(settings.TopicsInclude) > 0) {
			// A mirror whose --start matched nothing yet runs no
			// topic: open it to watch its source for the patterns.
			if m, err = c.mirror(ctx, def); err != nil {
				continue
			}
			ok = true
		}
		if !ok {
			continue
		}
		interval := m.settings().metaSync.interval
		if interval <= 0 || c.e.now().Sub(c.discovered[name]) < interval {
			continue
		}
		c.discovered[name] = c.e.now()
		excl := compileAll(settings.TopicsExclude)
		var known []string
		patterns := map[string]string{} // pattern -> exclude
		for _, t := range c.cat.TopicsOf(name) {
			known = append(known, t.Topic)
			if t.Pattern != "" && t.Desired == partition.DesiredStart {
				patterns[t.Pattern] = t.Exclude
			}
		}
		for _, p := range def.Patterns {
			patterns[p.Topics] = p.Exclude
		}
		if inc := strings.Join(settings.TopicsInclude, ","); inc != "" {
			patterns[inc] = "" // topics.include: a standing --start
		}
		for pattern, exclude := range patterns {
			sel, err := ParseTopics(pattern)
			if err != nil {
				continue
			}
			ex := excl
			if exclude != "" {
				if re, err := regexp.Compile(exclude); err == nil {
					ex = append(ex, re)
				}
			}
			dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			found, err := discoverTopics(dctx, m.src, sel.wholeRegexp(), ex, known)
			cancel()
			if err != nil {
				continue
			}
			for _, topic := range found {
				td := store.TopicDesired{Mirror: name, Topic: topic, Desired: partition.DesiredStart, Pattern: pattern, Exclude: exclude, UpdatedAt: c.e.now().UTC()}
				if err := c.w.PutTopic(ctx, td); err != nil {
					c.e.emit(LevelWarn, name, topic, -1, "record discovered topic: "+err.Error())
					continue
				}
				known = append(known, topic)
				c.e.emit(LevelInfo, name, topic, -1, fmt.Sprintf("discovered source topic %s matching %q: mirroring it", topic, pattern))
			}
		}
	}
}
