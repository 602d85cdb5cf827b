package engine

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
)

// topicAnswers is what the source and the destination said about the
// topics of one start, asked for all of them at once (askTopics). A start
// that asked one topic at a time made four round trips a topic, in turn:
// on loopback the last of a thousand topics got its runners after twelve
// seconds, and across a 50 ms link after 105. A request that failed keeps
// its error, which each topic then reports as its own ask would have.
type topicAnswers struct {
	src, dst             clusterMeta
	srcErr, dstErr       error
	srcCfgs, dstCfgs     kadm.ResourceConfigs
	srcCfgErr, dstCfgErr error
}

// askTopics asks both clusters about topics, one request of each kind;
// nil for fewer than two topics, which addTopic asks about itself.
func (m *mirror) askTopics(ctx context.Context, topics []string) *topicAnswers {
	if len(topics) < 2 {
		return nil
	}
	var a topicAnswers
	a.src, a.srcErr = m.src.metadata(ctx, topics)
	a.srcCfgs, a.srcCfgErr = m.src.adm.DescribeTopicConfigs(ctx, topics...)
	a.dst, a.dstErr = m.e.dst.metadata(ctx, topics)
	a.dstCfgs, a.dstCfgErr = m.e.dst.adm.DescribeTopicConfigs(ctx, topics...)
	return &a
}

// sourceMeta is the source's metadata of topic: from the answers when
// they hold it, else asked now.
func (a *topicAnswers) sourceMeta(ctx context.Context, src *cluster, topic string) (clusterMeta, error) {
	if a == nil {
		return src.metadata(ctx, []string{topic})
	}
	if _, ok := a.src.topics[topic]; ok || a.srcErr != nil {
		return a.src, a.srcErr
	}
	return src.metadata(ctx, []string{topic})
}

// sourceConfigs are the source's configs of topics.
func (a *topicAnswers) sourceConfigs(ctx context.Context, src *cluster, topics []string) (kadm.ResourceConfigs, error) {
	if a == nil || (a.srcCfgErr == nil && !holdsConfigs(a.srcCfgs, topics)) {
		return src.adm.DescribeTopicConfigs(ctx, topics...)
	}
	return a.srcCfgs, a.srcCfgErr
}

// destMeta is the destination's metadata of topics.
func (a *topicAnswers) destMeta(ctx context.Context, dst *cluster, topics []string) (clusterMeta, error) {
	if a == nil {
		return dst.metadata(ctx, topics)
	}
	if a.dstErr != nil {
		return clusterMeta{}, a.dstErr
	}
	for _, t := range topics {
		if _, ok := a.dst.topics[t]; !ok {
			return dst.metadata(ctx, topics)
		}
	}
	return a.dst, nil
}

// holdsConfigs reports whether cfgs answer for every one of topics.
func holdsConfigs(cfgs kadm.ResourceConfigs, topics []string) bool {
	for _, t := range topics {
		if _, err := cfgs.On(t, nil); err != nil {
			return false
		}
	}
	return true
}

// destConfigured reports whether the destination answered that topic
// already has every one of want's values for keys: nothing to alter.
func (a *topicAnswers) destConfigured(topic string, want map[string]*string, keys []string) bool {
	if a == nil || a.dstCfgErr != nil {
		return false
	}
	rc, err := a.dstCfgs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return false
	}
	for _, k := range keys {
		have := ""
		for _, c := range rc.Configs {
			if c.Key == k && c.Value != nil {
				have = *c.Value
			}
		}
		if w := want[k]; w == nil || have != *w {
			return false
		}
	}
	return true
}
