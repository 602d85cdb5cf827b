package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rebuildLocks serialises topic rebuilds within a mirror: the first
// diverged partition rebuilds the whole topic, the others find it aligned.
type rebuildLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (l *rebuildLocks) lock(topic string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	mu, ok := l.locks[topic]
	if !ok {
		mu = &sync.Mutex{}
		l.locks[topic] = mu
	}
	return mu
}

// rebuild is the operator-approved remedy for a diverged destination: no
// client can truncate a partition's tail, so the destination-only records
// of every partition are copied to a quarantine topic (nothing is silently
// destroyed), the destination topic is deleted and recreated, and the
// partitions are mirrored again from the source. It ends with the
// requesting partition aligned on the fresh topic.
func (r *runner) rebuild(ctx context.Context) error {
	mu := r.m.rebuilds.lock(r.topic)
	mu.Lock()
	defer mu.Unlock()
	err := r.align(ctx)
	if err == nil {
		return nil // another partition's rebuild already recreated the topic
	}
	if !errors.Is(err, ErrDiverged) {
		return err
	}
	from := map[int32]int64{}
	var ule *ULEError
	var mm *MismatchError
	switch {
	case errors.As(err, &ule):
		from[r.partition] = ule.SourceEnd
	case errors.As(err, &mm):
		from[r.partition] = mm.At
	}
	q, n, err := r.m.quarantineAndRecreate(ctx, r.topic, from)
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", r.topic, err)
	}
	r.m.e.emit(LevelWarn, r.m.cfg.Name, r.topic, -1,
		fmt.Sprintf("rebuilt %s: %d destination-only records quarantined in %s; mirroring again from the source", r.topic, n, q))
	// The recreated topic has no transaction of ours, also none that the
	// destination aborted: forget them, or the next alignment would
	// restore them and fail again.
	r.txm = nil
	if r.rare != nil {
		r.rare.restoredTxns = nil
	}
	r.openTxns = 0 // the next status write (at the transition out of alignment) records none
	r.stats.setOpenTxns(0)
	// The topic's partitions realign on an empty topic: their LMEs name
	// offsets of the deleted one.
	rt, err := r.m.destRoute(ctx, r.topic, r.partition, r.m.e.now())
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", r.topic, err)
	}
	r.m.markRebuilt(r.topic, rt.topicID)
	return r.align(ctx)
}

// markRebuilt records that this mirror's rebuild created the destination
// topic with id id.
func (m *mirror) markRebuilt(topic string, id [16]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rebuilt == nil {
		m.rebuilt = make(map[string][16]byte)
	}
	m.rebuilt[topic] = id
}

// rebuiltAs reports whether the destination topic with id id was created
// by this mirror's rebuild: the LMEs taken before it name offsets it does
// not hold, and that is no loss.
func (m *mirror) rebuiltAs(topic string, id [16]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.rebuilt[topic]
	return ok && got == id
}

// divergedRange returns the destination-only offsets [from, to) of one
// partition: past the forward mirror's LME in a failback, past the source's
// high watermark otherwise.
func (m *mirror) divergedRange(ctx context.Context, topic string, p int32) (from, to int64, err error) {
	_, srcEnd, err := m.src.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, err
	}
	_, dstEnd, err := m.e.dst.offsets(ctx, topic, p)
	if err != nil {
		return 0, 0, err
	}
	from = srcEnd
	if cat, err := m.peerCatalog(ctx); err == nil {
		if _, _, rec, ok := forwardRecord(cat, m.e.destID, topic, p); ok && rec != nil {
			from = min(from, rec.LastOffset+1)
		}
	}
	// What this mirror copied itself is not destination-only.
	if r := m.runner(topic, p); r != nil {
		from = max(from, r.stats.snapshot().LastOffset+1)
	}
	return min(from, dstEnd), dstEnd, nil
}

// quarantineAndRecreate copies every partition's destination-only records
// to <topic>.kmirror-quarantine-<time> (same partition, keys, values,
// headers and timestamps), then deletes and recreates the topic.
// from gives partitions whose divergence point is already known (an unclean
// election on the source).
func (m *mirror) quarantineAndRecreate(ctx context.Context, topic string, from map[int32]int64) (string, int, error) {
	meta, err := m.e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return "", 0, err
	}
	parts := len(meta.topics[topic].partitions)
	q, err := m.createQuarantine(ctx, topic, int32(parts))
	if err != nil {
		return "", 0, err
	}
	total := 0
	for p := range int32(parts) {
		start, to, err := m.divergedRange(ctx, topic, p)
		if err != nil {
			return "", total, err
		}
		if f, ok := from[p]; ok {
			start = f
		}
		if to <= start {
			continue
		}
		n, err := m.copyRange(ctx, topic, q, p, start, to)
		total += n
		if err != nil {
			return q, total, err
		}
	}
	dresp, err := m.e.dst.adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = dresp.Error()
	}
	if err != nil {
		return q, total, fmt.Errorf("delete destination topic %s: %w", topic, err)
	}
	srcMeta, err := m.src.metadata(ctx, []string{topic})
	if err != nil {
		return q, total, err
	}
	if err := m.e.ensureTopics(ctx, m.src, srcMeta, []string{topic}); err != nil {
		return q, total, err
	}
	return q, total, nil
}

// createQuarantine creates a fresh quarantine topic for topic:
// <topic>.kmirror-quarantine-<time>, with -2, -3 … appended while the name
// is taken. Copying into a topic an interrupted attempt already filled
// would quarantine its records twice.
func (m *mirror) createQuarantine(ctx context.Context, topic string, parts int32) (string, error) {
	base := fmt.Sprintf("%s.kmirror-quarantine-%s", topic, m.e.now().UTC().Format("20060102T150405.000"))
	for n := 1; ; n++ {
		q := base
		if n > 1 {
			q = fmt.Sprintf("%s-%d", base, n)
		}
		resp, err := m.e.dst.adm.CreateTopic(ctx, parts, -1, nil, q)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			return q, nil
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || n == 100 {
			return "", fmt.Errorf("create quarantine topic %s: %w", q, err)
		}
	}
}

// copyRange copies records [from, to) of one destination partition into
// the same partition of the quarantine topic.
func (m *mirror) copyRange(ctx context.Context, topic, q string, p int32, from, to int64) (int, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(m.e.cfg.Destination...), kgo.ClientID(m.e.cfg.Instance + "-quarantine")}, m.e.cfg.DestinationOpts...)
	// Control records are kept so the read knows it reached the end even
	// when the range closes with a transaction marker; they are not copied.
	cons, err := kgo.NewClient(append(base, kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}))...)
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n := 0
	for {
		fs := cons.PollFetches(cctx)
		if err := fs.Err(); err != nil {
			return n, fmt.Errorf("read %s/%d for quarantine: %w", topic, p, err)
		}
		var batch []*kgo.Record
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Offset < to && !r.Attrs.IsControl() {
				batch = append(batch, &kgo.Record{Topic: q, Partition: p, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
			}
		})
		if len(batch) > 0 {
			if err := prod.ProduceSync(cctx, batch...).FirstErr(); err != nil {
				return n, fmt.Errorf("write quarantine %s/%d: %w", q, p, err)
			}
			n += len(batch)
		}
		if last >= to-1 {
			return n, nil
		}
	}
}
