package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestRoundTrip(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	addr := cluster.ListenAddrs()[0]
	c := dialTest(t, ctx, addr, Options{})

	if c.Addr() != addr {
		t.Errorf("Addr() = %q, want %q", c.Addr(), addr)
	}
	if v, ok := c.MaxVersion(int16(kmsg.Produce)); !ok || v != 13 {
		t.Errorf("MaxVersion(Produce) = %d, %v; want 13, true (kfake)", v, ok)
	}
	if _, ok := c.MaxVersion(38); ok { // CreateDelegationToken: kfake does not implement it
		t.Errorf("MaxVersion(38) reported a key kfake does not advertise")
	}

	raw, err := c.Request(ctx, apiVersionsRequest())
	if err != nil {
		t.Fatalf("api versions: %v", err)
	}
	av := raw.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil || len(av.ApiKeys) == 0 {
		t.Fatalf("api versions: err %v, %d keys", err, len(av.ApiKeys))
	}

	_, md, err := metadata(ctx, c, testTopic, 0)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if md.ClusterID == nil || *md.ClusterID != "kmirror-wire-TestRoundTrip" {
		t.Errorf("cluster id = %v, want kmirror-wire-TestRoundTrip", md.ClusterID)
	}
	if len(md.Brokers) != 3 {
		t.Errorf("brokers = %d, want 3", len(md.Brokers))
	}
	if md.Version != 13 {
		t.Errorf("metadata version = %d, want 13 (min of kmsg and kfake max)", md.Version)
	}
}

// TestIssueThenWaitOutOfOrder issues mixed requests back to back and waits
// on them newest first: responses are matched to their requests regardless.
func TestIssueThenWaitOutOfOrder(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[1], Options{})

	var pendings []*Pending
	for i := range 20 {
		var req kmsg.Request = apiVersionsRequest()
		if i%2 == 1 {
			req = kmsg.NewPtrMetadataRequest()
		}
		p, err := c.Issue(req)
		if err != nil {
			t.Fatalf("issue %d: %v", i, err)
		}
		pendings = append(pendings, p)
	}
	for i := len(pendings) - 1; i >= 0; i-- {
		raw, err := pendings[i].Wait(ctx)
		if err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		switch r := raw.(type) {
		case *kmsg.ApiVersionsResponse:
			if i%2 != 0 || len(r.ApiKeys) == 0 {
				t.Errorf("response %d: ApiVersions with %d keys", i, len(r.ApiKeys))
			}
		case *kmsg.MetadataResponse:
			if i%2 != 1 || len(r.Brokers) != 3 {
				t.Errorf("response %d: Metadata with %d brokers", i, len(r.Brokers))
			}
		default:
			t.Errorf("response %d: unexpected %T", i, raw)
		}
	}
}

func TestIssueConcurrentCallers(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[2], Options{})

	const callers, each = 8, 25
	errs := make(chan error, callers*each)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSharedBuffers: connections sharing request buffers, each written
