package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/internal/backoff"
)

// Offsets are listed with ListOffsets requests sent straight to each
// partition's leader, taken from the cluster's own leader cache (a
// metaCache). kadm's ListOffsets finds leaders through franz-go's metadata
// cache instead, which keeps a deep copy of every listed topic (about half
// a KiB per partition) for as long as the client lives; the mirror lists
// every partition's offsets each CheckInterval.

const (
	offsetsEnd   int64 = -1 // ListOffsets timestamp of the log end offset (high watermark)
	offsetsStart int64 = -2 // ListOffsets timestamp of the log start offset

	// leadersMaxAge is how old the leaders and partition counts a listing
	// starts from may be: kadm answered from franz-go's cache, which is
	// as old as MetadataMinAge (newCluster).
	leadersMaxAge = 250 * time.Millisecond
	// listRetries bounds the retries of partitions whose leader moved or
	// did not answer, as kgo.RequestRetries (newCluster) did.
	listRetries = 2
	// listTimeoutMillis is the broker-side timeout of a request, kadm's.
	listTimeoutMillis = 15_000
)

// listPolicy spaces listOffsets' retries: ceilings twice the fixed 250ms
// and 500ms waits (franz-go's default backoff) they replaced, so a wait is
// as long on average.
var listPolicy = backoff.Policy{Initial: 500 * time.Millisecond, Max: time.Second}

// listedOffset is one partition's answer: its offset, or the error its
// leader answered.
type listedOffset struct {
	offset int64
	err    error
}

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// listing is the answer to listOffsets. A topic the metadata reports an
// error for has that error in topicErrs and no partitions.
type listing struct {
	parts     map[tp]listedOffset
	topicErrs map[string]error
}

// listFailure is a partition whose listing failed in one round. A broker's
// answer for the partition (answered) is kept once the retries are spent;
// anything else (no leader, a failed request) fails the whole listing, as
// it did with kadm.
type listFailure struct {
	tp       tp
	err      error
	answered bool
}

// listOffsets lists the offset at ts (offsetsEnd or offsetsStart) of every
// partition of topics or, when p >= 0, of partition p of each. A partition
// whose leader answers an error that may pass (NOT_LEADER and the like) is
// retried on fresh metadata.
func (c *cluster) listOffsets(ctx context.Context, ts int64, topics []string, p int32) (listing, error) {
	return c.listOffsetsAged(ctx, ts, topics, p, leadersMaxAge)
}

// listOffsetsAged is listOffsets starting from leaders at most maxAge old.
func (c *cluster) listOffsetsAged(ctx context.Context, ts int64, topics []string, p int32, maxAge time.Duration) (listing, error) {
	mc := c.leaderCache(topics)
	meta, err := c.leadersFor(ctx, mc, topics, p, maxAge)
	if err != nil {
		return listing{}, err
	}
	out := listing{parts: make(map[tp]listedOffset), topicErrs: make(map[string]error)}
	return out, c.listPending(ctx, mc, meta, ts, out.partitionsOf(meta, topics, p), out, true)
}

// listPartitions lists the offset at ts of each of parts. A partition
// whose listing failed for good has the error as its answer, instead of
// failing the listing (the partitions are those of many callers).
func (c *cluster) listPartitions(ctx context.Context, ts int64, parts []tp) (listing, error) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	// Only the topics listed, each no older than leadersMaxAge: the
	// partitions of a round are those aligning, not every partition the
	// cache knows.
	mc := c.leaderCache(topics)
	for _, t := range topics {
		mc.addTopic(t)
	}
	meta, err := mc.topicsAfter(ctx, topics, mc.now().Add(-leadersMaxAge))
	if err == nil && slices.ContainsFunc(parts, func(p tp) bool {
		tm, ok := meta.topics[p.topic]
		return ok && tm.err == nil && int(p.partition) >= len(tm.partitions)
	}) {
		meta, err = mc.topicsAfter(ctx, topics, mc.now()) // a topic grew since its leaders were cached
	}
	if err != nil {
		return listing{}, err
	}
	out := listing{parts: make(map[tp]listedOffset), topicErrs: make(map[string]error)}
	var pending []tp
	for _, p := range parts {
		tm, ok := meta.topics[p.topic]
		switch {
		case !ok:
			out.topicErrs[p.topic] = kerr.UnknownTopicOrPartition
		case tm.err != nil:
			out.topicErrs[p.topic] = tm.err
		case int(p.partition) >= len(tm.partitions):
			out.parts[p] = listedOffset{err: kerr.UnknownTopicOrPartition}
		default:
			pending = append(pending, p)
		}
	}
	return out, c.listPending(ctx, mc, meta, ts, pending, out, false)
}

