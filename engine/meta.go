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
	// topicAt is when each topic was last asked alone (topicRound),
	// after at; route takes a topic as fresh as either.
	topicAt map[string]time.Time

	topicLookups batcher[string, time.Time]
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
			// A topic asked alone since this request started is
			// fresher than its answer: it stays.
			for t, at := range mc.topicAt {
				if tm, ok := mc.meta.topics[t]; ok && at.After(start) {
					m.topics[t] = tm
				} else {
					delete(mc.topicAt, t)
				}
			}
			mc.meta, mc.at = m, start
		}
		mc.mu.Unlock()
		close(ch)
		return m, err
	}
}

// topic returns the cached metadata with topic fetched at or after after.
// A topic older than that is asked alone, in one request shared by every
// topic asked at the same time (batcher), not with every topic of the
// cache: thousands of partitions aligning at once each want their topic's
// leaders fresh.
func (mc *metaCache) topic(ctx context.Context, topic string, after time.Time) (clusterMeta, error) {
	return mc.topicsAfter(ctx, []string{topic}, after)
}

// topicsAfter is topic for several topics: the stale ones are asked in
// one round.
func (mc *metaCache) topicsAfter(ctx context.Context, topics []string, after time.Time) (clusterMeta, error) {
	mc.mu.Lock()
	var stale []string
	for _, t := range topics {
		_, cached := mc.meta.topics[t]
		fresh := cached && !mc.at.IsZero() && !mc.at.Before(after)
		if at, ok := mc.topicAt[t]; ok && !at.Before(after) {
			fresh = true
		}
		if !fresh {
			stale = append(stale, t)
		}
	}
	m := mc.meta
	mc.mu.Unlock()
	if len(stale) == 0 {
		return m, nil
	}
	for _, res := range mc.topicLookups.doAll(ctx, stale, mc.topicRound) {
		if res.err != nil {
			return clusterMeta{}, res.err
		}
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.meta, nil
}

// topicRound asks for the metadata of one round of topics and merges it
// into the cache. The cached value is replaced, never changed in place:
// callers hold copies of it.
func (mc *metaCache) topicRound(ctx context.Context, topics []string) map[string]batchResult[time.Time] {
	start := mc.now()
	m, err := mc.c.metadata(ctx, topics)
	out := make(map[string]batchResult[time.Time], len(topics))
	if err != nil {
		for _, t := range topics {
			out[t] = batchResult[time.Time]{err: err}
		}
		return out
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	merged := m
	merged.topics = make(map[string]topicMeta, len(mc.meta.topics)+len(m.topics))
	for t, tm := range mc.meta.topics {
		merged.topics[t] = tm
	}
	for t, tm := range m.topics {
		merged.topics[t] = tm
	}
	mc.meta = merged
	if mc.topicAt == nil {
		mc.topicAt = make(map[string]time.Time)
	}
	for _, t := range topics {
		mc.topicAt[t] = start
		out[t] = batchResult[time.Time]{v: start}
	}
	return out
}

// addrOf is broker's address in the cached metadata.
func (mc *metaCache) addrOf(broker int32) (string, bool) {
	if mc == nil {
		return "", false
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	a, ok := mc.meta.addrs[broker]
	return a, ok
}

// route resolves one partition's leader, epoch and topic id.
func (mc *metaCache) route(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	m, err := mc.topic(ctx, topic, after)
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
	return route{Leader: pm.leader, Epoch: pm.epoch, TopicID: t.id}, nil
}

// clusterID is the cluster id of the newest metadata, "" before any.
func (mc *metaCache) clusterID() string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.meta.clusterID
}
