package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopic creates __mirror_state on the destination if it is missing:
// compacted, Partitions partitions, replication factor min(3, brokers).
func EnsureTopic(ctx context.Context, adm *kadm.Client) error {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("list destination brokers: %w", err)
	}
	rf := int16(min(3, len(brokers)))
	resp, err := adm.CreateTopic(ctx, Partitions, rf, map[string]*string{
		"cleanup.policy":   kadm.StringPtr("compact"),
		"compression.type": kadm.StringPtr("zstd"),
	}, Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", Topic, err)
	}
	return nil
}

// Writer writes __mirror_state records, each to its key's shard, and waits
// for every write to be acknowledged by all in-sync replicas.
type Writer struct{ cl *kgo.Client }

// NewWriter returns a writer over cl, whose options must include
// ManualPartitioner-compatible partitioning (see WriterOpts).
func NewWriter(cl *kgo.Client) *Writer { return &Writer{cl: cl} }

// WriterOpts are the client options a Writer's client needs.
//
// A write must give up when its context ends, also while its request is in
// flight to a destination that stopped answering: an idempotent franz-go
// producer otherwise retries such a write until the broker answers, however
// long it is down, and the state writer with it (a runner persisting its
// state, and through the runner a change of ownership and Close). A record
// given up on may still land, and land again when it is written anew; every
// __mirror_state value is the full latest state of its key, so that is
// harmless.
func WriterOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.AllowIdempotentProduceCancellation(),
	}
}

// Put writes value under key; a nil value is a tombstone.
func (w *Writer) Put(ctx context.Context, key Key, value []byte) error {
	if err := key.Validate(); err != nil {
		return err
	}
	r := &kgo.Record{Topic: Topic, Partition: key.Shard(), Key: key.Bytes(), Value: value}
	if err := w.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("write %s to %s: %w", key, Topic, err)
	}
	return nil
}

// PutPartition writes a partition record.
func (w *Writer) PutPartition(ctx context.Context, r PartitionRecord) error {
	b, err := EncodePartition(r)
	if err != nil {
		return err
	}
	return w.Put(ctx, PartitionKey(r.Mirror, r.Topic, r.Partition), b)
}

// PutPartitionAsync writes a partition record without waiting; done is
// called with the outcome from the client's goroutine. Records of one
// partition written through one Writer, with Put or PutPartitionAsync, land
// in the order they were handed over.
//
// The write is given up when ctx ends, which it must: a record that could
// never be given up would hold every later write to its shard behind it
// (the client keeps a partition's records in order), also those whose
// callers gave up.
func (w *Writer) PutPartitionAsync(ctx context.Context, r PartitionRecord, done func(error)) {
	b, err := EncodePartition(r)
	if err != nil {
		done(err)
		return
	}
	w.PutAsync(ctx, PartitionKey(r.Mirror, r.Topic, r.Partition), b, done)
}

// PutAsync writes value under key without waiting; done is called with the
// outcome from the client's goroutine. The write gives up when ctx ends;
// a ctx that never ends would hold every later write to the key's shard
// behind the record if the destination never answered it.
func (w *Writer) PutAsync(ctx context.Context, key Key, value []byte, done func(error)) {
	if err := key.Validate(); err != nil {
		done(err)
		return
	}
	rec := &kgo.Record{Topic: Topic, Partition: key.Shard(), Key: key.Bytes(), Value: value}
	w.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		if err != nil {
			err = fmt.Errorf("write %s to %s: %w", key, Topic, err)
		}
		done(err)
	})
}

// PutTopic writes a topic record.
func (w *Writer) PutTopic(ctx context.Context, t TopicDesired) error {
	b, err := EncodeTopic(t)
	if err != nil {
		return err
	}
	return w.Put(ctx, TopicKey(t.Mirror, t.Topic), b)
}

// PutRebuild writes a rebuild record.
func (w *Writer) PutRebuild(ctx context.Context, r RebuildRecord) error {
	b, err := EncodeRebuild(r)
	if err != nil {
		return err
	}
	return w.Put(ctx, RebuildKey(r.Mirror, r.Topic), b)
}

// PutHeldACLs writes a topic's held grants.
func (w *Writer) PutHeldACLs(ctx context.Context, h HeldACLs) error {
	b, err := EncodeHeldACLs(h)
	if err != nil {
		return err
	}
	return w.Put(ctx, ACLsKey(h.Mirror, h.Topic), b)
}

// PutMirror writes a mirror definition.
func (w *Writer) PutMirror(ctx context.Context, d MirrorDef) error {
	b, err := EncodeMirror(d)
	if err != nil {
		return err
	}
	return w.Put(ctx, MirrorKey(d.Name), b)
}

// ErrNoStateTopic: the destination has no __mirror_state (no mirror was
// ever created there).
var ErrNoStateTopic = errors.New(Topic + " does not exist")

// ReadAll reads __mirror_state from its start to its current end and returns
// the catalog. opts reach the destination (seed brokers, security). Records
// that do not decode are skipped and reported through bad (which may be
// nil); the read goes on.
func ReadAll(ctx context.Context, opts []kgo.Opt, bad func(key []byte, err error)) (*Catalog, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return NewCatalog(), ErrNoStateTopic
		}
		return nil, fmt.Errorf("read %s: %w", Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", Topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(Topic, o.Partition)
		if o.Offset > s.Offset {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	cat := NewCatalog()
	if len(want) == 0 {
		return cat, nil
	}
	rd, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: offsets}))...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", Topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("read %s/%d: %w", Topic, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, _, err := cat.Apply(r.Key, r.Value); err != nil && bad != nil {
				bad(r.Key, err)
			}
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return cat, nil
}