// listPending lists pending into out, retrying the partitions whose leader
// moved or did not answer on fresh metadata. Once the retries are spent,
// a failure fails the listing when strict, or else becomes the partition's
// answer.
func (c *cluster) listPending(ctx context.Context, mc *metaCache, meta clusterMeta, ts int64, pending []tp, out listing, strict bool) error {
	var err error
	for attempt := 0; len(pending) > 0; attempt++ {
		sent := mc.now()
		failed := c.listRound(ctx, meta, ts, pending, out.parts)
		if err := fatalFailure(failed); err != nil && strict {
			return err
		}
		if !strict {
			// An authorization failure is a partition's answer at
			// once, as it fails a strict listing at once.
			failed = slices.DeleteFunc(failed, func(f listFailure) bool {
				if isAuthFailure(f.err) {
					out.parts[f.tp] = listedOffset{err: f.err}
					return true
				}
				return false
			})
		}
		if len(failed) == 0 {
			break
		}
		if attempt == listRetries {
			if strict {
				return out.settle(failed)
			}
			for _, f := range failed {
				out.parts[f.tp] = listedOffset{err: f.err}
			}
			return nil
		}
		if backoff.Sleep(ctx, listPolicy.Delay(attempt+1, c.jitter())) != nil {
			return ctx.Err()
		}
		if meta, err = mc.get(ctx, sent); err != nil {
			return err
		}
		pending = pending[:0]
		for _, f := range failed {
			pending = append(pending, f.tp)
		}
	}
	return nil
}

// leaderCache returns the leader cache to list topics with. A cluster
// value made for one admin command has none: it gets one for this call.
func (c *cluster) leaderCache(topics []string) *metaCache {
	if c.leaders == nil {
		return newMetaCache(c, slices.Clone(topics), time.Now)
	}
	return c.leaders
}

// leadersFor returns metadata at most maxAge old that covers
// topics (and partition p of each, when p >= 0), adding the topics the
// cache does not request yet. Cached metadata that lacks a topic or the
// partition, or reports an error for the topic, is asked again: the topic
// may have been created, grown or recreated since.
func (c *cluster) leadersFor(ctx context.Context, mc *metaCache, topics []string, p int32, maxAge time.Duration) (clusterMeta, error) {
	meta, err := mc.get(ctx, mc.now().Add(-maxAge))
	if err != nil {
		return clusterMeta{}, err
	}
	stale := false
	for _, t := range topics {
		tm, ok := meta.topics[t]
		if !ok {
			mc.addTopic(t)
		}
		if !ok || tm.err != nil || int(p) >= len(tm.partitions) {
			stale = true
		}
	}
	if !stale {
		return meta, nil
	}
	return mc.get(ctx, mc.now())
}

// partitionsOf returns the partitions to list and records the topics the
// metadata reports an error for. A partition p beyond a topic's count is
// not listed, and so missing from the answer.
func (l listing) partitionsOf(meta clusterMeta, topics []string, p int32) []tp {
	var want []tp
	for _, t := range topics {
		tm, ok := meta.topics[t]
		switch {
		case !ok:
			l.topicErrs[t] = kerr.UnknownTopicOrPartition
		case tm.err != nil:
			l.topicErrs[t] = tm.err
		case p >= 0:
			if int(p) < len(tm.partitions) {
				want = append(want, tp{t, p})
			}
		default:
			for i := range tm.partitions {
				want = append(want, tp{t, int32(i)})
			}
		}
	}
	return want
}

