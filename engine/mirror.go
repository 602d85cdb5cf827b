package engine

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MirrorConfig defines one mirror: where its source is and what it copies.
type MirrorConfig struct {
	Name            string
	SourceBootstrap []string
	SourceOpts      []kgo.Opt // security settings for the source
	Topics          []string  // source topic names to mirror

	NumFetchers         int           // fetchers per source broker (mirror.num.fetchers), default 1
	FetchMaxWait        time.Duration // long-poll time of one fetch, default 250ms
	PartitionFetchBytes int32         // bytes asked per partition per fetch, default 1 MiB
	RetryInitial        time.Duration // first retry backoff, default 100ms
	RetryMax            time.Duration // backoff cap, default 300s
	RetryAttempts       int           // retries before a FAILED partition waits for recover, default 20
	CheckInterval       time.Duration // destination log-end check and rate period, default 1s
	MaxInFlight         int           // batches in flight per partition (mirror.max.inflight, 1..5), default 5
}

func (c *MirrorConfig) defaults() error {
	if c.Name == "" {
		return fmt.Errorf("mirror: no name")
	}
	if len(c.SourceBootstrap) == 0 {
		return fmt.Errorf("mirror %s: no source bootstrap servers", c.Name)
	}
	if len(c.Topics) == 0 {
		return fmt.Errorf("mirror %s: no topics", c.Name)
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.NumFetchers <= 0 {
		c.NumFetchers = 1
	}
	if c.PartitionFetchBytes <= 0 {
		c.PartitionFetchBytes = 1 << 20
	}
	if c.MaxInFlight <= 0 || c.MaxInFlight > 5 {
		c.MaxInFlight = 5 // the broker deduplicates at most five batches per producer
	}
	if c.RetryAttempts <= 0 {
		c.RetryAttempts = 20
	}
	set(&c.FetchMaxWait, 250*time.Millisecond)
	set(&c.RetryInitial, 100*time.Millisecond)
	set(&c.RetryMax, 300*time.Second)
	set(&c.CheckInterval, time.Second)
	return nil
}

// route is where one partition lives on one cluster.
type route struct {
	leader  int32
	epoch   int32
	topicID [16]byte
}

// mirror runs the partitions of one mirror.
type mirror struct {
	e        *Engine
	cfg      MirrorConfig
	src      *cluster
	sourceID string
	srcMeta  *metaCache
	dstMeta  *metaCache

	ctx      context.Context
	mu       sync.Mutex
	fetchers map[fetchKey]*fetcher

	parts []*partStats // sorted by topic, partition; fixed after start
	runs  []*runner
}

// fetcherFor returns the fetcher that serves partition p of a topic led by
// broker, starting it on first use.
func (m *mirror) fetcherFor(broker int32, topic string, p int32) *fetcher {
	key := fetchKey{mirror: m.cfg.Name, broker: broker, index: fetcherIndex(topic, p, m.cfg.NumFetchers)}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.fetchers[key]
	if !ok {
		f = newFetcher(key, m.src, int32(m.cfg.FetchMaxWait/time.Millisecond))
		m.fetchers[key] = f
		m.e.wg.Go(func() { f.run(m.ctx) })
	}
	return f
}

// sourceRoute resolves a partition's source leader from metadata fetched no
// earlier than after.
func (m *mirror) sourceRoute(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	rt, err := m.srcMeta.route(ctx, topic, p, after)
	if err == nil {
		m.partStats(topic, p).setRoute(rt.leader, rt.epoch)
	}
	return rt, err
}

func (m *mirror) destRoute(ctx context.Context, topic string, p int32, after time.Time) (route, error) {
	return m.dstMeta.route(ctx, topic, p, after)
}

func (m *mirror) partStats(topic string, p int32) *partStats {
	i, ok := slices.BinarySearchFunc(m.parts, tp{topic, p}, func(s *partStats, k tp) int {
		if s.ps.Topic != k.topic {
			if s.ps.Topic < k.topic {
				return -1
			}
			return 1
		}
		return int(s.ps.Partition - k.partition)
	})
	if !ok {
		return newPartStats(m.cfg.Name, topic, p) // never published
	}
	return m.parts[i]
}

// watch refreshes rates and checks destination log ends so a foreign write
// to an idle partition is noticed without waiting for the next source batch.
func (m *mirror) watch(ctx context.Context) {
	t := time.NewTicker(m.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.e.now()
		for _, s := range m.parts {
			s.updateRate(now)
		}
		ends, err := m.e.dst.endOffsets(ctx, m.cfg.Topics...)
		if err != nil {
			continue
		}
		for _, s := range m.parts {
			end, ok := ends[s.ps.Topic][s.ps.Partition]
			if !ok {
				continue
			}
			select {
			case s.checkEnd <- end:
			default: // the runner has not taken the previous one yet
			}
		}
	}
}

// ensureTopics creates missing destination topics with the source's
// partition count and the settings byte-for-byte mirroring needs, and
// corrects those settings on existing topics.
func (e *Engine) ensureTopics(ctx context.Context, src *cluster, meta clusterMeta, topics []string) error {
	srcCfgs, err := src.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("describe source topic configs: %w", err)
	}
	dstMeta, err := e.dst.metadata(ctx, topics)
	if err != nil {
		return err
	}
	rf := int16(min(3, len(dstMeta.brokers)))
	for _, t := range topics {
		parts := len(meta.topics[t].partitions)
		want := map[string]*string{
			"compression.type":       kadm.StringPtr("producer"),
			"message.timestamp.type": kadm.StringPtr("CreateTime"),
		}
		if rc, err := srcCfgs.On(t, nil); err == nil {
			for _, c := range rc.Configs {
				switch c.Key {
				case "max.message.bytes", "cleanup.policy":
					if c.Value != nil {
						want[c.Key] = kadm.StringPtr(*c.Value)
					}
				}
			}
		}
		if mb, ok := want["max.message.bytes"]; ok {
			// Filler and mirrored batches must fit whatever the source accepted.
			if n, err := strconv.Atoi(*mb); err == nil && n < 1<<20 {
				want["max.message.bytes"] = kadm.StringPtr(strconv.Itoa(1 << 20))
			}
		}
		dt, exists := dstMeta.topics[t]
		if !exists || dt.err != nil {
			resp, err := e.dst.adm.CreateTopic(ctx, int32(parts), rf, want, t)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				return fmt.Errorf("create destination topic %s: %w", t, err)
			}
			e.emit(LevelInfo, "", t, -1, fmt.Sprintf("created destination topic %s with %d partitions", t, parts))
			continue
		}
		if len(dt.partitions) < parts {
			resp, err := e.dst.adm.UpdatePartitions(ctx, parts, t)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("grow destination topic %s to %d partitions: %w", t, parts, err)
			}
		}
		alter := make([]kadm.AlterConfig, 0, 2)
		for _, k := range []string{"compression.type", "message.timestamp.type"} {
			alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: want[k]})
		}
		resp, err := e.dst.adm.AlterTopicConfigs(ctx, alter, t)
		if err == nil {
			for _, r := range resp {
				err = r.Err
			}
		}
		if err != nil {
			return fmt.Errorf("set mirroring configs on destination topic %s: %w", t, err)
		}
	}
	return nil
}

// fetcherIndex spreads partitions of one broker over the mirror's fetchers.
func fetcherIndex(topic string, p int32, n int) int {
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((h.Sum32() + uint32(p)) % uint32(n))
}
