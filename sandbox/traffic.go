package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kind says how a topic's producer writes.
type Kind int8

const (
	KindIdempotent    Kind = iota // the kgo default: idempotent, acks=all
	KindPlain                     // no idempotence: the oldest way clients write
	KindTransactional             // transactions of several records; some abort
)

// String names the kind as the demo prints it.
func (k Kind) String() string {
	switch k {
	case KindIdempotent:
		return "idempotent"
	case KindPlain:
		return "plain"
	case KindTransactional:
		return "transactional"
	}
	return "unknown"
}

// Topic is one demo topic and the traffic written to it.
type Topic struct {
	Name       string
	Partitions int32
	Codec      kgo.CompressionCodec
	CodecName  string
	Rate       int // records per second
	Kind       Kind
	Compacted  bool
	Keys       int // distinct keys (a compacted topic keeps one record per key)
}

// Topics are the demo's topics: one per kind of data the mirror must copy
// byte for byte.
var Topics = []Topic{
	{Name: "orders", Partitions: 6, Codec: kgo.ZstdCompression(), CodecName: "zstd", Rate: 200, Kind: KindIdempotent, Keys: 97},
	{Name: "payments", Partitions: 3, Codec: kgo.SnappyCompression(), CodecName: "snappy", Rate: 100, Kind: KindTransactional, Keys: 31},
	{Name: "clicks", Partitions: 6, Codec: kgo.Lz4Compression(), CodecName: "lz4", Rate: 1000, Kind: KindPlain, Keys: 1009},
	{Name: "inventory", Partitions: 3, Codec: kgo.GzipCompression(), CodecName: "gzip", Rate: 50, Kind: KindIdempotent, Compacted: true, Keys: 40},
}

// TopicNames lists the demo topics' names.
func TopicNames() []string {
	out := make([]string, len(Topics))
	for i, t := range Topics {
		out[i] = t.Name
	}
	return out
}

// Traffic is the demo's producers writing to one side. Stop ends them; a
// side that is down makes them retry until then, and every write that was
// acknowledged is in the ledger.
type Traffic struct {
	side    Side
	ledger  *Ledger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	clients []*kgo.Client
}

// startTraffic starts one producer per topic against bootstrap. seq carries
// the record numbers on from an earlier Traffic so ids stay unique.
func startTraffic(bootstrap []string, side Side, ledger *Ledger, seq map[string]*atomic.Int64) (*Traffic, error) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Traffic{side: side, ledger: ledger, cancel: cancel}
	for _, t := range Topics {
		opts := []kgo.Opt{
			kgo.SeedBrokers(bootstrap...),
			kgo.ClientID("demo-producer-" + t.Name),
			kgo.ProducerBatchCompression(t.Codec),
			kgo.ProducerLinger(20 * time.Millisecond),
			kgo.DefaultProduceTopic(t.Name),
		}
		switch t.Kind {
		case KindPlain:
			opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
		case KindTransactional:
			opts = append(opts, kgo.TransactionalID(TransactionalID(t.Name, side)))
		case KindIdempotent:
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			tr.Stop()
			return nil, fmt.Errorf("producer for %s on %s: %w", t.Name, side, err)
		}
		tr.clients = append(tr.clients, cl)
		n := seq[t.Name]
		tr.wg.Go(func() {
			if t.Kind == KindTransactional {
				tr.transact(ctx, cl, t, n)
				return
			}
			tr.produce(ctx, cl, t, n)
		})
	}
	return tr, nil
}

// Stop ends the producers. Writes still unacknowledged are abandoned and
// counted as failed, never as acknowledged.
func (tr *Traffic) Stop() {
	tr.cancel()
	// On a cluster that answers, the transactional producer aborts its
	// open transaction as it stops; closing its client first would leave
	// the transaction open (and the partition's last stable offset held)
	// until the coordinator times it out. On a dead cluster the producers
	// wait for their records until the clients close.
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	t := time.NewTimer(abortBound + time.Second)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	for _, cl := range tr.clients {
		cl.Close() // fails buffered records, which unblocks a producer waiting on a dead cluster
	}
	<-done
}

// abortBound bounds the abort of the open transaction when the producers
// stop: the cluster may be the one that is down.
const abortBound = 3 * time.Second

const trafficTick = 50 * time.Millisecond

// txnTick is how often the transactional producer begins a transaction:
// each carries a quarter second of its records. Mirroring a transaction
// costs a few destination round trips (its begin, its end, its marker),
// so the demo's transactions are few and full rather than many and small.
const txnTick = 250 * time.Millisecond

// perTick is how many records of rate a tick of length tick carries.
func perTick(rate int, tick time.Duration) int { return max(1, rate*int(tick/time.Millisecond)/1000) }

