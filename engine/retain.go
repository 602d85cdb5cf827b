package engine

import (
	"context"
	"fmt"
	"sync"
)

// retainedTopics is where a mirror's alignments keep the records they
// move a destination log start past: when the source deleted offsets
// (retention, DeleteRecords) before they were mirrored, the partition
// continues with fillers up to the source's log start and moves the
// destination's log start there, which would delete records the
// destination held and the source had. They are copied first, as a
// rebuild copies what it does not keep, into
// <topic>.kmirror-retained-<time>-<mirror>: one such topic per topic and
// process, partition for partition.
type retainedTopics struct {
	mu    sync.Mutex
	names map[string]string // by topic
}

// retain copies the data records [from, to) of a destination partition
// into the topic's retained topic and checks the count; it returns the
// retained topic and the records copied.
func (m *mirror) retain(ctx context.Context, topic string, p int32, from, to int64) (string, int64, error) {
	q, err := m.retainedTopic(ctx, topic)
	if err != nil {
		return "", 0, err
	}
	_, held, err := m.e.dst.offsets(ctx, q, p)
	if err != nil {
		return q, 0, fmt.Errorf("count %s/%d: %w", q, p, err)
	}
	want, err := m.copyRange(ctx, topic, q, p, from, to, 0, func(int64) {})
	if err != nil {
		return q, 0, err
	}
	_, end, err := m.e.dst.offsets(ctx, q, p)
	if err != nil {
		return q, 0, fmt.Errorf("count %s/%d: %w", q, p, err)
	}
	if end != held+want {
		return q, 0, fmt.Errorf("%s/%d holds %d records after the copy of %s/%d [%d, %d), want %d", q, p, end, topic, p, from, to, held+want)
	}
	return q, want, nil
}

// retainedTopic creates, once per process, the topic's retained topic
// with the destination topic's partition count.
func (m *mirror) retainedTopic(ctx context.Context, topic string) (string, error) {
	r := &m.retained
	r.mu.Lock()
	defer r.mu.Unlock()
	if q, ok := r.names[topic]; ok {
		return q, nil
	}
	meta, err := m.e.dst.metadata(ctx, []string{topic})
	if err != nil {
		return "", err
	}
	tm, ok := meta.topics[topic]
	if !ok || tm.err != nil || len(tm.partitions) == 0 {
		return "", topicNotFound("destination", topic, tm.err)
	}
	name := fmt.Sprintf("%s.kmirror-retained-%s-%s", topic, m.e.now().UTC().Format("20060102T150405.000"), m.cfg.Name)
	lctx, cancel, err := m.e.gate.leased(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	if err := m.createKeeping(lctx, nil, nil, &name, int32(len(tm.partitions)), false); err != nil {
		return "", err
	}
	if r.names == nil {
		r.names = map[string]string{}
	}
	r.names[topic] = name
	return name, nil
}
