package explore

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/store"
)

// pref names one partition of a mirrored topic.
type pref struct {
	topic string
	p     int32
}

func (r pref) String() string { return fmt.Sprintf("%s/%d", r.topic, r.p) }

// record is what the oracle keeps of one record: where it is and its value
// (every value the explorer writes is unique, see srcValue).
type record struct {
	offset int64
	value  string
}

// logView is one partition as read: its offsets, raw batches and the
// records at or above its log start.
type logView struct {
	start, end int64
	batches    []enginetest.RawBatch
	records    []record
	at         map[int64]string // value by offset
}

var decompressor = kgo.DefaultDecompressor()

// readLog reads a partition batch by batch and decodes its records.
func readLog(ctx context.Context, cl *kgo.Client, topic string, p int32) (logView, error) {
	var v logView
	var err error
	if v.batches, err = enginetest.ReadBatches(ctx, cl, topic, p); err != nil {
		return v, err
	}
	if v.start, v.end, err = enginetest.Offsets(ctx, kadm.NewClient(cl), topic, p); err != nil {
		return v, err
	}
	v.at = map[int64]string{}
	for _, b := range v.batches {
		if b.Header.IsControl() {
			continue
		}
		recs, err := decode(b)
		if err != nil {
			return v, fmt.Errorf("%s/%d batch at %d: %w", topic, p, b.Header.BaseOffset, err)
		}
		for _, r := range recs {
			if r.offset >= v.start {
				v.records = append(v.records, r)
				v.at[r.offset] = r.value
			}
		}
	}
	return v, nil
}

// decode returns the records of one data batch.
func decode(b enginetest.RawBatch) ([]record, error) {
	payload := b.Payload
	if c := b.Header.Codec(); c != 0 {
		out, err := decompressor.Decompress(payload, kgo.CompressionCodecType(c))
		if err != nil {
			return nil, err
		}
		payload = out
	}
	out := make([]record, 0, b.Header.RecordCount)
	for range b.Header.RecordCount {
		l, n := binary.Varint(payload)
		if n <= 0 || l < 0 || int64(len(payload)-n) < l {
			return nil, fmt.Errorf("record length unreadable")
		}
		var r kmsg.Record
		if err := r.ReadFrom(payload[:n+int(l)]); err != nil {
			return nil, err
		}
		out = append(out, record{offset: b.Header.BaseOffset + int64(r.OffsetDelta), value: string(r.Value)})
		payload = payload[n+int(l):]
	}
	return out, nil
}

// lastSourceRecord is the offset of the last record on the partition that
// came from the source, -1 when none.
func (v logView) lastSourceRecord() int64 {
	for i := len(v.records) - 1; i >= 0; i-- {
		if strings.HasPrefix(v.records[i].value, srcValue) {
			return v.records[i].offset
		}
	}
	return -1
}

// lastMirrored is the offset of the last batch of v that is the source's
// own: its last source record, or a transaction marker after it that the
// source has at the same offset (a mirrored commit or abort). src is the
// source partition's view, nil when the source cannot be read: then any
// marker after the last source record passes, as the destination alone
// cannot tell a mirrored marker from kmirror's own.
func (v logView) lastMirrored(src *logView) (last int64, lenient bool) {
	last = v.lastSourceRecord()
	for _, b := range v.batches {
		h := b.Header
		if !h.IsControl() || h.BaseOffset <= last {
			continue
		}
		if src == nil {
			return h.BaseOffset, true
		}
		if h.BaseOffset < src.start {
			last, lenient = h.BaseOffset, true // the source deleted it: nothing to compare with
			continue
		}
		if s := src.batchAt(h.BaseOffset); s != nil && s.Header.IsControl() && s.Header.BaseOffset == h.BaseOffset {
			last = h.BaseOffset
		}
	}
	return last, false
}

