package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/internal/backoff"
)

// cluster is one Kafka cluster the engine talks to, through a franz-go
// client used only for raw requests (never to produce or consume records).
type cluster struct {
	name string // "source" or "destination", for messages
	cl   *kgo.Client
	adm  *kadm.Client
	// leaders are the partition leaders offsets are listed with
	// (listOffsets); nil in a cluster value made for one admin command.
	leaders *metaCache
	// gate holds back fencing while the instance may have lost its shards
	// (see ownerGate); nil for a cluster kmirror does not write to.
	gate *ownerGate
	// jitter draws the full-jitter fraction of the cluster's own retries
	// (an engine's clusters use Config.Jitter).
	jitter func() float64

	// The one-partition lookups of many partitions at once, in shared
	// requests (batcher): offsets, and transaction coordinators.
	offsetLookups batcher[offsetKey, int64]
	coordLookups  batcher[string, int32]
}

// noFetchSession is an option of every consuming client the engine may
// close while it fetches (the __mirror_state readers, the instance group
// member, a rebuild's reader). franz-go's Client.Close reads a source's
// fetch session id while that source's fetch loop may still be setting it
// from an answer, a data race the race detector reports; without fetch
// sessions the id stays 0 and Close does not look further. These clients
// read few partitions, where a session saves next to nothing.
var noFetchSession = kgo.DisableFetchSessions()

// newCluster connects to a cluster. opts carry security settings.
func newCluster(name string, bootstrap []string, clientID string, opts ...kgo.Opt) (*cluster, error) {
	if len(bootstrap) == 0 {
		return nil, fmt.Errorf("%s cluster: no bootstrap servers", name)
	}
	all := append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID(clientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), // the engine sends raw Produce requests with its own identity
		kgo.RequestRetries(2),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryTimeout(10 * time.Second),
		kgo.DisableClientMetrics(),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	c := &cluster{name: name, cl: cl, adm: kadm.NewClient(cl), jitter: rand.Float64}
	c.leaders = newMetaCache(c, []string{}, time.Now)
	return c, nil
}

func (c *cluster) close() { c.cl.Close() }

// partMeta is what an uncached Metadata request says about one partition.
// Caches hold one per partition, so the error is kept as its code.
type partMeta struct {
	leader  int32
	epoch   int32
	errCode int16
}

// err is the partition's error, nil if none.
func (pm partMeta) err() error { return kerr.ErrorForCode(pm.errCode) }

// topicMeta is what an uncached Metadata request says about one topic.
type topicMeta struct {
	id         [16]byte
	partitions []partMeta // indexed by partition number
	err        error
}

// clusterMeta is the answer to one uncached Metadata request.
type clusterMeta struct {
	clusterID string
	brokers   []int32
	addrs     map[int32]string // host:port by broker id
	topics    map[string]topicMeta
}

// fetchSource is what the fetchers of the cluster's partitions need of it:
// a broker's address as the leaders cache names it, and the brokers as
// the cluster names them now.
func (c *cluster) fetchSource() fetch.Source {
	return fetch.Source{
		Addr:    func(broker int32) (string, bool) { return c.leaders.addrOf(broker) },
		Brokers: c.brokerAddrs,
	}
}

// brokerAddrs is the address of every broker by id, as an uncached
// Metadata request names them.
func (c *cluster) brokerAddrs(ctx context.Context) (map[int32]string, error) {
	meta, err := c.metadata(ctx, []string{})
	return meta.addrs, err
}

// metadata issues an uncached Metadata request for topics (nil: all topics).
// kadm's Metadata may answer from a cache up to MetadataMinAge old; leaders
// must be fresh after a NOT_LEADER error, so this goes to the wire.
func (c *cluster) metadata(ctx context.Context, topics []string) (clusterMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return clusterMeta{}, fmt.Errorf("%s metadata: %w", c.name, err)
	}
	m := clusterMeta{topics: make(map[string]topicMeta, len(resp.Topics)), addrs: make(map[int32]string, len(resp.Brokers))}
	if resp.ClusterID != nil {
		m.clusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		m.brokers = append(m.brokers, b.NodeID)
		m.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := topicMeta{id: t.TopicID, err: kerr.ErrorForCode(t.ErrorCode)}
		tm.partitions = make([]partMeta, len(t.Partitions))
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(tm.partitions) {
				continue
			}
			tm.partitions[p.Partition] = partMeta{leader: p.Leader, epoch: p.LeaderEpoch, errCode: p.ErrorCode}
		}
		m.topics[*t.Topic] = tm
	}
	c.forgetTopics(m.topics)
	return m, nil
}

