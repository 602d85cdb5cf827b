// Package sandbox runs the self-contained setting of kmirror demo: two in-process
// Kafka clusters, "A" and "B", live traffic on A, and a mirror a-to-b.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster ids of the demo clusters. They say which side is which.
const (
	ClusterA = "kmirror-demo-A"
	ClusterB = "kmirror-demo-B"
)

// Topic is one demo topic and the traffic written to it.
type Topic struct {
	Name       string
	Partitions int32
	Codec      kgo.CompressionCodec
	Rate       int // records per second
}

// Topics are the demo's topics.
var Topics = []Topic{
	{Name: "orders", Partitions: 6, Codec: kgo.ZstdCompression(), Rate: 200},
	{Name: "clicks", Partitions: 6, Codec: kgo.Lz4Compression(), Rate: 2000},
}

// TopicNames lists the demo topics' names.
func TopicNames() []string {
	out := make([]string, len(Topics))
	for i, t := range Topics {
		out[i] = t.Name
	}
	return out
}

// Sandbox is the two clusters with traffic running on A.
type Sandbox struct {
	A, B *kfake.Cluster

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	produced atomic.Int64 // records acknowledged by A
	failed   atomic.Int64
}

// Start starts both clusters, creates the topics on A and starts producing.
func Start(ctx context.Context) (*Sandbox, error) {
	a, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID(ClusterA))
	if err != nil {
		return nil, fmt.Errorf("start cluster A: %w", err)
	}
	b, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID(ClusterB))
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("start cluster B: %w", err)
	}
	s := &Sandbox{A: a, B: b}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.ListenAddrs()...))
	if err != nil {
		s.Close()
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range Topics {
		if _, err := adm.CreateTopic(ctx, t.Partitions, -1, nil, t.Name); err != nil {
			s.Close()
			return nil, fmt.Errorf("create topic %s on A: %w", t.Name, err)
		}
	}
	tctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, t := range Topics {
		p, err := kgo.NewClient(
			kgo.SeedBrokers(a.ListenAddrs()...),
			kgo.ProducerBatchCompression(t.Codec),
			kgo.ProducerLinger(20*time.Millisecond),
		)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.wg.Go(func() {
			defer p.Close()
			s.produce(tctx, p, t)
		})
	}
	return s, nil
}

// produce writes keyed JSON-like records to t at its rate until ctx ends.
func (s *Sandbox) produce(ctx context.Context, p *kgo.Client, t Topic) {
	const tick = 50 * time.Millisecond
	per := max(1, t.Rate*int(tick/time.Millisecond)/1000)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		for range per {
			n++
			r := &kgo.Record{
				Topic: t.Name,
				Key:   fmt.Appendf(nil, "customer-%d", n%97),
				Value: fmt.Appendf(nil, `{"id":%d,"topic":%q,"at":%q}`, n, t.Name, time.Now().UTC().Format(time.RFC3339Nano)),
			}
			p.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					s.failed.Add(1)
					return
				}
				s.produced.Add(1)
			})
		}
	}
}

// Produced is the number of records A acknowledged so far.
func (s *Sandbox) Produced() int64 { return s.produced.Load() }

// Describe writes the clusters' addresses so a second terminal can reach them.
func (s *Sandbox) Describe(w io.Writer) {
	fmt.Fprintf(w, "cluster A (%s, source):      %s\n", ClusterA, strings.Join(s.A.ListenAddrs(), ","))
	fmt.Fprintf(w, "cluster B (%s, destination): %s\n", ClusterB, strings.Join(s.B.ListenAddrs(), ","))
	fmt.Fprintf(w, "topics on A: %s\n", strings.Join(TopicNames(), ", "))
}

// Close stops the traffic and both clusters.
func (s *Sandbox) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.A.Close()
	s.B.Close()
}
