package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// metaCache coalesces uncached Metadata requests: callers that saw an error
// at time t ask for metadata fetched no earlier than t, and concurrent
// callers share one request. After a broker loss a thousand partitions need
// one Metadata request, not a thousand.
type metaCache struct {
	c      *cluster
	topics []string
	now    func() time.Time

	mu       sync.Mutex
	at       time.Time
	meta     clusterMeta
	inflight chan struct{}
}

func newMetaCache(c *cluster, topics []string, now func() time.Time) *metaCache {
	return &metaCache{c: c, topics: topics, now: now}
}

// addTopic includes topic in later requests.
func (mc *metaCache) addTopic(topic string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if !slices.Contains(mc.topics, topic) {
		mc.topics = append(mc.topics, topic)
		mc.at = time.Time{} // the cached answer lacks it
	}
}

// get returns metadata requested at or after after.
func (mc *metaCache) get(ctx context.Context, after time.Time) (clusterMeta, error) {
	for {
		mc.mu.Lock()
		if !mc.at.IsZero() && !mc.at.Before(after) {
			m := mc.meta
			mc.mu.Unlock()
			return m, nil
		}
		if ch := mc.inflight; ch != nil {
			mc.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return clusterMeta{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		mc.inflight = ch
		mc.mu.Unlock()

		start := mc.now()
		mc.mu.Lock()
		topics := slices.Clone(mc.topics)
		mc.mu.Unlock()
		m, err := mc.c.metadata(ctx, topics)
		mc.mu.Lock()
		mc.inflight = nil
		if err == nil {
			mc.meta, mc.at = m, start
		}
		mc.mu.Unlock()
		close(ch)
		return m, err
	}
}

// route resolves one partition's leader, epoch and topic id.
func (mc *metaCache) route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	m, err := mc.get(ctx, after)
	if err != nil {
		return route{}, err
	}
	t, ok := m.topics[topic]
	if !ok {
		return route{}, fmt.Errorf("%s topic %s: not in metadata", mc.c.name, topic)
	}
	if t.err != nil {
		return route{}, fmt.Errorf("%s topic %s: %w", mc.c.name, topic, t.err)
	}
	if int(p) >= len(t.partitions) {
		return route{}, fmt.Errorf("%s topic %s: partition %d does not exist", mc.c.name, topic, p)
	}
	pm := t.partitions[p]
	if err := pm.err(); err != nil {
		return route{}, fmt.Errorf("%s %s/%d: %w", mc.c.name, topic, p, err)
	}
	if pm.leader < 0 {
		return route{}, fmt.Errorf("%s %s/%d: no leader", mc.c.name, topic, p)
	}
	return route{leader: pm.leader, epoch: pm.epoch, topicID: t.id}, nil
}

// clusterID is the cluster id of the newest metadata, "" before any.
func (mc *metaCache) clusterID() string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.meta.clusterID
}