// forgetTopics drops topics from franz-go's metadata cache. franz-go keeps
// a deep copy of the topics of every Metadata request sent through the
// client (about half a KiB per partition) for its sharded requests; the
// engine keeps its own compact copy (metaCache), and a kadm call that needs
// franz-go's loads it again. The purge waits for franz-go's metadata
// goroutine, so it runs in the background rather than hold up the caller.
func (c *cluster) forgetTopics(topics map[string]topicMeta) {
	if len(topics) == 0 {
		return
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	go c.cl.PurgeTopicsFromClient(names...)
}

// offsets returns the log start and log end offsets of one partition,
// asked in the same round.
func (c *cluster) offsets(ctx context.Context, topic string, partition int32) (start, end int64, err error) {
	res := c.offsetLookups.doAll(ctx, []offsetKey{{offsetsStart, tp{topic, partition}}, {offsetsEnd, tp{topic, partition}}}, c.offsetRound)
	if err := res[0].err; err != nil {
		return 0, 0, fmt.Errorf("%s log start %s/%d: %w", c.name, topic, partition, err)
	}
	if err := res[1].err; err != nil {
		return 0, 0, fmt.Errorf("%s log end %s/%d: %w", c.name, topic, partition, err)
	}
	return res[0].v, res[1].v, nil
}

// offsetAt returns one partition's offset at ts (offsetsStart or
// offsetsEnd).
func (c *cluster) offsetAt(ctx context.Context, ts int64, topic string, partition int32) (int64, error) {
	which := "end"
	if ts == offsetsStart {
		which = "start"
	}
	off, err := c.offsetLookups.do(ctx, offsetKey{ts, tp{topic, partition}}, c.offsetRound)
	if err != nil {
		return 0, fmt.Errorf("%s log %s %s/%d: %w", c.name, which, topic, partition, err)
	}
	return off, nil
}

// offsetKey is one partition's offset at a timestamp (offsetsStart or
// offsetsEnd).
type offsetKey struct {
	ts int64
	tp tp
}

// offsetRound lists the offsets of one round of offsetAt lookups: one
// listing per timestamp, at once, one request per leader. Each partition gets its
// own answer: an error of its topic or of its leader is its alone.
func (c *cluster) offsetRound(ctx context.Context, keys []offsetKey) map[offsetKey]batchResult[int64] {
	byTs := make(map[int64][]tp)
	for _, k := range keys {
		byTs[k.ts] = append(byTs[k.ts], k.tp)
	}
	type listed struct {
		ts    int64
		parts []tp
		l     listing
		err   error
	}
	all := make([]listed, 0, len(byTs))
	for ts, parts := range byTs {
		all = append(all, listed{ts: ts, parts: parts})
	}
	var wg sync.WaitGroup
	for i := range all {
		wg.Go(func() { all[i].l, all[i].err = c.listPartitions(ctx, all[i].ts, all[i].parts) })
	}
	wg.Wait()
	out := make(map[offsetKey]batchResult[int64], len(keys))
	for _, a := range all {
		ts, l, err := a.ts, a.l, a.err
		for _, p := range a.parts {
			k := offsetKey{ts, p}
			switch o, ok := l.parts[p]; {
			case err != nil:
				out[k] = batchResult[int64]{err: err}
			case l.topicErrs[p.topic] != nil:
				out[k] = batchResult[int64]{err: l.topicErrs[p.topic]}
			case !ok:
				out[k] = batchResult[int64]{err: errors.New("partition missing from response")}
			default:
				out[k] = batchResult[int64]{v: o.offset, err: o.err}
			}
		}
	}
	return out
}

// endOffsets returns the log end offset of every partition of topics; a
// partition or topic whose offset could not be listed is left out.
func (c *cluster) endOffsets(ctx context.Context, topics ...string) (map[string]map[int32]int64, error) {
	return c.endOffsetsAged(ctx, leadersMaxAge, topics...)
}

// endOffsetsAged is endOffsets starting from leaders at most maxAge old.
func (c *cluster) endOffsetsAged(ctx context.Context, maxAge time.Duration, topics ...string) (map[string]map[int32]int64, error) {
	l, err := c.listOffsetsAged(ctx, offsetsEnd, topics, -1, maxAge)
	if err != nil {
		return nil, fmt.Errorf("%s list end offsets: %w", c.name, err)
	}
	out := make(map[string]map[int32]int64)
	for p, o := range l.parts {
		if o.err != nil {
			continue
		}
		if out[p.topic] == nil {
			out[p.topic] = make(map[int32]int64)
		}
		out[p.topic][p.partition] = o.offset
	}
	return out, nil
}

// Writer identities are acquired with InitProducerID requests the engine
// routes itself (initProducerID). kgo would route them to the transaction
// coordinator too, but it keeps the coordinator of every transactional id it
// routed for as long as the client lives (about 220 bytes each), and every
// mirrored topic has a transactional id of its own (writerID), every
// mirrored transaction another.
const (
	// txnCoordinatorType is FindCoordinator's key type of a transactional id.
	txnCoordinatorType int8 = 1
	// initPIDRetries bounds the retries of an InitProducerID whose
	// coordinator moved or is not ready: six attempts, with about 2.5s of
	// waits in all (initPIDPolicy).
	initPIDRetries = 5
)

// initPIDPolicy spaces InitProducerID's retries: ceilings of 200ms doubling
// up to 2s, twice the fixed 100ms..1s waits they replaced, so a wait is as
// long on average.
var initPIDPolicy = backoff.Policy{Initial: 200 * time.Millisecond, Max: 2 * time.Second}

// initProducerID acquires txnID's producer id with a bumped epoch, which
// fences any older holder of the id, sending InitProducerID straight to the
// coordinator. *coord is where the caller keeps txnID's coordinator between
// calls (-1 when unknown): it is looked up when unknown and after an answer
// saying it moved, so kgo caches nothing per id. A coordinator that moved,
// is loading, is not reachable or is still aborting the transaction of an
// older epoch is looked up and asked again, a few times; any other error (an
// authorization failure, an invalid timeout) is returned at once. The error
// code of the answer is returned as the error.
func (c *cluster) initProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error) {
	for attempt := 0; ; attempt++ {
		// An epoch bump by an instance the group replaced would fence
		// the new owner's writer.
		if err := c.gate.Wait(ctx); err != nil {
			return nil, fmt.Errorf("init producer id %s: %w", txnID, err)
		}
		known := *coord >= 0
		resp, err := c.tryInitProducerID(ctx, txnID, timeoutMs, coord)
		if err == nil || attempt == initPIDRetries || !coordinatorRetriable(err) {
			return resp, err
		}
		*coord = -1
		if known && attempt == 0 {
			continue // the coordinator kept from an earlier call moved: look it up now
		}
		if backoff.Sleep(ctx, initPIDPolicy.Delay(attempt+1, c.jitter())) != nil {
			return nil, ctx.Err()
		}
	}
}

