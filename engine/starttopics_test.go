package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/engine/store"
)

// requestTopics records the topics named in each request of one key a
// cluster receives (DescribeConfigs, IncrementalAlterConfigs).
type requestTopics struct {
	mu   sync.Mutex
	reqs [][]string
}

func watchTopicRequests(c *enginetest.Cluster, key kmsg.Key) *requestTopics {
	rt := &requestTopics{}
	c.ControlKey(int16(key), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		var names []string
		switch req := kreq.(type) {
		case *kmsg.DescribeConfigsRequest:
			for _, r := range req.Resources {
				if r.ResourceType == kmsg.ConfigResourceTypeTopic {
					names = append(names, r.ResourceName)
				}
			}
		case *kmsg.IncrementalAlterConfigsRequest:
			for _, r := range req.Resources {
				if r.ResourceType == kmsg.ConfigResourceTypeTopic {
					names = append(names, r.ResourceName)
				}
			}
		}
		slices.Sort(names)
		rt.mu.Lock()
		rt.reqs = append(rt.reqs, names)
		rt.mu.Unlock()
		return nil, nil, false
	})
	return rt
}

func (rt *requestTopics) get() [][]string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.reqs)
}

// TestStartAsksAboutItsTopicsTogether: a mirror started on six topics asks
// the source for their configs in one request, not one a topic, and
// corrects on the destination only the topics whose mirroring configs are
// not set on the topic: the one set wrong, and the one that has the right
// values only as the broker's defaults (a later change of the default
// would change it); one created with them set is left alone, missing ones
// are created with them. Every topic is mirrored identically.
func TestStartAsksAboutItsTopicsTogether(t *testing.T) {
	e := newEnv(t)
	topics := []string{"s1", "s2", "s3", "s4", "s5", "s6"}
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	for _, tp := range topics {
		e.src.CreateTopic(t, tp, 2, nil)
		enginetest.Produce(t, cl, tp, 2, 5, "first")
	}
	e.dst.CreateTopic(t, "s2", 2, map[string]*string{"compression.type": kadm.StringPtr("gzip")})
	e.dst.CreateTopic(t, "s3", 2, map[string]*string{"compression.type": kadm.StringPtr("producer"), "message.timestamp.type": kadm.StringPtr("CreateTime")})
	e.dst.CreateTopic(t, "s4", 2, nil)
	described := watchTopicRequests(e.src, kmsg.DescribeConfigs)
	altered := watchTopicRequests(e.dst, kmsg.IncrementalAlterConfigs)

	e.startMirror(topics...)
	e.waitCaughtUp(topics...)
	e.assertIdentical(topics...)

	if got := described.get(); len(got) != 1 || !slices.Equal(got[0], topics) {
		t.Errorf("source DescribeConfigs requests named %v, want one naming %v", got, topics)
	}
	if got := altered.get(); !slices.EqualFunc(got, [][]string{{"s2"}, {"s4"}}, slices.Equal) {
		t.Errorf("destination IncrementalAlterConfigs requests named %v, want [[s2] [s4]]", got)
	}
	for _, tp := range topics {
		for k, want := range map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime"} {
			if v, set := topicConfig(t, e.dstCl, tp, k); v != want || !set {
				t.Errorf("destination %s %s = %q (set on the topic: %v), want %q set on the topic", tp, k, v, set, want)
			}
		}
	}
}

// TestStartOfManyTopicsReportsEachTopicsError: among topics started
// together, one the source does not have fails the start with its own
// error, naming it, as a start of it alone does.
func TestStartOfManyTopicsReportsEachTopicsError(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "here", 1, nil)
	err := e.eng.StartMirror(context.Background(), engine.MirrorConfig{Name: "a-to-b", SourceBootstrap: e.src.Addrs(), Topics: []string{"here", "missing"}})
	if err == nil || !strings.Contains(err.Error(), "source topic missing") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("StartMirror of a missing topic among two: %v, want the missing topic's error", err)
	}
}

// TestInstanceAsksAboutItsTopicsTogether: an instance that comes to own
// four topics asks the source for their configs in one request, and
// mirrors all of them. The topics share a shard of the instances' state:
// an instance starts the topics of each shard as it has read it, so
// topics of several shards may be asked about in several requests.
func TestInstanceAsksAboutItsTopicsTogether(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e := envOn(t, src, dst)
	ctx := context.Background()
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	var topics []string
	for i := 0; len(topics) < 4; i++ {
		if tp := fmt.Sprintf("i%d", i); store.TopicShard("a-to-b", tp) == store.TopicShard("a-to-b", "i0") {
			topics = append(topics, tp)
		}
	}
	slices.Sort(topics)
	for _, tp := range topics {
		src.CreateTopic(t, tp, 2, nil)
	}
	cfg := map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ",")}
	if _, err := adm.CreateMirror(ctx, "a-to-b", props.FromMap(maps.Clone(cfg)), false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics(strings.Join(topics, ","))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	described := watchTopicRequests(src, kmsg.DescribeConfigs)
	e.eng = e.joinInstance("one")
	e.waitAll(len(topics)*2, partition.Mirroring)
	if got := described.get(); len(got) != 1 || !slices.Equal(got[0], topics) {
		t.Errorf("source DescribeConfigs requests named %v, want one naming %v", got, topics)
	}
}

