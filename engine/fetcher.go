package engine

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kmirror/kmirror/engine/wire"
)

// fetchKey identifies a fetcher. Partitions of different mirrors never share
// one (each mirror has its own source client and credentials); partitions of
// one mirror led by one broker spread over mirror.num.fetchers fetchers.
type fetchKey struct {
	mirror string
	broker int32
	index  int
}

// want asks a fetcher for one partition's records from offset. The runner
// that owns the partition keeps at most one want outstanding; the fetcher
// answers it exactly once with to.deliver, which never blocks the fetcher.
//
// A fetcher holds every idle partition's want, some twice (queued and in a
// long-poll's request), so it is kept small: the topic is the runner's.
type want struct {
	topicID     [16]byte
	to          *runner // answered with to.deliver; to.topic names the topic
	offset      int64
	gen         uint64
	partition   int32
	leaderEpoch int32 // CurrentLeaderEpoch: the source epoch the runner last saw
	lastEpoch   int32 // LastFetchedEpoch: epoch of the last batch fetched, -1 none
	maxBytes    int32
	behind      bool // offset is below the high watermark last seen: data is waiting
	// mustAnswer: the runner must hear even an empty answer (it is
	// retrying after a fetch error, and an answer ends that), so the
	// want is never parked in the fetch session.
	mustAnswer bool
}

// topic is the topic of the want's partition.
func (w *want) topic() string { return w.to.topic }

// fetchResult is a fetcher's answer to a want.
type fetchResult struct {
	gen        uint64
	offset     int64  // the offset that was asked for
	records    []byte // raw batches, still compressed; owned by the receiver
	hwm        int64
	logStart   int64
	divergence *kmsg.FetchResponseTopicPartitionDivergingEpoch // nil unless the broker reported one
	err        error
	at         time.Duration // when the answer arrived, as time.Since(clockBase)
}

// clockBase anchors fetchResult.at: a duration on the monotonic clock takes
// eight bytes where a time.Time takes twenty-four, and every runner holds
// a fetchResult in its inbox.
var clockBase = time.Now()

// fetchConns is how many connections a fetcher keeps to its source broker,
// each carrying at most one Fetch at a time: a broker answers the requests
// of one connection in order, so a long-poll would hold back every request
// behind it. At most fetchConns-1 of them long-poll at once; the last is
// kept for partitions known to have data waiting. Connections are dialed
// on first use, so a fetcher that never needs the extra ones never opens
// them.
const fetchConns = 4

// fetchTimeout is how long a Fetch may take beyond its long-poll before the
// connection is given up as hung.
const fetchTimeout = 15 * time.Second

// fetcher sends raw Fetch requests for the partitions that want data to one
// source broker, over connections of its own (see fetchConns). It keeps no
// per-partition state beyond the pending wants: the runners own their
// positions, so moving a partition to another fetcher after a leader change
// loses nothing.
//
// Partitions that are behind (data is known to wait at their position) are
// fetched without long-polling and never share a request with caught-up
// ones: a caught-up partition in a request that returns at once would
// spin, and a partition with data in a long-poll would wait for the others.
type fetcher struct {
	key     fetchKey
	src     *cluster
	opts    wire.Options // security settings and the fetcher's client id
	maxWait int32
	limits  fetchLimits
	wants   chan want
	sess    *fetchSession // the idle partitions (fetchsession.go)
	redial  atomic.Bool   // the last dial failed: ask the cluster for the broker's address
}

// fetchLimits are a Fetch request's byte limits (fetch.min.bytes,
// fetch.response.max.bytes); zero fields take Kafka's replica
// fetcher defaults.
type fetchLimits struct {
	minBytes, maxBytes int32
}

func newFetcher(key fetchKey, src *cluster, opts wire.Options, maxWaitMs int32, limits fetchLimits) *fetcher {
	// One request buffer for the fetcher's connections: each Fetch lists
	// every partition it asks for, and kept per connection the buffers
	// took a hundred bytes per idle partition.
	opts.Buffers = new(wire.Buffers)
	return &fetcher{key: key, src: src, opts: opts, maxWait: maxWaitMs, limits: limits, wants: make(chan want, 1024), sess: newFetchSession()}
}

// fetchJob is one Fetch request for a connection to send: the wants it
// answers (or, for a session request, the session's members) and its
// long-poll time.
type fetchJob struct {
	wants   []want
	session bool
	maxWait int32
	limits  fetchLimits
}

