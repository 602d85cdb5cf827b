package replica

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/wire"
)

// sinkTopic is a one-partition topic on its own cluster, with the sinks
// that append to it.
type sinkTopic struct {
	cl     *enginetest.Cluster
	adm    *kadm.Client
	leader int32
	id     [16]byte
	sinks  *Sinks
}

// newSinkTopic creates topic on a new cluster and sinks on its brokers
// whose owner gate is allowed (nil: none).
func newSinkTopic(ctx context.Context, t *testing.T, topic string, allowed func() bool, control func(*enginetest.Cluster)) sinkTopic {
	t.Helper()
	cl := enginetest.NewCluster(t, "kmirror-test-sink")
	cl.CreateTopic(t, topic, 1, nil)
	if control != nil {
		control(cl)
	}
	adm := kadm.NewClient(cl.Client(t))
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[int32]string{}
	for _, b := range md.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	td := md.Topics[topic]
	pool := NewConns(func(context.Context) (map[int32]string, error) { return addrs, nil }, wire.Options{ClientID: "kmirror-test"})
	sinks := NewSinks(pool, 5*time.Second, allowed)
	t.Cleanup(sinks.Close)
	return sinkTopic{cl: cl, adm: adm, leader: td.Partitions[0].Leader, id: [16]byte(td.ID), sinks: sinks}
}

// TestFailedAppendMutesItsPartition: once an append fails (its connection
// lost, or an error for its partition), nothing more of that partition
// goes out until its runner resends or aligns (a newer Gen): a later batch
// of another producer would otherwise land where the failed one belongs,
// and no sequence check would stop it.
func TestFailedAppendMutesItsPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const topic = "muted"
	st := newSinkTopic(ctx, t, topic, nil, nil)
	cl, adm, leader, id, sinks := st.cl, st.adm, st.leader, st.id, st.sinks

	b, err := batch.Build(kgo.NoCompression(), time.Now().UnixMilli(), batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	appendAs := func(gen uint32) (*kmsg.ProduceResponseTopicPartition, error) {
		c := &Append{Topic: topic, TopicID: id, Partition: 0, Records: b, Gen: gen}
		sinks.Issue(leader, c)
		return c.Wait(ctx)
	}
	end := func() int64 {
		_, e, err := enginetest.Offsets(ctx, adm, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	// The connection is lost with the first Produce, unapplied.
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("connection cut by the test"), true
	})
	if _, err := appendAs(0); err == nil {
		t.Fatal("the append whose connection was cut succeeded")
	}
	if _, err := appendAs(0); !errors.Is(err, ErrMuted) {
		t.Fatalf("a later append of the same generation: %v, want %v", err, ErrMuted)
	}
	if e := end(); e != 0 {
		t.Fatalf("the muted partition was appended to: log end %d", e)
	}
	if p, err := appendAs(1); err != nil || p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("the resend (a newer generation): %+v, %v", p, err)
	}

	// An error for the partition in the answer mutes it too.
	cl.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	if p, err := appendAs(1); err != nil || p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("the append answered NOT_LEADER_OR_FOLLOWER: %+v, %v", p, err)
	}
	if _, err := appendAs(1); !errors.Is(err, ErrMuted) {
		t.Fatalf("a later append of the same generation after an error answer: %v, want %v", err, ErrMuted)
	}
	if p, err := appendAs(2); err != nil || p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("the resend after the error answer: %+v, %v", p, err)
	}
	if e := end(); e != 2 {
		t.Fatalf("log end %d, want 2: only the two resends landed", e)
	}
}

// TestWaitGivesAKnownOutcomeAfterItsContextEnded: an append whose answer
// has arrived gives that answer even when the waiting work was cut short
// (its context ended), every time: a stop interrupting the runner just as
// its last batch was answered must still learn where the batch landed, or
// the stop records a last mirrored offset below what the destination
// holds. An append with no answer yet gives the context's error.
func TestWaitGivesAKnownOutcomeAfterItsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		c := &Append{done: make(chan struct{})}
		c.finish(&kmsg.ProduceResponseTopicPartition{BaseOffset: 200}, nil, time.Now())
		p, err := c.Wait(ctx)
		if err != nil || p.BaseOffset != 200 {
			t.Fatalf("wait %d on an answered append with an ended context: %v, %v; want the answer at 200", i, p, err)
		}
	}
	c := &Append{done: make(chan struct{})}
	if p, err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on an unanswered append with an ended context: %v, %v; want context.Canceled", p, err)
	}
}

// TestSinkAsksTheGateAtTheWrite: the owner gate is asked right before a
// request is written, not when its append is queued: an append issued
// while the instance could write fails unsent (ErrNotAllowed) once the
// gate closed meanwhile, and nothing reaches the broker; with the gate
// open again, a newer generation goes out.
func TestSinkAsksTheGateAtTheWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const topic = "gated"
	var open atomic.Bool
	open.Store(true)
	var produces atomic.Int64
	st := newSinkTopic(ctx, t, topic, open.Load, func(cl *enginetest.Cluster) {
		cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			produces.Add(1)
			return nil, nil, false
		})
	})
	adm, leader, id, sinks := st.adm, st.leader, st.id, st.sinks
	b, err := batch.Build(kgo.NoCompression(), time.Now().UnixMilli(), batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	// The gate closes after the append is issued, before the sink
	// writes it: the sink is held busy by nothing but this check.
	open.Store(false)
	c := &Append{Topic: topic, TopicID: id, Partition: 0, Records: b, Gen: 0}
	sinks.Issue(leader, c)
	if _, err := c.Wait(ctx); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("an append written with the gate closed: %v, want %v", err, ErrNotAllowed)
	}
	if n := produces.Load(); n != 0 {
		t.Fatalf("%d Produce requests reached the broker with the gate closed", n)
	}
	open.Store(true)
	c = &Append{Topic: topic, TopicID: id, Partition: 0, Records: b, Gen: 1}
	sinks.Issue(leader, c)
	if _, err := c.Wait(ctx); err != nil {
		t.Fatalf("an append with the gate open again: %v", err)
	}
	if _, end, err := enginetest.Offsets(ctx, adm, topic, 0); err != nil || end != 1 {
		t.Fatalf("destination end %d (%v), want 1: only the append written with the gate open", end, err)
	}
}