// tryInitProducerID is one attempt of initProducerID.
func (c *cluster) tryInitProducerID(ctx context.Context, txnID string, timeoutMs int32, coord *int32) (*kmsg.InitProducerIDResponse, error) {
	if *coord < 0 {
		node, err := c.txnCoordinator(ctx, txnID)
		if err != nil {
			return nil, err
		}
		*coord = node
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txnID
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID = -1
	req.ProducerEpoch = -1
	kresp, err := c.cl.Broker(int(*coord)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

// txnCoordinator returns the broker that coordinates txnID. kgo sends a raw
// FindCoordinator to any broker, retries it only on connection errors, and
// leaves the coordinator cache alone (only its own coordinator lookups fill
// it). It sends the batch form (v4+) whenever the broker speaks it, and
// fills both the batch answer (Coordinators) and the single-key fields
// whichever version was spoken; the batch answer is read when present.
//
// The lookups of many partitions at once share requests (batcher): one
// FindCoordinator names them all where the broker speaks the batch form.
func (c *cluster) txnCoordinator(ctx context.Context, txnID string) (int32, error) {
	node, err := c.coordLookups.do(ctx, txnID, c.coordRound)
	if err != nil {
		return 0, fmt.Errorf("find coordinator: %w", err)
	}
	return node, nil
}

// coordRound finds the coordinators of one round of transactional ids.
// A broker without the batch form answers only the first key; the others
// are asked one by one.
func (c *cluster) coordRound(ctx context.Context, ids []string) map[string]batchResult[int32] {
	out := make(map[string]batchResult[int32], len(ids))
	for len(ids) > 0 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = txnCoordinatorType
		req.CoordinatorKey = ids[0]
		req.CoordinatorKeys = ids
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			for _, id := range ids {
				out[id] = batchResult[int32]{err: err}
			}
			return out
		}
		if len(resp.Coordinators) == 0 { // v0-3: the first key only
			out[ids[0]] = coordinatorOf(resp.NodeID, resp.ErrorCode)
			ids = ids[1:]
			continue
		}
		for _, rc := range resp.Coordinators {
			out[rc.Key] = coordinatorOf(rc.NodeID, rc.ErrorCode)
		}
		return out
	}
	return out
}

// coordinatorOf is one key's answer to FindCoordinator.
func coordinatorOf(node int32, code int16) batchResult[int32] {
	if err := kerr.ErrorForCode(code); err != nil {
		return batchResult[int32]{err: err}
	}
	if node < 0 {
		return batchResult[int32]{err: kerr.CoordinatorNotAvailable}
	}
	return batchResult[int32]{v: node}
}

// coordinatorRetriable reports errors of initProducerID after which a fresh
// coordinator lookup may succeed: the coordinator moved or is loading its
// state, it is still aborting the open transaction of an older epoch
// (CONCURRENT_TRANSACTIONS), or it could not be reached (any error that is
// no Kafka error code, but the end of ctx or of the client).
func coordinatorRetriable(err error) bool {
	switch {
	case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable),
		errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrClientClosed):
		return false
	}
	var ke *kerr.Error
	return !errors.As(err, &ke)
}