// run dispatches wants to the fetcher's connections until ctx ends.
func (f *fetcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	free := make(chan int, fetchConns) // a connection finished its job
	var (
		jobs    [fetchConns]chan fetchJob
		busy    [fetchConns]bool
		polling [fetchConns]bool
		polls   int
	)
	for i := range jobs {
		jobs[i] = make(chan fetchJob, 1)
		wg.Go(func() { f.serve(ctx, jobs[i], free, i) })
	}
	var q wantQueue
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-f.wants:
			f.take(&q, w)
		drain:
			for {
				select {
				case w := <-f.wants:
					f.take(&q, w)
				default:
					break drain
				}
			}
		case i := <-free:
			busy[i] = false
			if polling[i] {
				polling[i] = false
				polls--
			}
		}
		for {
			i := slices.Index(busy[:], false)
			if i < 0 {
				break
			}
			var job fetchJob
			if behind := q.takeBehind(); len(behind) > 0 {
				job = fetchJob{wants: behind, limits: f.limits}
			} else if polls < fetchConns-1 && f.sess.due() {
				job = fetchJob{session: true, maxWait: f.maxWait, limits: f.limits}
				polling[i] = true
				polls++
			} else if q.len() == 0 {
				break
			} else if polls < fetchConns-1 {
				wants := q.takeAll()
				if len(wants) == 0 {
					continue // only the wants of runners that have exited
				}
				job = fetchJob{wants: wants, maxWait: f.maxWait, limits: f.limits}
				polling[i] = true
				polls++
			} else {
				break // caught up: they wait for a long-poll to end
			}
			busy[i] = true
			jobs[i] <- job // buffered and idle: never blocks
		}
	}
}

// take queues a runner's want; it replaces the partition's member of the
// fetch session, if it has one.
func (f *fetcher) take(q *wantQueue, w want) {
	f.sess.leave(w)
	q.add(w)
}

// wantQueue holds the wants waiting for a connection, one per partition: a
// newer want replaces the older one in place (a runner that realigned posts
// a new want while its previous one may still wait here; the want of a
// runner that has exited is dropped when taken, see dropExited), so one
// request never asks for a partition twice; the answers could not be told
// apart.
type wantQueue struct {
	wants []want
	at    map[*runner]int32 // index in wants of each partition's want
}

func (q *wantQueue) len() int { return len(q.wants) }

func (q *wantQueue) add(w want) {
	if i, ok := q.at[w.to]; ok {
		q.wants[i] = w
		return
	}
	if q.at == nil {
		q.at = make(map[*runner]int32)
	}
	q.at[w.to] = int32(len(q.wants))
	q.wants = append(q.wants, w)
}

// takeAll removes and returns every want, in a slice of their exact size:
// the slice lives as long as the long-poll it is sent in, and the room a
// queue grown by appending keeps (up to as much again) would live with it.
func (q *wantQueue) takeAll() []want {
	out := slices.Clone(q.wants)
	q.wants = nil
	clear(q.at)
	return dropExited(out)
}

// dropExited removes the wants of runners that have exited. The queue
// knows a partition's want by its runner, and a topic removed and added
// again (its ownership moved away and back) has a new runner for the same
// partition while the old one's want may still wait: one request must not
// ask for the partition twice.
func dropExited(ws []want) []want {
	return slices.DeleteFunc(ws, func(w want) bool { return w.to.hasExited() })
}

// takeBehind removes and returns the wants of partitions known to be
// behind, nil if there are none.
func (q *wantQueue) takeBehind() []want {
	behind, rest := splitBehind(q.wants)
	if len(behind) == 0 {
		return nil
	}
	q.wants = rest
	clear(q.at)
	for i, w := range rest {
		q.at[w.to] = int32(i)
	}
	return dropExited(behind)
}

// splitBehind separates the wants of partitions known to be behind from the
// others, into new slices.
func splitBehind(pending []want) (behind, rest []want) {
	n := 0
	for _, w := range pending {
		if w.behind {
			n++
		}
	}
	if n == 0 {
		return nil, pending
	}
	behind = make([]want, 0, n)
	rest = make([]want, 0, len(pending)-n)
	for _, w := range pending {
		if w.behind {
			behind = append(behind, w)
		} else {
			rest = append(rest, w)
		}
	}
	return behind, rest
}

// serve is one connection of the fetcher: it sends the jobs it is given,
// answers their wants and reports back on free.
func (f *fetcher) serve(ctx context.Context, jobs <-chan fetchJob, free chan<- int, i int) {
	var conn *wire.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-jobs:
			var throttle time.Duration
			conn, throttle = f.fetch(ctx, conn, job)
			if throttle > 0 {
				// The broker applies a quota to this client id: it
				// holds the connection that long anyway.
				t := time.NewTimer(throttle)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			free <- i // buffered for every connection: never blocks
		}
	}
}