func (tr *Traffic) record(t Topic, n int64) (*kgo.Record, string) {
	id := recordID(t.Name, tr.side, n)
	return &kgo.Record{
		Topic: t.Name,
		Key:   fmt.Appendf(nil, "key-%d", n%int64(t.Keys)),
		Value: recordValue(id, time.Now()),
	}, id
}

// produce writes keyed records at t's rate until ctx ends.
func (tr *Traffic) produce(ctx context.Context, cl *kgo.Client, t Topic, seq *atomic.Int64) {
	tk := time.NewTicker(trafficTick)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		for range perTick(t.Rate, trafficTick) {
			r, id := tr.record(t, seq.Add(1))
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					tr.ledger.notAcked(true, Unacked{ID: id, Topic: t.Name, Side: tr.side})
					return
				}
				tr.ledger.add(Ack{ID: id, Topic: t.Name, Partition: r.Partition, Offset: r.Offset, At: time.Now(), Side: tr.side})
			})
		}
	}
}

// transact writes one transaction of txnTick's records every txnTick;
// every fourth one is aborted, so the destination must reproduce abort
// markers too. Only committed transactions enter the ledger.
func (tr *Traffic) transact(ctx context.Context, cl *kgo.Client, t Topic, seq *atomic.Int64) {
	tk := time.NewTicker(txnTick)
	defer tk.Stop()
	for txn := 1; ; txn++ {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		if err := cl.BeginTransaction(); err != nil {
			tr.ledger.failed(tr.side, int64(perTick(t.Rate, txnTick)))
			continue
		}
		recs := make([]*kgo.Record, 0, perTick(t.Rate, txnTick))
		ids := make([]string, 0, cap(recs))
		for range perTick(t.Rate, txnTick) {
			r, id := tr.record(t, seq.Add(1))
			recs, ids = append(recs, r), append(ids, id)
		}
		res := cl.ProduceSync(ctx, recs...)
		commit := kgo.TransactionEndTry(res.FirstErr() == nil && txn%4 != 0)
		err := cl.EndTransaction(ctx, commit)
		unacked := func(failed bool) {
			u := make([]Unacked, len(ids))
			for i, id := range ids {
				u[i] = Unacked{ID: id, Topic: t.Name, Side: tr.side, InTxn: true}
			}
			tr.ledger.notAcked(failed, u...)
		}
		if ctx.Err() != nil {
			// Stopping: abort whatever is still open so the cluster's last
			// stable offset is not held back until the transaction times
			// out. Bounded, because the cluster may be the one that is down.
			actx, cancel := context.WithTimeout(context.Background(), abortBound)
			_ = cl.AbortBufferedRecords(actx)
			_ = cl.EndTransaction(actx, kgo.TryAbort)
			cancel()
			if err != nil || !bool(commit) {
				unacked(err != nil)
				return
			}
		}
		if err != nil {
			unacked(true)
			// A failed commit leaves the producer unusable until it aborts
			// what it buffered; the next loop begins afresh.
			_ = cl.AbortBufferedRecords(ctx)
			continue
		}
		if !bool(commit) {
			unacked(false) // an intended abort: nothing was acknowledged
			continue
		}
		now := time.Now()
		acks := make([]Ack, len(res))
		for i, r := range res {
			// ProduceSync lists results as they complete, not in the
			// order the records were given: the id comes from the record.
			acks[i] = Ack{ID: IDOf(r.Record.Value), Topic: t.Name, Partition: r.Record.Partition, Offset: r.Record.Offset, At: now, Side: tr.side}
		}
		tr.ledger.add(acks...)
	}
}

// IsTransactional reports whether the demo writes topic in transactions.
func IsTransactional(topic string) bool {
	for _, t := range Topics {
		if t.Name == topic {
			return t.Kind == KindTransactional
		}
	}
	return false
}

// TransactionalID is the transactional id the demo's producer of topic
// uses on side.
func TransactionalID(topic string, side Side) string { return fmt.Sprintf("demo-%s-%s", topic, side) }

// FenceTransactions ends what the demo's transactional producers left open
// on side: an InitProducerID on each of their transactional ids bumps the
// epoch, and the coordinator aborts the open transaction (as Kafka's
// kafka-transactions.sh abort does). After an outage their clients are
// gone, and an open transaction would hold the partitions' last stable
// offset until the coordinator's timeout, then write its abort marker.
// It returns the transactional ids it fenced.
func (s *Sandbox) FenceTransactions(ctx context.Context, side Side) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Bootstrap(side)...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ids []string
	for _, t := range Topics {
		if t.Kind != KindTransactional {
			continue
		}
		id := TransactionalID(t.Name, side)
		if err := fence(ctx, cl, id); err != nil {
			return ids, fmt.Errorf("fence transactional id %s on %s: %w", id, side, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// fence bumps the epoch of transactional id, retrying while the
// coordinator is still ending the transaction it aborts for it.
func fence(ctx context.Context, cl *kgo.Client, id string) error {
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60_000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
		}
	}
}
