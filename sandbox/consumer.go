package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupID is the demo's consumer group: it processes orders.
const GroupID = "orders-processor"

// ProcessedTopic is the topic the demo group processes.
const ProcessedTopic = "orders"

// Consumer is the demo's consumer group member. It remembers every record
// id it processed, so a failover's duplicates and gaps can be counted
// exactly afterwards.
type Consumer struct {
	mu        sync.Mutex
	seen      map[string]int // record id → times processed
	committed map[Side]map[int32]int64
	first     map[Side]time.Time
	run       *consumerRun
}

type consumerRun struct {
	side   Side
	cl     *kgo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newConsumer() *Consumer {
	return &Consumer{seen: map[string]int{}, committed: map[Side]map[int32]int64{}, first: map[Side]time.Time{}}
}

// start joins the group on bootstrap. Where the group has no committed
// offset it starts from the earliest record: after a failover without
// offset sync that reprocesses, and the duplicates say so.
func (c *Consumer) start(bootstrap []string, side Side) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID("demo-consumer"),
		kgo.ConsumerGroup(GroupID),
		kgo.ConsumeTopics(ProcessedTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second),
	)
	if err != nil {
		return fmt.Errorf("demo consumer on %s: %w", side, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &consumerRun{side: side, cl: cl, cancel: cancel}
	c.mu.Lock()
	c.run = r
	c.mu.Unlock()
	r.wg.Go(func() { c.loop(ctx, r) })
	return nil
}

// loop processes and then commits what it processed: at-least-once, the
// way most applications consume.
func (c *Consumer) loop(ctx context.Context, r *consumerRun) {
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		n := 0
		c.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			if id := IDOf(rec.Value); id != "" {
				c.seen[id]++
				n++
			}
		})
		if n > 0 && c.first[r.side].IsZero() {
			c.first[r.side] = time.Now()
		}
		c.mu.Unlock()
		if n == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.cl.CommitUncommittedOffsets(cctx)
		cancel()
		if err != nil {
			continue // the next commit covers these records; until then they may be reprocessed
		}
		c.mu.Lock()
		m := c.committed[r.side]
		if m == nil {
			m = map[int32]int64{}
			c.committed[r.side] = m
		}
		for p, eo := range r.cl.CommittedOffsets()[ProcessedTopic] {
			m[p] = eo.Offset
		}
		c.mu.Unlock()
	}
}

// stop leaves the group (bounded: the cluster may be down) and closes.
func (c *Consumer) stop() { c.detach().stop() }

// detach takes the running member out of the consumer, to be stopped by
// the caller; a new one may start meanwhile.
func (c *Consumer) detach() *consumerRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.run
	c.run = nil
	return r
}

func (r *consumerRun) stop() {
	if r == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
	lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = r.cl.LeaveGroupContext(lctx)
	cancel()
	r.cl.Close()
}

// Processed returns how many times each record id was processed.
func (c *Consumer) Processed() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// Committed returns the offsets the consumer last committed on side, as it
// saw them acknowledged (readable even when that side is down).
func (c *Consumer) Committed(side Side) map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range c.committed[side] {
		out[p] = o
	}
	return out
}

// FirstProcessed returns when the consumer first processed a record read
// from side (zero when not yet).
func (c *Consumer) FirstProcessed(side Side) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[side]
}