// tail describes the last n batches of v, for a violation's message:
// offsets, kind (data, txn data, commit or abort marker) and producer id.
func (v logView) tail(n int) string {
	var parts []string
	for _, b := range v.batches[max(0, len(v.batches)-n):] {
		h := b.Header
		kind := "data"
		switch {
		case h.IsControl():
			kind = "marker"
		case h.IsTransactional():
			kind = "txn"
		}
		parts = append(parts, fmt.Sprintf("%d..%d %s pid %d", h.BaseOffset, h.LastOffset(), kind, h.ProducerID))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// batchAt is the batch holding offset, nil when none.
func (v logView) batchAt(offset int64) *enginetest.RawBatch {
	for i := range v.batches {
		if h := v.batches[i].Header; h.BaseOffset <= offset && offset <= h.LastOffset() {
			return &v.batches[i]
		}
	}
	return nil
}

// live is every partition some running instance owns now, by its own
// snapshot.
func (w *world) live() map[pref]engine.PartitionSnapshot {
	out := map[pref]engine.PartitionSnapshot{}
	for _, in := range w.running() {
		for _, m := range in.eng.Snapshot().Mirrors {
			for _, p := range m.Partitions {
				if m.Name == mirrorName && p.Owner == in.name {
					out[pref{p.Topic, p.Partition}] = p
				}
			}
		}
	}
	return out
}

// ends is each partition's log end on a cluster, nil for a topic that
// cannot be listed.
func (w *world) ends(cl *kgo.Client) map[string][]int64 {
	out := map[string][]int64{}
	for _, t := range topicNames {
		ctx, cancel := w.timeout(3 * time.Second)
		if e, err := enginetest.Ends(ctx, cl, t); err == nil {
			out[t] = e
		}
		cancel()
	}
	return out
}

// catalog reads __mirror_state, nil when it cannot.
func (w *world) catalog() *store.Catalog {
	ctx, cancel := w.timeout(10 * time.Second)
	defer cancel()
	cat, err := w.adm.Catalog(ctx)
	if err != nil {
		return nil
	}
	return cat
}

// persisted is each partition's record in a catalog.
func persisted(cat *store.Catalog) map[pref]store.PartitionRecord {
	out := map[pref]store.PartitionRecord{}
	for _, t := range topicNames {
		for _, r := range cat.PartitionsOf(mirrorName, t) {
			out[pref{t, r.Partition}] = r
		}
	}
	return out
}

// rebuilding reports whether a rebuild of topic is recorded and not
// finished: its topic may be missing or half mirrored for a while.
func rebuilding(cat *store.Catalog, topic string) bool {
	rec, ok := cat.Rebuilds[store.TopicRef{Mirror: mirrorName, Topic: topic}]
	return ok && !rec.Step.Finished()
}

// quarantined is every value in the quarantine (and retained) topics of
// each mirrored topic: those the rebuild records name, and any other the
// destination lists. A quarantine's partitions need not follow the
// topic's (it holds one per diverged range); the explorer's values name
// their partition, so a value anywhere in the topic's quarantines counts.
func (w *world) quarantined(cat *store.Catalog) (map[string]map[string]bool, error) {
	ctx, cancel := w.timeout(15 * time.Second)
	defer cancel()
	// A client of its own: a long-lived one answers a listing from the
	// metadata it cached, which can lag a topic just created (an
	// alignment's retained topic, which no record names) for seconds.
	lister, err := kgo.NewClient(kgo.SeedBrokers(w.dst.Addrs()...))
	if err != nil {
		return nil, err
	}
	names, err := kadm.NewClient(lister).ListTopics(ctx)
	lister.Close()
	if err != nil {
		return nil, err
	}
	all := names.Names()
	// A listing can lag a quarantine just created (in these runs it
	// missed one for whole steps): the records are what kmirror itself
	// goes by.
	for _, rb := range cat.Rebuilds {
		for _, n := range []string{rb.Quarantine, rb.Retained} {
			if rb.Mirror == mirrorName && n != "" && !slices.Contains(all, n) {
				all = append(all, n)
			}
		}
	}
	out := map[string]map[string]bool{}
	for _, name := range all {
		topic, ok := quarantineOf(name)
		if !ok {
			continue
		}
		for _, pi := range w.dst.PartitionInfos(name) {
			v, err := readLog(ctx, w.dstCl, name, pi.Partition)
			if err != nil {
				return nil, fmt.Errorf("quarantine %s/%d: %w", name, pi.Partition, err)
			}
			if out[topic] == nil {
				out[topic] = map[string]bool{}
			}
			for _, rec := range v.records {
				out[topic][rec.value] = true
			}
		}
	}
	return out, nil
}

// quarantineOf tells whether name is a quarantine or retained topic of a
// mirrored topic, and which.
func quarantineOf(name string) (string, bool) {
	for _, t := range topicNames {
		if strings.HasPrefix(name, t+".kmirror-quarantine-") || strings.HasPrefix(name, t+".kmirror-retained-") {
			return t, true
		}
	}
	return "", false
}

// sameBatches compares a destination partition with the source over the
// offsets both hold, batch by batch (as enginetest.CompareBatches does for
// whole logs); it returns the first difference, "" when none.
func sameBatches(src, dst logView) string {
	from := max(src.start, dst.start)
	to := min(src.end, dst.end)
	bySrc := map[int64]enginetest.RawBatch{}
	for _, b := range src.batches {
		bySrc[b.Header.BaseOffset] = b
	}
	for _, d := range dst.batches {
		h := d.Header
		if h.BaseOffset < from || h.NextOffset() > to {
			continue
		}
		s, ok := bySrc[h.BaseOffset]
		if !ok {
			return fmt.Sprintf("destination batch %d..%d has no source batch at %d", h.BaseOffset, h.LastOffset(), h.BaseOffset)
		}
		sh := s.Header
		switch {
		case sh.LastOffsetDelta != h.LastOffsetDelta || sh.RecordCount != h.RecordCount:
			return fmt.Sprintf("batch at %d: source %d..%d (%d records), destination %d..%d (%d records)",
				h.BaseOffset, sh.BaseOffset, sh.LastOffset(), sh.RecordCount, h.BaseOffset, h.LastOffset(), h.RecordCount)
		case sh.IsControl() != h.IsControl() || sh.IsTransactional() != h.IsTransactional():
			return fmt.Sprintf("batch at %d: source attributes %#x, destination %#x", h.BaseOffset, sh.Attributes, h.Attributes)
		case sh.IsControl():
			if sk, dk := controlType(s), controlType(d); sk != dk {
				return fmt.Sprintf("marker at %d: source %s, destination %s", h.BaseOffset, sk, dk)
			}
		case sh.BaseTimestamp != h.BaseTimestamp || sh.MaxTimestamp != h.MaxTimestamp:
			return fmt.Sprintf("batch at %d: timestamps differ", h.BaseOffset)
		case !slices.Equal(s.Payload, d.Payload):
			return fmt.Sprintf("batch at %d: payload bytes differ", h.BaseOffset)
		}
	}
	return ""
}

// controlType is "commit" or "abort" for a marker batch.
func controlType(b enginetest.RawBatch) string {
	var r kmsg.Record
	if err := r.ReadFrom(b.Payload); err != nil || len(r.Key) < 4 {
		return "unreadable"
	}
	if r.Key[3] == 1 {
		return "commit"
	}
	return "abort"
}