// TestStartCorrectsATopicCreatedAfterItsAnswer: a destination topic
// created by someone else after the destination answered a start of
// several topics (here while it answers the start's DescribeConfigs), with
// the wrong compression, is taken as existing when its creation is
// refused: its mirroring configs are set and it is mirrored identically.
func TestStartCorrectsATopicCreatedAfterItsAnswer(t *testing.T) {
	e := newEnv(t)
	topics := []string{"early", "late"}
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	for _, tp := range topics {
		e.src.CreateTopic(t, tp, 2, nil)
		enginetest.Produce(t, cl, tp, 2, 5, "first")
	}
	var once sync.Once
	e.dst.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		once.Do(func() {
			e.dst.SleepControl(func() {
				e.dst.CreateTopic(t, "late", 2, map[string]*string{"compression.type": kadm.StringPtr("gzip")})
			})
		})
		return nil, nil, false
	})
	e.startMirror(topics...)
	e.waitCaughtUp(topics...)
	e.assertIdentical(topics...)
	if v, _ := topicConfig(t, e.dstCl, "late", "compression.type"); v != "producer" {
		t.Errorf("destination late compression.type = %q, want producer", v)
	}
}

// TestTakeoverOfTopicsWithSourceGone: an instance that comes to own two
// topics (of one shard) while the source is unreachable starts both from
// their records (the start's shared answer is the source's error, for
// each), and a stop fails both over, each partition STOPPED at the
// destination's end.
func TestTakeoverOfTopicsWithSourceGone(t *testing.T) {
	ctx := context.Background()
	e, adm, n := newReachEnv(t, "orders", 2)
	second := ""
	for i := 0; second == ""; i++ {
		if tp := fmt.Sprintf("orders%d", i); store.TopicShard("a-to-b", tp) == store.TopicShard("a-to-b", "orders") {
			second = tp
		}
	}
	e.src.CreateTopic(t, second, 2, nil)
	sel, err := engine.ParseTopics(second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	topics := []string{"orders", second}
	ends := map[string][]int64{}
	for _, tp := range topics {
		enginetest.Produce(t, e.srcCl, tp, 2, 20, "before")
	}
	e.waitCaughtUp(topics...)
	for _, tp := range topics {
		waitCheckpointed(t, e, adm, tp, 2)
		if ends[tp], err = enginetest.Ends(ctx, e.dstCl, tp); err != nil {
			t.Fatal(err)
		}
	}
	n.Down("")
	e.eng.Close()
	e.eng = e.joinInstance("two")
	if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", nil, false); err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		for p, rec := range waitPersisted(t, adm, tp, 2, partition.Stopped, "two") {
			if rec.LastOffset != ends[tp][p]-1 {
				t.Errorf("%s/%d STOPPED with last mirrored offset %d, destination end %d", tp, p, rec.LastOffset, ends[tp][p])
			}
		}
	}
}

// TestStartAsksAloneWhatTheSharedAnswerLacks: one topic the source denies
// fails a DescribeConfigs of many topics as a whole (kadm makes one
// topic's authorization error the request's). The start then asks for
// each topic's configs alone, as it did before it asked them together, and
// every topic the source lets it read starts.
func TestStartAsksAloneWhatTheSharedAnswerLacks(t *testing.T) {
	e := newEnv(t)
	topics := []string{"a1", "a2", "a3"}
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	for _, tp := range topics {
		e.src.CreateTopic(t, tp, 1, nil)
		enginetest.Produce(t, cl, tp, 1, 5, "first")
	}
	described := watchTopicRequests(e.src, kmsg.DescribeConfigs)
	e.src.ControlKey(int16(kmsg.DescribeConfigs), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		req := kreq.(*kmsg.DescribeConfigsRequest)
		if len(req.Resources) < 2 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			if r.ResourceName == "a2" {
				rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	e.startMirror(topics...)
	e.waitCaughtUp(topics...)
	e.assertIdentical(topics...)
	want := [][]string{topics, {"a1"}, {"a2"}, {"a3"}}
	if got := described.get(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("source DescribeConfigs requests named %v, want %v", got, want)
	}
}