// settle ends a listing whose retries are spent: partitions a broker
// answered keep that answer; anything else fails the listing.
func (l listing) settle(failed []listFailure) error {
	for _, f := range failed {
		if !f.answered {
			return f.err
		}
		l.parts[f.tp] = listedOffset{err: f.err}
	}
	return nil
}

// fatalFailure is an authorization failure among failed: it fails the
// listing at once, as kadm's did.
func fatalFailure(failed []listFailure) error {
	for _, f := range failed {
		if isAuthFailure(f.err) {
			return f.err
		}
	}
	return nil
}

// listRound sends one ListOffsets request per leader of parts, in
// parallel, records the offsets listed in out and returns the partitions
// that failed.
func (c *cluster) listRound(ctx context.Context, meta clusterMeta, ts int64, parts []tp, out map[tp]listedOffset) []listFailure {
	byLeader, failed := groupByLeader(meta, parts)
	leaders := make([]int32, 0, len(byLeader))
	for id := range byLeader {
		leaders = append(leaders, id)
	}
	resps := make([]*kmsg.ListOffsetsResponse, len(leaders))
	errs := make([]error, len(leaders))
	var wg sync.WaitGroup
	for i, id := range leaders {
		wg.Go(func() {
			resps[i], errs[i] = c.listAt(ctx, id, ts, byLeader[id])
		})
	}
	wg.Wait()
	for i, id := range leaders {
		if errs[i] != nil {
			for _, p := range byLeader[id] {
				failed = append(failed, listFailure{tp: p, err: fmt.Errorf("broker %d: %w", id, errs[i])})
			}
			continue
		}
		failed = collectListed(resps[i], out, failed)
	}
	return failed
}

// groupByLeader sorts parts by leader; a partition without one fails.
func groupByLeader(meta clusterMeta, parts []tp) (map[int32][]tp, []listFailure) {
	byLeader := make(map[int32][]tp)
	var failed []listFailure
	for _, p := range parts {
		leader, err := leaderOf(meta, p)
		if err != nil {
			failed = append(failed, listFailure{tp: p, err: err})
			continue
		}
		byLeader[leader] = append(byLeader[leader], p)
	}
	return byLeader, failed
}

// leaderOf is p's leader in meta, or the error franz-go's sharding gave.
func leaderOf(meta clusterMeta, p tp) (int32, error) {
	tm, ok := meta.topics[p.topic]
	if !ok || int(p.partition) >= len(tm.partitions) {
		return 0, kerr.UnknownTopicOrPartition
	}
	if tm.err != nil {
		return 0, tm.err
	}
	pm := tm.partitions[p.partition]
	if err := pm.err(); err != nil {
		return 0, err
	}
	if pm.leader < 0 {
		return 0, kerr.LeaderNotAvailable
	}
	return pm.leader, nil
}

// listAt sends one ListOffsets request for parts to broker id.
func (c *cluster) listAt(ctx context.Context, id int32, ts int64, parts []tp) (*kmsg.ListOffsetsResponse, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.TimeoutMillis = listTimeoutMillis
	index := make(map[string]int) // topic → its place in req.Topics
	for _, p := range parts {
		i, ok := index[p.topic]
		if !ok {
			i = len(req.Topics)
			index[p.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.partition
		rp.Timestamp = ts
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := c.cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ListOffsetsResponse), nil
}

// collectListed records the offsets of resp in out and appends the
// partitions answered with an error to failed: retried while the error may
// pass, kept as the answer otherwise.
func collectListed(resp *kmsg.ListOffsetsResponse, out map[tp]listedOffset, failed []listFailure) []listFailure {
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			p := tp{t.Topic, rp.Partition}
			err := kerr.ErrorForCode(rp.ErrorCode)
			switch {
			case err == nil:
				out[p] = listedOffset{offset: rp.Offset}
			case replica.Retriable(err) || isAuthFailure(err):
				failed = append(failed, listFailure{tp: p, err: err, answered: true})
			default:
				out[p] = listedOffset{err: err}
			}
		}
	}
	return failed
}

// isAuthFailure reports the errors that fail a whole listing.
func isAuthFailure(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}
