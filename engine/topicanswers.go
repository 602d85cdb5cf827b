package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicAnswers is what the source and the destination said about the
// topics of one start, asked for all of them at once (askTopics). A start
// that asked one topic at a time made four round trips a topic, in turn:
// on loopback the last of a thousand topics got its runners after twelve
// seconds, and across a 50 ms link after 105.
//
// Only the source's Metadata answer is shared when it failed: the source
// is down or another cluster, and every topic gets that error at once
// instead of a timeout each. A failed DescribeConfigs (one topic's
// authorization error fails the whole request) or destination Metadata,
// and a topic missing from an answer, are asked again for the topic
// alone, so each topic gets its own verdict as before.
type topicAnswers struct {
	src, dst         clusterMeta
	srcErr, dstErr   error
	srcCfgs, dstCfgs kadm.ResourceConfigs // nil: the request failed
}

// askTimeout bounds each cluster's questions of one askTopics.
const askTimeout = 30 * time.Second

// askChunk is the most topics one request asks about: with synonyms, a
// real broker's DescribeConfigs answer is a few KB a topic.
const askChunk = 500

// askTopics asks both clusters about topics, each cluster under its own
// askTimeout, the two at the same time; nil for fewer than two topics,
// which addTopic asks about itself.
func (m *mirror) askTopics(ctx context.Context, topics []string) *topicAnswers {
	if len(topics) < 2 {
		return nil
	}
	var a topicAnswers
	var wg sync.WaitGroup
	wg.Go(func() { a.src, a.srcCfgs, a.srcErr = ask(ctx, m.src, topics) })
	wg.Go(func() { a.dst, a.dstCfgs, a.dstErr = ask(ctx, m.e.dst, topics) })
	wg.Wait()
	return &a
}

// ask asks c for the Metadata and the configs of topics, askChunk topics
// a request; the error is the Metadata request's. Configs that could not
// all be had are nil.
func ask(ctx context.Context, c *cluster, topics []string) (clusterMeta, kadm.ResourceConfigs, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var meta clusterMeta
	for chunk := range slices.Chunk(topics, askChunk) {
		m, err := c.metadata(ctx, chunk)
		if err != nil {
			return clusterMeta{}, nil, err
		}
		if meta.topics == nil {
			meta = m
			continue
		}
		for t, tm := range m.topics {
			meta.topics[t] = tm
		}
	}
	var cfgs kadm.ResourceConfigs
	for chunk := range slices.Chunk(topics, askChunk) {
		rcs, err := c.adm.DescribeTopicConfigs(ctx, chunk...)
		if err != nil {
			return meta, nil, nil // asked again per topic (sourceConfigs), or altered (destConfigured)
		}
		cfgs = append(cfgs, rcs...)
	}
	return meta, cfgs, nil
}

// sourceMeta is the source's metadata of topic: from the answers when
// they hold it (or the source failed them), else asked now.
func (a *topicAnswers) sourceMeta(ctx context.Context, src *cluster, topic string) (clusterMeta, error) {
	if a != nil {
		if _, ok := a.src.topics[topic]; ok || a.srcErr != nil {
			return a.src, a.srcErr
		}
	}
	return src.metadata(ctx, []string{topic})
}

// sourceConfigs are the source's configs of topics: from the answers when
// they hold every one, else asked now.
func (a *topicAnswers) sourceConfigs(ctx context.Context, src *cluster, topics []string) (kadm.ResourceConfigs, error) {
	if a != nil && holdsConfigs(a.srcCfgs, topics) {
		return a.srcCfgs, nil
	}
	return src.adm.DescribeTopicConfigs(ctx, topics...)
}

// destMeta is the destination's metadata of topics: from the answers when
// they hold every one, else asked now.
func (a *topicAnswers) destMeta(ctx context.Context, dst *cluster, topics []string) (clusterMeta, error) {
	if a != nil && a.dstErr == nil && !slices.ContainsFunc(topics, func(t string) bool { _, ok := a.dst.topics[t]; return !ok }) {
		return a.dst, nil
	}
	return dst.metadata(ctx, topics)
}

// holdsConfigs reports whether cfgs answer for every one of topics.
func holdsConfigs(cfgs kadm.ResourceConfigs, topics []string) bool {
	return !slices.ContainsFunc(topics, func(t string) bool { _, err := cfgs.On(t, nil); return err != nil })
}

// destConfigured reports whether the destination answered that topic
// already has every one of want's values for keys set on the topic itself:
// nothing to alter. A value the topic takes from the broker's defaults
// does not count: a later change of the default would change the topic.
func (a *topicAnswers) destConfigured(topic string, want map[string]*string, keys []string) bool {
	if a == nil {
		return false
	}
	rc, err := a.dstCfgs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return false
	}
	for _, k := range keys {
		set := false
		for _, c := range rc.Configs {
			if c.Key == k && c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil && want[k] != nil && *c.Value == *want[k] {
				set = true
			}
		}
		if !set {
			return false
		}
	}
	return true
}
