package fetch

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

// Key identifies a fetcher. Partitions of different mirrors never share
// one (each mirror has its own source client and credentials); partitions of
// one mirror led by one broker spread over mirror.num.fetchers fetchers.
type Key struct {
	Mirror string
	Broker int32
	Index  int
}

// Source is what a fetcher needs of its source cluster: where its broker
// is.
type Source struct {
	// Addr is the broker's address as the mirror's metadata last named
	// it (no round trip to a far source), false when it is not known.
	Addr func(broker int32) (string, bool)
	// Brokers asks the cluster for its brokers' addresses now, by
	// broker id.
	Brokers func(ctx context.Context) (map[int32]string, error)
}

// Config is a fetcher's settings.
type Config struct {
	Key     Key
	Source  Source
	Wire    wire.Options // security settings and the fetcher's client id (ClientID, WireOptions)
	MaxWait int32        // the long-poll, in milliseconds (fetch.max.wait.ms)
	Limits  Limits
}

// conns is how many connections a fetcher keeps to its source broker,
// each carrying at most one Fetch at a time: a broker answers the requests
// of one connection in order, so a long-poll would hold back every request
// behind it. At most conns-1 of them long-poll at once; the last is
// kept for partitions known to have data waiting. Connections are dialed
// on first use, so a fetcher that never needs the extra ones never opens
// them.
const conns = 4

// requestTimeout is how long a Fetch may take beyond its long-poll before
// the connection is given up as hung.
const requestTimeout = 15 * time.Second

// Fetcher sends raw Fetch requests for the partitions that want data to one
// source broker, over connections of its own (see conns). It keeps no
// per-partition state beyond the pending wants: the runners own their
// positions, so moving a partition to another fetcher after a leader change
// loses nothing.
//
// Partitions that are behind (data is known to wait at their position) are
// fetched without long-polling and never share a request with caught-up
// ones: a caught-up partition in a request that returns at once would
// spin, and a partition with data in a long-poll would wait for the others.
type Fetcher[R Receiver] struct {
	key     Key
	src     Source
	opts    wire.Options
	maxWait int32
	limits  Limits
	wants   chan Want[R]
	sess    *session[R] // the idle partitions (session.go)
	rtt     roundTrips  // the round trip to the broker, for the runners' fetch sizes
	redial  atomic.Bool // the last dial failed: ask the cluster for the broker's address
}

// New returns a fetcher; Run starts it.
func New[R Receiver](cfg Config) *Fetcher[R] {
	// One request buffer for the fetcher's connections: each Fetch lists
	// every partition it asks for, and kept per connection the buffers
	// took a hundred bytes per idle partition.
	cfg.Wire.Buffers = new(wire.Buffers)
	return &Fetcher[R]{key: cfg.Key, src: cfg.Source, opts: cfg.Wire, maxWait: cfg.MaxWait, limits: cfg.Limits, wants: make(chan Want[R], 1024), sess: newSession[R]()}
}

// RoundTrip is the fetcher's measured round trip to its broker as of now
// (see roundTrips), 0 when there is none.
func (f *Fetcher[R]) RoundTrip(now time.Time) time.Duration { return f.rtt.estimate(now) }

// Post hands the fetcher a want, waiting while its queue is full; false
// when ctx ended first.
func (f *Fetcher[R]) Post(ctx context.Context, w Want[R]) bool {
	select {
	case f.wants <- w:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetchJob is one Fetch request for a connection to send: the wants it
// answers (or, for a session request, the session's members) and its
// long-poll time.
type fetchJob[R Receiver] struct {
	wants   []Want[R]
	session bool
	maxWait int32
	limits  Limits
}

// Run dispatches wants to the fetcher's connections until ctx ends.
func (f *Fetcher[R]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	free := make(chan int, conns) // a connection finished its job
	var (
		jobs    [conns]chan fetchJob[R]
		busy    [conns]bool
		polling [conns]bool
		polls   int
	)
	for i := range jobs {
		jobs[i] = make(chan fetchJob[R], 1)
		wg.Go(func() { f.serve(ctx, jobs[i], free, i) })
	}
	var q wantQueue[R]
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
			job, poll, ok := f.nextJob(&q, busy[:], polls)
			if !ok {
				break
			}
			if poll {
				polling[i] = true
				polls++
			}
			busy[i] = true
			jobs[i] <- job // buffered and idle: never blocks
		}
	}
}

// nextJob chooses the job of a connection that is free, whether it is a
// long-poll, and false when there is nothing to send; busy says which
// connections are, polls how many of them long-poll. The partitions
// behind go first, all in one request, but not onto the last free
// connection while a session request is due:
// their Fetches can all be slow (a far or loaded broker, large answers),
// and the idle partitions' new records would wait for them, up to a hung
// connection's timeout. Then the session request, then the caught-up
// partitions not in the session yet, in one long-poll. One connection is
// always left to the partitions behind: long-polls never take the last.
func (f *Fetcher[R]) nextJob(q *wantQueue[R], busy []bool, polls int) (job fetchJob[R], poll, ok bool) {
	pollable := polls < conns-1
	if !(lastFree(busy) && pollable && f.sess.waiting()) {
		if behind := q.takeBehind(); len(behind) > 0 {
			return fetchJob[R]{wants: behind, limits: f.limits}, false, true
		}
	}
	switch {
	case pollable && f.sess.due():
		return fetchJob[R]{session: true, maxWait: f.sess.wait(f.maxWait), limits: f.limits}, true, true
	case pollable && q.len() > 0:
		if wants := q.takeAll(); len(wants) > 0 { // none: only the wants of runners that have exited
			return fetchJob[R]{wants: wants, maxWait: f.maxWait, limits: f.limits}, true, true
		}
	}
	return fetchJob[R]{}, false, false // caught up, they wait for a long-poll to end
}