// connect returns conn if it is still usable, or a new connection to the
// fetcher's broker.
func (f *fetcher) connect(ctx context.Context, conn *wire.Conn) (*wire.Conn, error) {
	if conn != nil {
		select {
		case <-conn.Done(): // failed, or closed by the broker while idle
			conn.Close()
		default:
			return conn, nil
		}
	}
	// The broker's address as the mirror's metadata last named it (no
	// round trip to a far source); after a failed dial, or when it is
	// not known, as the cluster names it now.
	addr, ok := f.src.leaders.addrOf(f.key.broker)
	if !ok || f.redial.Load() {
		meta, err := f.src.metadata(ctx, []string{})
		if err != nil {
			return nil, err
		}
		if addr, ok = meta.addrs[f.key.broker]; !ok {
			return nil, fmt.Errorf("%w: source broker %d is not in the cluster metadata", kerr.NotLeaderForPartition, f.key.broker)
		}
	}
	c, err := wire.Dial(ctx, addr, f.opts)
	f.redial.Store(err != nil)
	return c, err
}

// fetch sends one Fetch request for job on conn (dialing it if needed) and
// answers each want. It returns the connection to use next, nil if it
// failed, and the broker's throttle time.
func (f *fetcher) fetch(ctx context.Context, conn *wire.Conn, job fetchJob) (*wire.Conn, time.Duration) {
	failAll := func(err error) {
		for _, w := range job.wants {
			w.to.deliver(fetchResult{gen: w.gen, offset: w.offset, err: fmt.Errorf("fetch from source broker %d: %w", f.key.broker, err)})
		}
	}
	if job.session {
		failAll = func(err error) { f.deliverAll(f.sess.failed(f.key.broker, err)) }
	}
	conn, err := f.connect(ctx, conn)
	if err != nil {
		failAll(err)
		return nil, 0
	}
	var (
		req *kmsg.FetchRequest
		idx *wantIndex
	)
	if job.session {
		req = f.sess.request(job.maxWait, job.limits)
	} else {
		req, idx = fetchRequest(job)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(job.maxWait)*time.Millisecond+fetchTimeout)
	resp, err := conn.Request(wctx, req)
	cancel()
	if err != nil {
		// A connection error or a hung broker: either way the
		// connection's answers can no longer be relied on.
		conn.Close()
		failAll(err)
		return nil, 0
	}
	fr := resp.(*kmsg.FetchResponse)
	if job.session {
		f.deliverAll(f.sess.answer(fr, f.key.broker, time.Since(clockBase)))
	} else {
		f.answer(job.wants, fr, idx, job.maxWait > 0 && !hasRecords(fr))
	}
	return conn, time.Duration(fr.ThrottleMillis) * time.Millisecond
}

// deliverAll hands each want its answer.
func (f *fetcher) deliverAll(ws []want, results []fetchResult) {
	for i, w := range ws {
		w.to.deliver(results[i])
	}
}

// newFetchRequest is a Fetch request with no partitions and no session.
func newFetchRequest(maxWait int32, limits fetchLimits) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes, req.MaxBytes = 1, 64<<20
	if limits.minBytes > 0 {
		req.MinBytes = limits.minBytes
	}
	if limits.maxBytes > 0 {
		req.MaxBytes = limits.maxBytes
	}
	req.IsolationLevel = 0 // READ_UNCOMMITTED: everything up to the high watermark
	req.SessionID = 0
	req.SessionEpoch = -1
	return req
}

// fetchPartition is w's partition in a Fetch request.
func fetchPartition(w want) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = w.partition
	rp.FetchOffset = w.offset
	rp.CurrentLeaderEpoch = w.leaderEpoch
	rp.LastFetchedEpoch = w.lastEpoch
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = w.maxBytes
	return rp
}

// fetchRequest builds the sessionless Fetch request of job, with the index
// that finds a want from a response partition.
func fetchRequest(job fetchJob) (*kmsg.FetchRequest, *wantIndex) {
	req := newFetchRequest(job.maxWait, job.limits)
	idx := newWantIndex()
	for j, w := range job.wants {
		i, added := idx.add(w.topic(), w.topicID, w.partition, j)
		if added {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = w.topic()
			rt.TopicID = w.topicID
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fetchPartition(w))
	}
	return req, idx
}

// wantIndex finds the want a response partition answers: by topic (by
// name, or by id in v13+ answers), then by partition number. A long-poll
// lists every idle partition its connection serves and lives as long as
// the poll, so it costs four bytes per partition, not a map entry.
type wantIndex struct {
	byName map[string]int   // topic → its place in topics and in the request
	byID   map[[16]byte]int // the same by topic id
	topics []indexedTopic
}

// indexedTopic is one topic of a wantIndex.
type indexedTopic struct {
	name  string
	wants []int32 // by partition number: the want's index + 1, 0 when not asked
}

func newWantIndex() *wantIndex {
	return &wantIndex{byName: make(map[string]int), byID: make(map[[16]byte]int)}
}

