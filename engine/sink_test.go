package engine_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

// TestAppendsShareProduceRequests: behind a destination that answers each
// Produce late and handles one request per connection at a time (a
// replicating broker), the batches of many partitions led by one broker
// travel in shared Produce requests, never two of one partition in one
// request, and the copy is identical.
func TestAppendsShareProduceRequests(t *testing.T) {
	// One destination broker, so that each of its connections (four, a
	// partition always on the same one) has more partitions to send
	// than it keeps requests in flight (five).
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.NumBrokers(1))
	link, err := linkproxy.Start(dst.Addrs(), linkproxy.Options{ProduceLatency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	e := envOn(t, src, dst)
	e.engCfg = func(c *engine.Config) { c.Destination = link.Addrs() }
	e.startEngine()

	const topic, partitions = "shared", 40
	e.src.CreateTopic(t, topic, partitions, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, topic, partitions, 2000, "x")

	var (
		mu        sync.Mutex
		widest    int    // most partitions of the topic in one request
		twice     string // a request with two batches of one partition
		requests  int
		batchSeen int
	)
	// The mirror (ad hoc, no __mirror_state) produces only to topic.
	e.dst.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.dst.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		requests++
		n := 0
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			seen := map[int32]bool{}
			for _, rp := range rt.Partitions {
				batches := 0
				_, _ = batch.Split(rp.Records, func(batch.Header, []byte) error { batches++; return nil })
				batchSeen += batches
				if seen[rp.Partition] || batches != 1 {
					twice = fmt.Sprintf("partition %d: listed before: %v, %d batches", rp.Partition, seen[rp.Partition], batches)
				}
				seen[rp.Partition] = true
				n++
			}
		}
		widest = max(widest, n)
		return nil, nil, false
	})
	e.startMirror(topic)
	e.waitCaughtUp(topic)
	e.assertIdentical(topic)

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d Produce requests, %d batches, at most %d partitions in one", requests, batchSeen, widest)
	if twice != "" {
		t.Fatalf("a Produce request carried more than one batch of a partition: %s", twice)
	}
	if widest < 2 {
		t.Fatalf("every Produce request carried one partition (%d requests): the appends of a broker's partitions do not share requests", requests)
	}
}
