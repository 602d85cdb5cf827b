package linkproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/wire"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

const testTimeout = 30 * time.Second

func newCluster(t *testing.T, brokers int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.SeedTopics(1, "t")}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func startLink(t *testing.T, c *kfake.Cluster, o linkproxy.Options) *linkproxy.Link {
	t.Helper()
	l, err := linkproxy.Start(c.ListenAddrs(), o)
	if err != nil {
		t.Fatalf("start link: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// dialRecorder is a kgo dialer that remembers every address dialled.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func (d *dialRecorder) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

func newClient(t *testing.T, l *linkproxy.Link, d *dialRecorder, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(l.Addrs()...), kgo.Dialer(d.dial)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A kgo client through a link with an added round trip sees every exchange
// take at least that long, and produces and consumes through it without
// ever dialling a broker directly.
func TestRTTObservedByClient(t *testing.T) {
	const rtt = 60 * time.Millisecond
	c := newCluster(t, 3)
	l := startLink(t, c, linkproxy.Options{RTT: rtt})
	ctx := testCtx(t)
	var d dialRecorder
	cl := newClient(t, l, &d, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	for range 3 {
		t0 := time.Now()
		if _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if took := time.Since(t0); took < rtt {
			t.Fatalf("a Metadata round trip took %s through a link adding %s", took, rtt)
		}
	}
	t0 := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if took := time.Since(t0); took < rtt {
		t.Fatalf("a produce took %s through a link adding %s", took, rtt)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("consumed %d records, want the one produced", len(recs))
	}
	proxies := l.Addrs()
	for _, a := range d.dialled() {
		if !slices.Contains(proxies, a) {
			t.Fatalf("client dialled %s, not one of the proxies %v (cluster %v)", a, proxies, c.ListenAddrs())
		}
	}
}

// Fetch answers of megabytes through a link with an added round trip
// (held in the kernel's pipes on Linux, not copied through the proxy)
// reach the client byte for byte and in order, however they were cut.
func TestRTTKeepsLargeAnswersWhole(t *testing.T) {
	c := newCluster(t, 1)
	ctx := testCtx(t)
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer direct.Close()
	var values [][]byte
	for i := range 24 {
		v := make([]byte, 900<<10)
		for j := range v {
			v[j] = byte(i*37 + j*11 + j/257)
		}
		values = append(values, v)
		if err := direct.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	l := startLink(t, c, linkproxy.Options{RTT: 20 * time.Millisecond})
	var d dialRecorder
	cl := newClient(t, l, &d, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(16<<20))
	var got [][]byte
	for len(got) < len(values) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records through the link: %v", len(got), len(values), err)
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	for i := range values {
		if !bytes.Equal(got[i], values[i]) {
			t.Fatalf("record %d came through the link unlike it was produced (%d bytes, %d sent)", i, len(got[i]), len(values[i]))
		}
	}
}

// exchange sends req at its set version on a fresh connection to addr and
// decodes the answer with the package's framing.
func exchange(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(testTimeout))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("linkproxy-test"))
	if _, err := nc.Write(f.AppendRequest(nil, req, 7)); err != nil {
		t.Fatalf("write: %v", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("read: %v", err)
	}
	frame := make([]byte, 4+int(int32(uint32(size[0])<<24|uint32(size[1])<<16|uint32(size[2])<<8|uint32(size[3]))))
	copy(frame, size[:])
	if _, err := io.ReadFull(nc, frame[4:]); err != nil {
		t.Fatalf("read: %v", err)
	}
	resp, err := linkproxy.DecodeResponse(frame, req.Key(), req.GetVersion())
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return resp
}

func hostPort(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// Every broker a Metadata, FindCoordinator or DescribeCluster answer names
// is a proxy of the link, in the old and the new answer formats; a broker
// added to the cluster later gets a proxy of its own, which works.
func TestAddressRewriting(t *testing.T) {
	c := newCluster(t, 3)
	l := startLink(t, c, linkproxy.Options{})
	direct := c.ListenAddrs()
	seed := l.Addrs()[0]
	if len(l.Addrs()) != len(direct) {
		t.Fatalf("link has %d seed proxies for %d brokers", len(l.Addrs()), len(direct))
	}
	behind := func(what, addr string, proxies []string) {
		t.Helper()
		if slices.Contains(direct, addr) || !slices.Contains(proxies, addr) {
			t.Fatalf("%s names %s: want one of the proxies %v, not the cluster's %v", what, addr, proxies, direct)
		}
	}
	named := func(v int16) []string {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		resp := exchange(t, seed, req).(*kmsg.MetadataResponse)
		var out []string
		for _, b := range resp.Brokers {
			out = append(out, hostPort(b.Host, b.Port))
		}
		return out
	}
	for _, v := range []int16{1, 7, 12} { // non-flexible and flexible
		got := named(v)
		if len(got) != 3 {
			t.Fatalf("Metadata v%d names %d brokers, want 3", v, len(got))
		}
		for _, a := range got {
			behind("Metadata v"+strconv.Itoa(int(v)), a, l.Addrs())
		}
	}

	old := kmsg.NewPtrFindCoordinatorRequest()
	old.SetVersion(2)
	old.CoordinatorKey = "g"
	r := exchange(t, seed, old).(*kmsg.FindCoordinatorResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("FindCoordinator v2: error %d", r.ErrorCode)
	}
	behind("FindCoordinator v2", hostPort(r.Host, r.Port), l.Addrs())
	bulk := kmsg.NewPtrFindCoordinatorRequest()
	bulk.SetVersion(4)
	bulk.CoordinatorKeys = []string{"g", "h"}
	r = exchange(t, seed, bulk).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 2 {
		t.Fatalf("FindCoordinator v4: %d coordinators, want 2", len(r.Coordinators))
	}
	for _, co := range r.Coordinators {
		behind("FindCoordinator v4", hostPort(co.Host, co.Port), l.Addrs())
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.SetVersion(0)
	for _, b := range exchange(t, seed, dc).(*kmsg.DescribeClusterResponse).Brokers {
		behind("DescribeCluster", hostPort(b.Host, b.Port), l.Addrs())
	}

	// A broker added later: named behind a new proxy, reachable through it.
	if _, _, err := c.AddNode(-1, 0); err != nil {
		t.Fatalf("add broker: %v", err)
	}
	got := named(12)
	if len(got) != 4 {
		t.Fatalf("Metadata after adding a broker names %d, want 4", len(got))
	}
	var added string
	for _, a := range got {
		if slices.Contains(direct, a) || slices.Contains(c.ListenAddrs(), a) {
			t.Fatalf("Metadata names the cluster's own address %s", a)
		}
		if !slices.Contains(l.Addrs(), a) {
			added = a
		}
	}
	if added == "" {
		t.Fatal("the added broker is named by a seed proxy")
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	if resp := exchange(t, added, av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions through the added broker's proxy: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// produceRequest is a Produce (acks=all) of one batch of one record to
// partition 0 of topic t, whose id is id.
func produceRequest(t *testing.T, id [16]byte, value []byte) *kmsg.ProduceRequest {
	t.Helper()
	b, err := batch.Build(kgo.NoCompression(), time.Now().UnixMilli(), batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]batch.Record{{Value: value}})
	if err != nil {
		t.Fatalf("build batch: %v", err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "t", id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// serialLink starts a one-broker cluster behind a link with a produce
// latency and returns a connection through it, the topic id of "t" and
// when each Produce reached the broker so far.
func serialLink(t *testing.T, latency time.Duration) (*kfake.Cluster, *wire.Conn, [16]byte, func() []time.Time) {
	t.Helper()
	c := newCluster(t, 1)
	var mu sync.Mutex
	var arrived []time.Time
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		return nil, nil, false // the cluster answers it
	})
	l := startLink(t, c, linkproxy.Options{ProduceLatency: latency})
	ctx := testCtx(t)
	conn, err := wire.Dial(ctx, l.Addrs()[0], wire.Options{ClientID: "linkproxy-test"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	meta, err := conn.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return c, conn, meta.(*kmsg.MetadataResponse).Topics[0].TopicID, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(arrived)
	}
}

// waitLanded waits for the answer to Produce i, which must have landed at
// offset i.
func waitLanded(ctx context.Context, t *testing.T, p *wire.Pending, i int) {
	t.Helper()
	resp, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("produce %d: %v", i, err)
	}
	rp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 || rp.BaseOffset != int64(i) {
		t.Fatalf("produce %d: error %d, base offset %d, want offset %d", i, rp.ErrorCode, rp.BaseOffset, i)
	}
}

// checkSerial checks that n Produce requests reached the broker, each at
// least latency after the one before it (whose answer was held that long).
func checkSerial(t *testing.T, arrived []time.Time, n int, latency time.Duration) {
	t.Helper()
	if len(arrived) != n {
		t.Fatalf("broker saw %d Produce requests, want %d", len(arrived), n)
	}
	for i := 1; i < n; i++ {
		if gap := arrived[i].Sub(arrived[i-1]); gap < latency {
			t.Fatalf("Produce %d reached the broker %s after Produce %d, want at least the %s the earlier answer is held", i, gap, i-1, latency)
		}
	}
}

// A link with a produce latency answers each Produce that much later, and
// hands one connection's requests to the broker one at a time: a request
// sent while another is in the broker reaches it only after the earlier
// one's answer has left, delay included.
func TestProduceOneRequestAtATime(t *testing.T) {
	const latency = 40 * time.Millisecond
	_, conn, id, arrivals := serialLink(t, latency)
	ctx := testCtx(t)

	const n = 4
	var pend []*wire.Pending
	t0 := time.Now()
	for i := range n {
		p, err := conn.Issue(produceRequest(t, id, []byte{byte(i)}))
		if err != nil {
			t.Fatalf("issue %d: %v", i, err)
		}
		pend = append(pend, p)
	}
	for i, p := range pend {
		waitLanded(ctx, t, p, i)
		if took := p.CompletedAt().Sub(t0); took < time.Duration(i+1)*latency {
			t.Fatalf("answer %d came %s after the requests were sent, want at least %s", i, took, time.Duration(i+1)*latency)
		}
	}
	checkSerial(t, arrivals(), n, latency)
}

// Under a produce latency, a request larger than what the proxy buffers
// is passed on from socket to socket: every byte of it reaches the broker,
// and the requests after it, large or small, keep their frames (the proxy
// still holds each Produce back until the answer before it has left).
func TestProduceLatencyKeepsLargeRequestsWhole(t *testing.T) {
	const latency = 20 * time.Millisecond
	c, conn, id, arrivals := serialLink(t, latency)
	ctx := testCtx(t)

	// Values of 700 KB and 3 bytes in turn, each byte its own: a lost,
	// doubled or moved byte changes a value.
	var values [][]byte
	var pend []*wire.Pending
	for i := range 6 {
		v := make([]byte, 3)
		if i%2 == 0 {
			v = make([]byte, 700<<10)
		}
		for j := range v {
			v[j] = byte(i*31 + j*7 + j/251)
		}
		values = append(values, v)
		p, err := conn.Issue(produceRequest(t, id, v))
		if err != nil {
			t.Fatalf("issue %d: %v", i, err)
		}
		pend = append(pend, p)
		// A request that is no Produce between them.
		if _, err := conn.Issue(kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("issue metadata %d: %v", i, err)
		}
	}
	for i, p := range pend {
		waitLanded(ctx, t, p, i)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(8<<20))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	var got [][]byte
	for len(got) < len(values) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", len(got), len(values), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	for i := range values {
		if !bytes.Equal(got[i], values[i]) {
			t.Fatalf("record %d: broker holds %d bytes unlike the %d sent", i, len(got[i]), len(values[i]))
		}
	}
	checkSerial(t, arrivals(), len(values), latency)
}

// A transfer through a link with a bandwidth cap takes at least its size
// over the cap, in each direction.
func TestBandwidthCap(t *testing.T) {
	const (
		rate  = 2_000_000 // bytes/s
		total = 1_000_000 // bytes of record values
	)
	c := newCluster(t, 3)
	l := startLink(t, c, linkproxy.Options{Bandwidth: rate})
	ctx := testCtx(t)
	var d dialRecorder
	cl := newClient(t, l, &d, kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	value := bytes.Repeat([]byte("x"), 100_000)
	want := time.Duration(total) * time.Second / rate
	t0 := time.Now()
	var recs []*kgo.Record
	for range total / len(value) {
		recs = append(recs, &kgo.Record{Topic: "t", Value: value})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if took := time.Since(t0); took < want {
		t.Fatalf("producing %d bytes through a %d B/s link took %s, want at least %s", total, rate, took, want)
	}
	// A consumer of its own: the producer's client would have fetched
	// while producing.
	cons := newClient(t, l, &d, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	t0 = time.Now()
	var got int
	for got < total {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("consumed %d of %d bytes before the deadline", got, total)
			}
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got += len(r.Value) })
	}
	if took := time.Since(t0); took < want {
		t.Fatalf("consuming %d bytes through a %d B/s link took %s, want at least %s", total, rate, took, want)
	}
}