// from several goroutines, still answer every request (a buffer handed to
// two writes at once would garble one of them, and the race detector would
// see it), and one buffer is kept between them; a buffer too large to keep
// is let go.
func TestSharedBuffers(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	bufs := new(Buffers)
	conns := []*Conn{
		dialTest(t, ctx, cluster.ListenAddrs()[0], Options{Buffers: bufs}),
		dialTest(t, ctx, cluster.ListenAddrs()[1], Options{Buffers: bufs}),
	}
	const callers, each = 4, 25
	errs := make(chan error, 2*callers*each)
	var wg sync.WaitGroup
	for _, c := range conns {
		for range callers {
			wg.Go(func() {
				for i := range each {
					req := kmsg.NewPtrMetadataRequest()
					topic := kmsg.NewMetadataRequestTopic()
					name := fmt.Sprintf("t%d", i)
					topic.Topic = &name
					req.Topics = append(req.Topics, topic)
					raw, err := c.Request(ctx, req)
					if err != nil {
						errs <- err
						continue
					}
					resp := raw.(*kmsg.MetadataResponse)
					if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != name {
						errs <- fmt.Errorf("asked for topic %s, the answer is about %v", name, resp.Topics)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bufs.free == nil || cap(bufs.free) == 0 {
		t.Fatal("no buffer kept between the connections")
	}
	bufs.take()
	bufs.give(make([]byte, 0, keepWriteBuf+1))
	if bufs.free != nil {
		t.Fatalf("kept a %d-byte buffer, over the %d-byte limit", cap(bufs.free), keepWriteBuf)
	}
}

// TestVersionCapping dials a cluster that emulates Kafka 2.3: ApiVersions
// v3+ is unknown there, so negotiation must retry lower, and keys newer
// than 2.3 must be refused before anything is written.
func TestVersionCapping(t *testing.T) {
	cluster := newCluster(t, kfake.MaxVersions(kversion.V2_3_0()))
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})

	if v, ok := c.MaxVersion(apiVersionsKey); !ok || v != 2 {
		t.Errorf("MaxVersion(ApiVersions) = %d, %v; want 2, true", v, ok)
	}
	brokerMax, _ := c.MaxVersion(int16(kmsg.Metadata))
	req := kmsg.NewPtrMetadataRequest()
	if _, err := c.Request(ctx, req); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if req.Version != brokerMax || brokerMax >= req.MaxVersion() {
		t.Errorf("metadata sent at v%d, broker max v%d, kmsg max v%d", req.Version, brokerMax, req.MaxVersion())
	}

	_, err := c.Issue(kmsg.NewPtrDescribeClusterRequest())
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("DescribeCluster on a 2.3 broker: err = %v, want ErrUnsupportedVersion", err)
	}
	// Refusing a request must not disturb the connection.
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("metadata after refusal: %v", err)
	}
}

// TestApiVersionsFallsBackToV0 makes the broker answer UNSUPPORTED_VERSION
// without telling which ApiVersions version it speaks.
func TestApiVersionsFallsBackToV0(t *testing.T) {
	cluster := newCluster(t)
	seen := make(chan int16, 8)
	var mu sync.Mutex
	rejected := false
	cluster.ControlKey(apiVersionsKey, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		seen <- kreq.GetVersion()
		mu.Lock()
		defer mu.Unlock()
		if rejected {
			return nil, nil, false
		}
		rejected = true
		resp := kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil, true
	})
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})

	first, second := <-seen, <-seen
	if first != kmsg.NewPtrApiVersionsRequest().MaxVersion() || second != 0 {
		t.Errorf("ApiVersions sent at v%d then v%d, want v%d then v0", first, second, kmsg.NewPtrApiVersionsRequest().MaxVersion())
	}
	if _, ok := c.MaxVersion(int16(kmsg.Produce)); !ok {
		t.Errorf("versions not recorded after v0 fallback")
	}
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("metadata: %v", err)
	}
}

func TestAcksZeroRejected(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})

	req := kmsg.NewPtrProduceRequest()
	req.Acks = 0
	if _, err := c.Issue(req); !errors.Is(err, ErrAcksZero) {
		t.Fatalf("acks=0: err = %v, want ErrAcksZero", err)
	}
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("metadata after acks=0 refusal: %v", err)
	}
}

// apiVersionsRequest is valid at every version: v3+ brokers reject an empty
// client software name.
func apiVersionsRequest() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "kmirror-wire-test"
	req.ClientSoftwareVersion = "0"
	return req
}