// lastFree reports whether exactly one connection is not busy.
func lastFree(busy []bool) bool {
	free := 0
	for _, b := range busy {
		if !b {
			free++
		}
	}
	return free == 1
}

// take queues a runner's want; it replaces the partition's member of the
// fetch session, if it has one.
func (f *Fetcher[R]) take(q *wantQueue[R], w Want[R]) {
	f.sess.leave(w)
	q.add(w)
}

// serve is one connection of the fetcher: it sends the jobs it is given,
// answers their wants and reports back on free.
func (f *Fetcher[R]) serve(ctx context.Context, jobs <-chan fetchJob[R], free chan<- int, i int) {
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
func (f *Fetcher[R]) connect(ctx context.Context, conn *wire.Conn) (*wire.Conn, error) {
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
	addr, ok := f.src.Addr(f.key.Broker)
	if !ok || f.redial.Load() {
		addrs, err := f.src.Brokers(ctx)
		if err != nil {
			return nil, err
		}
		if addr, ok = addrs[f.key.Broker]; !ok {
			return nil, fmt.Errorf("%w: source broker %d is not in the cluster metadata", kerr.NotLeaderForPartition, f.key.Broker)
		}
	}
	c, err := wire.Dial(ctx, addr, f.opts)
	f.redial.Store(err != nil)
	return c, err
}

// fetch sends one Fetch request for job on conn (dialing it if needed) and
// answers each want. It returns the connection to use next, nil if it
// failed, and the broker's throttle time.
func (f *Fetcher[R]) fetch(ctx context.Context, conn *wire.Conn, job fetchJob[R]) (*wire.Conn, time.Duration) {
	failAll := func(err error) {
		for _, w := range job.wants {
			w.To.Deliver(Result{Gen: w.Gen, Offset: w.Offset, Err: fmt.Errorf("fetch from source broker %d: %w", f.key.Broker, err)})
		}
	}
	if job.session {
		failAll = func(err error) { deliverAll(f.sess.failed(f.key.Broker, err)) }
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
	wctx, cancel := context.WithTimeout(ctx, time.Duration(job.maxWait)*time.Millisecond+requestTimeout)
	sent := time.Now()
	resp, err := conn.Request(wctx, req)
	cancel()
	if err != nil {
		// A connection error or a hung broker: either way the
		// connection's answers can no longer be relied on.
		conn.Close()
		failAll(err)
		return nil, 0
	}
	if job.maxWait == 0 {
		// Answered at once: how long it took is a round trip (and the
		// broker's work), not a long-poll's wait.
		now := time.Now()
		f.rtt.observe(now.Sub(sent), now)
	}
	fr := resp.(*kmsg.FetchResponse)
	rtt := f.rtt.estimate(time.Now())
	if job.session {
		deliverAll(f.sess.answer(fr, f.key.Broker, Since(), rtt))
	} else {
		f.answer(job.wants, fr, idx, job.maxWait > 0 && !hasRecords(fr), rtt)
	}
	return conn, time.Duration(fr.ThrottleMillis) * time.Millisecond
}

// deliverAll hands each want its answer.
func deliverAll[R Receiver](ws []Want[R], results []Result) {
	for i, w := range ws {
		w.To.Deliver(results[i])
	}
}

// answer delivers a Fetch response to the wants it answers; a want the
// response leaves out gets an error. expired: the response is a long-poll
// that waited its whole time with no records for any of its partitions;
// their wants go into the fetch session instead (a long-poll that ends
// with another partition's records says nothing about the others: one of
// them parked now would wait for the session's next request for its next
// records, up to a long-poll later). rtt is the fetcher's round trip
// estimate, passed on in each result.
func (f *Fetcher[R]) answer(wants []Want[R], fr *kmsg.FetchResponse, idx *wantIndex, expired bool, rtt time.Duration) {
	answered := make([]bool, len(wants))
	topErr := kerr.ErrorForCode(fr.ErrorCode)
	at := Since()
	for _, t := range fr.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			j, name, ok := idx.find(t.Topic, t.TopicID, p.Partition)
			if !ok || answered[j] {
				continue
			}
			answered[j] = true
			w := wants[j]
			res := resultOf(w, p, name, f.key.Broker, at, rtt)
			if expired && res.idleAt(w.Offset) && !w.MustAnswer {
				// Nothing new: the partition waits in the session
				// from now on, its runner left asleep.
				w.To.SetSource(res.HWM, res.LogStart)
				f.sess.park(w)
				continue
			}
			w.To.Deliver(res)
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
		w.To.Deliver(Result{Gen: w.Gen, Offset: w.Offset, Err: fmt.Errorf("fetch %s/%d from source broker %d: partition missing from response: %w", w.topic(), w.Partition, f.key.Broker, err)})
	}
}

// ClientID is the client id of a fetcher's connections,
// kmirror-<instance>-<fetcher index>-<mirror>: the same on every source
// broker, so a source quota on it limits that fetcher of that mirror.
func ClientID(instance string, index int, mirror string) string {
	return "kmirror-" + instance + "-" + strconv.Itoa(index) + "-" + mirror
}

// WireOptions returns the settings of a fetcher's own connections: the
// dialer (which does TLS when the source needs it) and the SASL mechanism
// of the mirror's source client, so fetch connections are secured exactly
// as the rest of the mirror's source traffic.
func WireOptions(cl *kgo.Client, clientID string) wire.Options {
	opts := wire.Options{ClientID: clientID}
	if d, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok {
		opts.Dialer = d
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok && len(ms) > 0 {
		opts.SASL = ms[0]
	}
	return opts
}