// add records want j for partition p of a topic and returns the topic's
// place, and whether the topic is new to the index.
func (x *wantIndex) add(name string, id [16]byte, p int32, j int) (int, bool) {
	i, ok := x.byName[name]
	if !ok {
		i = len(x.topics)
		x.byName[name] = i
		x.topics = append(x.topics, indexedTopic{name: name})
	}
	x.byID[id] = i
	t := &x.topics[i]
	if n := int(p) + 1; n > len(t.wants) {
		t.wants = append(t.wants, make([]int32, n-len(t.wants))...)
	}
	t.wants[p] = int32(j) + 1
	return i, !ok
}

// find returns the index of the want of partition p of the topic a
// response names (name, or id when name is empty), and the topic's name.
func (x *wantIndex) find(name string, id [16]byte, p int32) (int, string, bool) {
	i, ok := x.byName[name]
	if name == "" {
		i, ok = x.byID[id]
	}
	if !ok || p < 0 {
		return 0, name, false
	}
	t := x.topics[i]
	if int(p) >= len(t.wants) || t.wants[p] == 0 {
		return 0, t.name, false
	}
	return int(t.wants[p]) - 1, t.name, true
}

// answer delivers a Fetch response to the wants it answers; a want the
// response leaves out gets an error. expired: the response is a long-poll
// that waited its whole time with no records for any of its partitions;
// their wants go into the fetch session instead (a long-poll that ends
// with another partition's records says nothing about the others: one of
// them parked now would wait for the session's next request for its next
// records, up to a long-poll later).
func (f *fetcher) answer(wants []want, fr *kmsg.FetchResponse, idx *wantIndex, expired bool) {
	answered := make([]bool, len(wants))
	topErr := kerr.ErrorForCode(fr.ErrorCode)
	at := time.Since(clockBase)
	for _, t := range fr.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			j, name, ok := idx.find(t.Topic, t.TopicID, p.Partition)
			if !ok || answered[j] {
				continue
			}
			answered[j] = true
			w := wants[j]
			res := resultOf(w, p, name, f.key.broker, at)
			if expired && res.idleAt(w.offset) && !w.mustAnswer {
				// Nothing new: the partition waits in the session
				// from now on, its runner left asleep.
				w.to.stats.setSource(res.hwm, res.logStart)
				f.sess.park(w)
				continue
			}
			w.to.deliver(res)
		}
	}
	for j, w := range wants {
		if answered[j] {
			continue
		}
		err := topErr
		if err == nil {
			err = kerr.UnknownTopicOrPartition
		}
		w.to.deliver(fetchResult{gen: w.gen, offset: w.offset, err: fmt.Errorf("fetch %s/%d from source broker %d: partition missing from response: %w", w.topic(), w.partition, f.key.broker, err)})
	}
}

// hasRecords reports whether a Fetch response holds records for any
// partition.
func hasRecords(fr *kmsg.FetchResponse) bool {
	for _, t := range fr.Topics {
		for i := range t.Partitions {
			if len(t.Partitions[i].RecordBatches) > 0 {
				return true
			}
		}
	}
	return false
}

// resultOf is the fetch result of w from its partition's answer p (of
// topic name).
func resultOf(w want, p *kmsg.FetchResponseTopicPartition, name string, broker int32, at time.Duration) fetchResult {
	res := fetchResult{gen: w.gen, offset: w.offset, records: p.RecordBatches, hwm: p.HighWatermark, logStart: p.LogStartOffset, at: at}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		res.err = fetchErr(name, p.Partition, w.offset, broker, err)
	}
	if p.DivergingEpoch.Epoch >= 0 && p.DivergingEpoch.EndOffset >= 0 {
		d := p.DivergingEpoch
		res.divergence = &d
	}
	return res
}

// fetchErr is the error of a fetch of topic/p at offset from broker.
func fetchErr(topic string, p int32, offset int64, broker int32, err error) error {
	return fmt.Errorf("fetch %s/%d at %d from source broker %d: %w", topic, p, offset, broker, err)
}

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// fetchClientID is the client id of a fetcher's connections,
// kmirror-<instance>-<fetcher index>-<mirror>: the same on every source
// broker, so a source quota on it limits that fetcher of that mirror.
func fetchClientID(instance string, index int, mirror string) string {
	return "kmirror-" + instance + "-" + strconv.Itoa(index) + "-" + mirror
}

// sourceWireOptions returns the settings of a fetcher's own connections:
// the dialer (which does TLS when the source needs it) and the SASL
// mechanism of the mirror's source client, so fetch connections are
// secured exactly as the rest of the mirror's source traffic.
func sourceWireOptions(cl *kgo.Client, clientID string) wire.Options {
	opts := wire.Options{ClientID: clientID}
	if d, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok {
		opts.Dialer = d
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok && len(ms) > 0 {
		opts.SASL = ms[0]
	}
	return opts
}