// longPollFetch is a Fetch at the end of an empty partition: the broker
// holds it for maxWait before answering.
func longPollFetch(info partitionInfo, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = testTopic
	rt.TopicID = info.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = 0
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestAbandonedWaitKeepsOrder gives up waiting on a long poll; its response
// still arrives later and is matched to it, and the request issued behind it
// gets its own response.
func TestAbandonedWaitKeepsOrder(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	info := testTopicInfo(t, ctx, cluster)
	c := dialTest(t, ctx, info.leaderAddr, Options{})

	fetch, err := c.Issue(longPollFetch(info, 25*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fetch.Wait(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with canceled ctx: err = %v, want context.Canceled", err)
	}
	md, err := c.Issue(kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatal(err)
	}

	// A record on another connection ends the long poll.
	writer := dialTest(t, ctx, info.leaderAddr, Options{})
	raw, err := writer.Request(ctx, ProduceRequest(testTopic, info.topicID, 0, buildBatch(-1, -1, -1, time.Now().UnixMilli(), []byte("wake")), 10*time.Second, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ProduceAnswer(raw); err != nil {
		t.Fatal(err)
	}

	raw, err = fetch.Wait(ctx)
	if err != nil {
		t.Fatalf("abandoned fetch: %v", err)
	}
	if f := raw.(*kmsg.FetchResponse); len(f.Topics) != 1 || len(f.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("abandoned fetch returned no records")
	}
	raw, err = md.Wait(ctx)
	if err != nil {
		t.Fatalf("metadata behind abandoned fetch: %v", err)
	}
	if _, ok := raw.(*kmsg.MetadataResponse); !ok {
		t.Fatalf("got %T, want *kmsg.MetadataResponse", raw)
	}
}

// TestBrokerCloseFailsPending closes the whole cluster while long polls are
// in flight: every pending request fails promptly, not after the poll's
// max wait.
func TestBrokerCloseFailsPending(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	info := testTopicInfo(t, ctx, cluster)
	c := dialTest(t, ctx, info.leaderAddr, Options{})

	var pendings []*Pending
	for range 4 {
		p, err := c.Issue(longPollFetch(info, 25*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		pendings = append(pendings, p)
	}
	cluster.Close()

	prompt, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for i, p := range pendings {
		_, err := p.Wait(prompt)
		if !errors.Is(err, ErrConnClosed) {
			t.Fatalf("pending %d: err = %v, want ErrConnClosed", i, err)
		}
	}
	if _, err := c.Issue(kmsg.NewPtrMetadataRequest()); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("issue on dead conn: err = %v, want ErrConnClosed", err)
	}
}

func TestCloseFailsPending(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	info := testTopicInfo(t, ctx, cluster)
	c, err := Dial(ctx, info.leaderAddr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Issue(longPollFetch(info, 25*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("pending request not completed when Close returned")
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrConnClosed) || !errors.Is(err, errClosedByCaller) {
		t.Fatalf("err = %v, want ErrConnClosed from Close", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// fakeBroker serves one scripted connection: it answers ApiVersions and
// then hands every other request to answer.
type fakeBroker struct {
	answer func(w io.Writer, key, version int16, corr int32)
}

func (f *fakeBroker) serve(conn net.Conn) {
	defer conn.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(body[0:]))
		version := int16(binary.BigEndian.Uint16(body[2:]))
		corr := int32(binary.BigEndian.Uint32(body[4:]))
		if key != apiVersionsKey {
			f.answer(conn, key, version, corr)
			continue
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = version
		for _, k := range []int16{apiVersionsKey, int16(kmsg.Metadata)} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, 0, 8
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		writeFrame(conn, corr, resp.AppendTo(nil))
	}
}

// writeFrame writes a response with a v0 (non-flexible) header.
func writeFrame(w io.Writer, corr int32, body []byte) {
	buf := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	w.Write(append(buf, body...))
}

func dialFake(t *testing.T, f *fakeBroker) *Conn { return dialFakeWith(t, f, Options{}) }

// dialFakeWith dials f with opts (their Dialer replaced by f's pipe).
func dialFakeWith(t *testing.T, f *fakeBroker, opts Options) *Conn {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	opts.Dialer = func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		wg.Go(func() { f.serve(server) })
		return client, nil
	}
	return dialTest(t, testCtx(t), "fake:9092", opts)
}

func TestCorrelationMismatchIsFatal(t *testing.T) {
	c := dialFake(t, &fakeBroker{answer: func(w io.Writer, key, version int16, corr int32) {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = version
		writeFrame(w, corr+7, resp.AppendTo(nil))
	}})
	ctx := testCtx(t)
	wantMismatch := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrConnClosed) || !errors.Is(err, ErrCorrelationMismatch) {
			t.Fatalf("%s: err = %v, want ErrConnClosed and ErrCorrelationMismatch", what, err)
		}
	}
	// The bad answer can arrive before the later Issues, which then fail
	// with the same terminal error instead of returning a Pending.
	for i := range 3 {
		p, err := c.Issue(kmsg.NewPtrMetadataRequest())
		if err == nil {
			_, err = p.Wait(ctx)
		}
		wantMismatch(fmt.Sprintf("request %d", i), err)
	}
}

// TestUndecodableResponseFailsOnlyItsRequest: a well-framed but truncated
// body fails that request; the stream stays aligned for the next one.
func TestUndecodableResponseFailsOnlyItsRequest(t *testing.T) {
	var n int
	c := dialFake(t, &fakeBroker{answer: func(w io.Writer, key, version int16, corr int32) {
		n++
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = version
		body := resp.AppendTo(nil)
		if n == 1 {
			body = body[:1]
		}
		writeFrame(w, corr, body)
	}})
	ctx := testCtx(t)
	p1, p2 := issueTwoMetadata(t, c)
	if _, err := p1.Wait(ctx); err == nil || errors.Is(err, ErrConnClosed) {
		t.Fatalf("truncated response: err = %v, want a decode error", err)
	}
	if _, err := p2.Wait(ctx); err != nil {
		t.Fatalf("next response: %v", err)
	}
}

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		rest []byte
		ok   bool
	}{
		{"none", []byte{0, 9}, []byte{9}, true},
		{"two fields", []byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 9}, []byte{9}, true},
		{"empty input", nil, nil, false},
		{"size past end", []byte{1, 0, 3, 0xaa}, nil, false},
	} {
		rest, err := skipTags(tc.in)
		if (err == nil) != tc.ok || (tc.ok && string(rest) != string(tc.rest)) {
			t.Errorf("%s: rest %x, err %v", tc.name, rest, err)
		}
	}
}

// TestResponseTimeoutFailsSilentBroker: a broker that takes a request and
// never answers kills the connection after the request's own wait plus
// ResponseTimeout, failing every pending request with ErrConnClosed,
// instead of holding them for as long as the socket stays open.
func TestResponseTimeoutFailsSilentBroker(t *testing.T) {
	never := &fakeBroker{answer: func(io.Writer, int16, int16, int32) {}}
	c := dialFakeWith(t, never, Options{ResponseTimeout: 50 * time.Millisecond})
	p1, p2 := issueTwoMetadata(t, c)
	for i, p := range []*Pending{p1, p2} {
		if _, err := p.Wait(testCtx(t)); !errors.Is(err, ErrConnClosed) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("pending %d: err = %v, want ErrConnClosed after the response deadline", i, err)
		}
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("connection still alive after a response deadline passed")
	}
}

// TestResponseTimeoutLeavesIdleConnection: the deadline covers a response
// being waited for, not the idle time between requests.
func TestResponseTimeoutLeavesIdleConnection(t *testing.T) {
	cluster := newCluster(t)
	ctx := testCtx(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{ResponseTimeout: 20 * time.Millisecond})
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
	// Idle for several deadlines' worth: a long-poll fetch on another
	// connection is a wait that needs no sleep.
	info := testTopicInfo(t, ctx, cluster)
	other := dialTest(t, ctx, info.leaderAddr, Options{})
	if _, err := other.Request(ctx, longPollFetch(info, 200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("request after idling: %v", err)
	}
	// A long-poll allowed by the request itself outlives ResponseTimeout.
	lp := dialTest(t, ctx, info.leaderAddr, Options{ResponseTimeout: 20 * time.Millisecond})
	if _, err := lp.Request(ctx, longPollFetch(info, 200*time.Millisecond)); err != nil {
		t.Fatalf("long-poll within its max wait: %v", err)
	}
}

// issueTwoMetadata issues two Metadata requests on c without waiting.
func issueTwoMetadata(t *testing.T, c *Conn) (*Pending, *Pending) {
	t.Helper()
	var ps [2]*Pending
	for i := range ps {
		p, err := c.Issue(kmsg.NewPtrMetadataRequest())
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	return ps[0], ps[1]
}
