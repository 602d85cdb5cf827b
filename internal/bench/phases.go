package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
)

// The copy phases, in the order of the first repeat.
const (
	phaseRawFetch  = "raw_fetch"
	phaseReference = "reference"
	phaseNaive     = "naive"
	phaseEngine    = "engine"
	// The same copies across the link model: from a source behind an
	// added round trip, and to a replicating destination.
	phaseNaiveRTT  = "naive_rtt"
	phaseEngineRTT = "engine_rtt"
	// phaseRawFetchRTT reads across the link with one 8 MiB fetch in
	// flight per partition, as the engine fetches there, each on a
	// connection of its own (the engine's fetchers share four a broker):
	// an upper bound of the engine's fetch pattern.
	phaseRawFetchRTT          = "raw_fetch_rtt"
	phaseEngineProduceLatency = "engine_produce_latency"
	// phaseRawProduce writes the data set's batches, read beforehand, with
	// as many in flight a partition as the engine has, each partition on a
	// client of its own: the writing ceiling. phaseRawProduceLatency does
	// the same to the replicating destination.
	phaseRawProduce        = "raw_produce"
	phaseRawProduceLatency = "raw_produce_latency"
)

// phaseNames are every phase a run may have, in report order.
var phaseNames = []string{phaseRawFetch, phaseRawProduce, phaseReference, phaseNaive, phaseEngine, phaseRawFetchRTT, phaseNaiveRTT, phaseEngineRTT, phaseRawProduceLatency, phaseEngineProduceLatency}

// phases are the copy phases of a run with these options.
func (o options) phases() []string {
	out := []string{phaseRawFetch, phaseRawProduce, phaseReference, phaseNaive, phaseEngine}
	if o.wan() {
		out = append(out, phaseRawFetchRTT, phaseNaiveRTT, phaseEngineRTT)
	}
	if o.produceLatency > 0 {
		out = append(out, phaseRawProduceLatency, phaseEngineProduceLatency)
	}
	if o.onlyPhases != nil {
		out = slices.DeleteFunc(out, func(ph string) bool { return !slices.Contains(o.onlyPhases, ph) })
	}
	return out
}

// run is one prepared phase run. work is the measured part; finish
// verifies the result and frees what prepare set up, outside the
// measurement.
type run struct {
	work   func(context.Context) error
	finish func(context.Context) error
	// startup, when set, is how long the measured work took to append
	// its first batch (the engine's start: connections, metadata,
	// alignment, fencing), read after work.
	startup func() time.Duration
}

// prepare sets up one run of a phase: its clients and a fresh destination
// topic, so setup costs stay out of the measured window.
func (b *bench) prepare(ctx context.Context, name string, repeat int) (run, error) {
	src, dst := b.src.addrs, b.dst.addrs
	switch name {
	case phaseNaiveRTT, phaseEngineRTT, phaseRawFetchRTT:
		src = b.srcWAN
	case phaseEngineProduceLatency, phaseRawProduceLatency:
		dst = b.dstReplicated
	}
	switch name {
	case phaseRawFetch:
		return b.prepareRawFetch(ctx)
	case phaseRawFetchRTT:
		return b.prepareStreams(ctx, src)
	case phaseRawProduce, phaseRawProduceLatency:
		return b.prepareRawProduce(ctx, name, repeat, dst)
	case phaseReference:
		return b.prepareReference(ctx, repeat)
	case phaseNaive, phaseNaiveRTT:
		return b.prepareNaive(ctx, name, repeat, src, dst)
	case phaseEngine, phaseEngineRTT, phaseEngineProduceLatency:
		return b.prepareEngine(ctx, name, repeat, src, dst)
	}
	return run{}, fmt.Errorf("unknown phase %q", name)
}

// warm makes a client connect and learn the cluster before a measured
// window: the first request of a new client dials.
func warm(ctx context.Context, cl *kgo.Client, topic string) error {
	_, err := topicLayout(ctx, cl, topic)
	return err
}

// prepareRawFetch is phase (a): read every batch of the data set with raw
// Fetch requests to the leaders, many partitions per request, and only
// count the bytes. No copy can be faster than this reading.
func (b *bench) prepareRawFetch(ctx context.Context) (run, error) {
	cl, err := newClient(b.src.addrs)
	if err != nil {
		return run{}, err
	}
	if err := warm(ctx, cl, b.data.topic); err != nil {
		cl.Close()
		return run{}, err
	}
	var read int64
	return run{
		work: func(ctx context.Context) error {
			n, _, err := readAll(ctx, cl, b.data, nil)
			read = n
			return err
		},
		finish: func(context.Context) error {
			cl.Close()
			if read != b.data.wireBytes {
				return fmt.Errorf("raw fetch read %d bytes, the data set holds %d", read, b.data.wireBytes)
			}
			return nil
		},
	}, nil
}

// mirrorTopicConfigs are what a byte-for-byte copy needs on the
// destination topic: keep the producer's compressed batch as it is.
var mirrorTopicConfigs = map[string]*string{
	"compression.type":       kgoStr("producer"),
	"message.timestamp.type": kgoStr("CreateTime"),
}

func kgoStr(s string) *string { return &s }

// streamFetchBytes is what each fetch of the streams reader asks of its
// partition: the engine's largest (replica's maxGrownFetchBytes).
const streamFetchBytes = 8 << 20

// prepareStreams is the reading ceiling across the link for a reader
// fetching as the engine does there, one fetch in flight a partition, 8
// MiB at a time, each partition on a connection of its own. The link's
// round trip and the source broker's time for each answer then bound
// every partition alike, the engine's pipeline left out. Each client
// dials its fetch connection before the measurement (a one-byte fetch of
// its partition), so the run holds no start-up but the first request.
func (b *bench) prepareStreams(ctx context.Context, src []string) (run, error) {
	cls, err := partitionClients(b.data.partitions, src, func(cl *kgo.Client, p int32) error {
		if err := warm(ctx, cl, b.data.topic); err != nil {
			return err
		}
		_, err := rawFetch(ctx, cl, b.data.leaders[p], b.data.layout, []fetchPart{{partition: p, maxBytes: 1}}, 0)
		return err
	})
	if err != nil {
		return run{}, err
	}
	var read atomic.Int64
	return run{
		work: func(ctx context.Context) error {
			return forEachPartition(ctx, b.data.partitions, func(ctx context.Context, p int32) error {
				n, err := readStream(ctx, cls[p], b.data, p)
				read.Add(n)
				return err
			})
		},
		finish: func(context.Context) error {
			cls.close()
			if n := read.Load(); n != b.data.wireBytes {
				return fmt.Errorf("the streams read %d bytes, the data set holds %d", n, b.data.wireBytes)
			}
			return nil
		},
	}, nil
}

// clients are a client a partition, by partition number.
type clients []*kgo.Client

func (cls clients) close() {
	for _, cl := range cls {
		cl.Close()
	}
}

// partitionClients makes a client to addrs for each of partitions and
// runs prepare, when not nil, on each; on an error it closes those made.
func partitionClients(partitions int32, addrs []string, prepare func(*kgo.Client, int32) error) (clients, error) {
	var cls clients
	for p := range partitions {
		cl, err := newClient(addrs)
		if err != nil {
			cls.close()
			return nil, err
		}
		cls = append(cls, cl)
		if prepare != nil {
			if err := prepare(cl, p); err != nil {
				cls.close()
				return nil, err
			}
		}
	}
	return cls, nil
}

// readStream reads partition p of the data set to its end, a fetch of
// streamFetchBytes at a time, and returns the bytes read.
func readStream(ctx context.Context, cl *kgo.Client, d dataset, p int32) (int64, error) {
	var n int64
	for off := int64(0); off < d.ends[p]; {
		answers, err := rawFetch(ctx, cl, d.leaders[p], d.layout, []fetchPart{{partition: p, offset: off, maxBytes: streamFetchBytes}}, 0)
		if err != nil {
			return n, err
		}
		next := off
		for _, a := range answers {
			var read int64
			next, read, _, err = readAnswer(d, a, next, nil)
			n += read
			if err != nil {
				return n, err
			}
		}
		if next == off {
			return n, fmt.Errorf("read %s/%d: no progress at offset %d (a batch larger than %d bytes?)", d.topic, p, off, streamFetchBytes)
		}
		off = next
	}
	return n, nil
}

// prepareRawProduce is the writing ceiling: the data set's batches, read
// and rewritten for an anonymous writer before the measurement (the data
// set is held in memory), are appended to a fresh destination topic with
// as many Produce requests in flight a partition as the engine allows
// (mirror.max.inflight's default, 5), each partition on a client of its
// own, one batch a request. Batches of one partition may land out of
// their order; only the count is checked. Against the replicating
// destination it shows what any writer keeps of this ceiling there.
func (b *bench) prepareRawProduce(ctx context.Context, name string, repeat int, dst []string) (run, error) {
	topic := fmt.Sprintf("%s-%s-%d", b.data.topic, name, repeat)
	batches := make([][][]byte, b.data.partitions)
	anonymous := batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	var mu sync.Mutex
	if _, _, err := readAll(ctx, b.srcCl, b.data, func(p int32, _ batch.Header, bb []byte) {
		c := slices.Clone(bb)
		batch.Transform(c, anonymous)
		mu.Lock()
		batches[p] = append(batches[p], c)
		mu.Unlock()
	}); err != nil {
		return run{}, err
	}
	cls, err := partitionClients(b.data.partitions, dst, nil)
	if err != nil {
		return run{}, err
	}
	dl, err := createTopic(ctx, cls[0], topic, b.data.partitions, mirrorTopicConfigs)
	for _, cl := range cls {
		if err == nil {
			err = warm(ctx, cl, topic)
		}
	}
	if err != nil {
		cls.close()
		_ = deleteTopics(ctx, b.dstCl, topic)
		return run{}, err
	}
	return run{
		work: func(ctx context.Context) error {
			return forEachPartition(ctx, b.data.partitions, func(ctx context.Context, p int32) error {
				return produceAll(ctx, cls[p], dl, p, batches[p], rawProduceInFlight)
			})
		},
		finish: func(ctx context.Context) error {
			cls.close()
			err := b.verifyCopy(ctx, topic)
			if derr := deleteTopics(ctx, b.dstCl, topic); err == nil {
				err = derr
			}
			return err
		},
	}, nil
}

// rawProduceInFlight is the Produce requests the writing ceiling keeps in
// flight a partition: the engine's default mirror.max.inflight.
const rawProduceInFlight = 5

// produceAll appends batches to partition p of l's topic with up to
// inFlight requests out at once, and returns the first error.
func produceAll(ctx context.Context, cl *kgo.Client, l layout, p int32, batches [][]byte, inFlight int) error {
	return runEach(ctx, len(batches), inFlight, func(ctx context.Context, i int) error {
		_, err := rawProduce(ctx, cl, l, p, batches[i])
		return err
	})
}

// prepareReference is phase (b), the bench's own minimal raw batch copy:
// one worker per partition that fetches raw, rewrites each batch with
// batch.Transform and produces it raw, with no state machine and no checks
// beyond the broker's answer. It is what the engine's data path costs
// without its safety.
func (b *bench) prepareReference(ctx context.Context, repeat int) (run, error) {
	topic := fmt.Sprintf("%s-reference-%d", b.data.topic, repeat)
	src, err := newClient(b.src.addrs)
	if err != nil {
		return run{}, err
	}
	dst, err := newClient(b.dst.addrs)
	if err != nil {
		src.Close()
		return run{}, err
	}
	cleanup := func(ctx context.Context) error {
		err := b.verifyCopy(ctx, topic)
		if derr := deleteTopics(ctx, b.dstCl, topic); err == nil {
			err = derr
		}
		src.Close()
		dst.Close()
		return err
	}
	dl, err := createTopic(ctx, dst, topic, b.data.partitions, mirrorTopicConfigs)
	if err == nil {
		err = warm(ctx, src, b.data.topic)
	}
	if err != nil {
		_ = cleanup(ctx)
		return run{}, err
	}
	return run{
		work: func(ctx context.Context) error {
			return forEachPartition(ctx, b.data.partitions, func(ctx context.Context, p int32) error {
				return referenceCopy(ctx, src, dst, b.data.layout, dl, p, b.data.ends[p])
			})
		},
		finish: cleanup,
	}, nil
}

// forEachPartition runs fn for every partition concurrently and returns
// the first error; the first failure cancels the others.
func forEachPartition(ctx context.Context, partitions int32, fn func(context.Context, int32) error) error {
	return runEach(ctx, int(partitions), int(partitions), func(ctx context.Context, i int) error {
		return fn(ctx, int32(i))
	})
}

// runEach runs fn for 0 to n-1, at most limit at once, and returns the
// first error (or the end of ctx); the first failure cancels the others.
func runEach(ctx context.Context, n, limit int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	slots := make(chan struct{}, max(limit, 1))
	for i := range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// referenceCopy copies one partition: a fetch goroutine reads ahead while
// this one rewrites and produces batch after batch.
func referenceCopy(ctx context.Context, src, dst *kgo.Client, sl, dl layout, p int32, end int64) error {
	type chunk struct {
		batches [][]byte
		err     error
	}
	ctx, cancel := context.WithCancel(ctx)
	chunks := make(chan chunk, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(chunks)
		off, size := int64(0), int32(1<<20)
		for off < end {
			answers, err := rawFetch(ctx, src, sl.leaders[p], sl, []fetchPart{{partition: p, offset: off, maxBytes: size}}, 250*time.Millisecond)
			var c chunk
			c.err = err
			for _, a := range answers {
				_, err := batch.Split(a.records, func(h batch.Header, bb []byte) error {
					c.batches = append(c.batches, bb)
					off = h.NextOffset()
					return nil
				})
				if err != nil && c.err == nil {
					c.err = err
				}
				if len(c.batches) == 0 && len(a.records) > 0 {
					size = min(size*2, 64<<20)
				}
			}
			select {
			case chunks <- c:
			case <-ctx.Done():
				return
			}
			if c.err != nil {
				return
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	anonymous := batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for c := range chunks {
		if c.err != nil {
			return c.err
		}
		for _, bb := range c.batches {
			batch.Transform(bb, anonymous)
			if _, err := rawProduce(ctx, dst, dl, p, bb); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// verifyCopy checks that a destination topic ends where the source does.
func (b *bench) verifyCopy(ctx context.Context, topic string) error {
	ends, err := endOffsets(ctx, b.dstCl, topic, b.data.partitions)
	if err != nil {
		return err
	}
	if !slices.Equal(ends, b.data.ends) {
		return fmt.Errorf("destination %s ends at %v, source at %v", topic, ends, b.data.ends)
	}
	return nil
}

// prepareNaive is phase (c), the baseline kmirror replaces: a franz-go
// consumer decompresses every record and a franz-go producer recompresses
// it into new batches, like MirrorMaker 2. Partition numbers are kept.
func (b *bench) prepareNaive(ctx context.Context, name string, repeat int, srcAddrs, dstAddrs []string) (run, error) {
	topic := fmt.Sprintf("%s-%s-%d", b.data.topic, name, repeat)
	cons, err := newClient(srcAddrs,
		kgo.ConsumeTopics(b.data.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(1<<20),
	)
	if err != nil {
		return run{}, err
	}
	prod, err := newClient(dstAddrs,
		kgo.ProducerBatchCompression(b.codec),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		cons.Close()
		return run{}, err
	}
	cleanup := func(ctx context.Context) error {
		err := b.verifyCopy(ctx, topic)
		if derr := deleteTopics(ctx, b.dstCl, topic); err == nil {
			err = derr
		}
		cons.Close()
		prod.Close()
		return err
	}
	if _, err := createTopic(ctx, prod, topic, b.data.partitions, nil); err != nil {
		_ = cleanup(ctx)
		return run{}, err
	}
	return run{
		work: func(ctx context.Context) error {
			return naiveCopy(ctx, cons, prod, topic, b.data.records)
		},
		finish: cleanup,
	}, nil
}

// naiveCopy consumes total records and produces each to the same partition
// of topic, then waits for every acknowledgement.
func naiveCopy(ctx context.Context, cons, prod *kgo.Client, topic string, total int64) error {
	var (
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
		consumed int64
	)
	for consumed < total && firstErr.Load() == nil {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return fmt.Errorf("consume %s/%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			consumed++
			wg.Add(1)
			out := &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
			prod.Produce(ctx, out, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			})
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("produce to %s: %w", topic, *e)
	}
	return nil
}

// prepareEngine is phase (d): the kmirror engine mirrors the data set to a
// fresh destination topic of the same name. The run ends when every
// destination partition ends where its source does.
func (b *bench) prepareEngine(ctx context.Context, name string, repeat int, srcAddrs, dstAddrs []string) (run, error) {
	if _, err := createTopic(ctx, b.dstCl, b.data.topic, b.data.partitions, mirrorTopicConfigs); err != nil {
		return run{}, err
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dstAddrs, Instance: "bench", Logger: b.opts.log})
	if err != nil {
		_ = deleteTopics(ctx, b.dstCl, b.data.topic)
		return run{}, fmt.Errorf("start engine: %w", err)
	}
	var startup time.Duration
	return run{
		work: func(ctx context.Context) error {
			began := time.Now()
			err := eng.StartMirror(ctx, b.mirrorConfig(fmt.Sprintf("bench-%s-%d", name, repeat), srcAddrs, b.data.topic))
			if err != nil {
				return err
			}
			return waitMirrored(ctx, eng, b.data.ends, 10*time.Millisecond, b.opts.phaseTimeout, func() {
				startup = time.Since(began)
			})
		},
		startup: func() time.Duration { return startup },
		finish: func(ctx context.Context) error {
			eng.Close()
			err := b.verifyCopy(ctx, b.data.topic)
			if derr := deleteTopics(ctx, b.dstCl, b.data.topic); err == nil {
				err = derr
			}
			return err
		},
	}, nil
}

// mirrorConfig is the configuration of every mirror the bench starts: the
// engine's defaults unless a tuning flag overrides them.
func (b *bench) mirrorConfig(name string, src []string, topics ...string) engine.MirrorConfig {
	return engine.MirrorConfig{
		Name:                name,
		SourceBootstrap:     src,
		Topics:              topics,
		MaxInFlight:         b.opts.maxInFlight,
		NumFetchers:         b.opts.numFetchers,
		FetchMaxWait:        b.opts.fetchMaxWait,
		PartitionFetchBytes: b.opts.partitionFetchBytes,
	}
}

// errPartitionFailed is returned when the engine reports a partition FAILED
// for good during a measurement: a result from a broken run means nothing.
// A retryable failure is left to the engine's retries and the timeout.
var errPartitionFailed = errors.New("engine partition failed")

// waitMirrored polls the engine's snapshot until the destination log end of
// every partition of its one mirror equals ends[partition]; firstBatch, if
// not nil, is called at the first poll that finds a batch appended.
func waitMirrored(ctx context.Context, eng *engine.Engine, ends []int64, every, timeout time.Duration, firstBatch func()) error {
	return pollSnapshot(ctx, eng, every, timeout, func(ps []engine.PartitionSnapshot) (bool, error) {
		done := 0
		for _, p := range ps {
			if firstBatch != nil && p.BatchesCopied > 0 {
				firstBatch()
				firstBatch = nil
			}
			if p.State == partition.Failed && !p.Retryable {
				return false, fmt.Errorf("%w: %s/%d: %s", errPartitionFailed, p.Topic, p.Partition, p.Error)
			}
			if int(p.Partition) < len(ends) && p.DestLogEnd == ends[p.Partition] {
				done++
			}
		}
		return done == len(ends), nil
	})
}

// pollSnapshot calls cond with the partitions of every mirror each period
// until it is met, fails, or timeout passes.
func pollSnapshot(ctx context.Context, eng *engine.Engine, every, timeout time.Duration, cond func([]engine.PartitionSnapshot) (bool, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last string
	for {
		var ps []engine.PartitionSnapshot
		for _, m := range eng.Snapshot().Mirrors {
			ps = append(ps, m.Partitions...)
		}
		ok, err := cond(ps)
		if err != nil || ok {
			return err
		}
		last = summarize(ps)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("engine did not get there within %s: %s", timeout, last)
		case <-tick.C:
		}
	}
}

// summarize counts partitions by state for a timeout message.
func summarize(ps []engine.PartitionSnapshot) string {
	counts := map[partition.State]int{}
	lastErr := ""
	for _, p := range ps {
		counts[p.State]++
		if p.Error != "" {
			lastErr = p.Error
		}
	}
	s := fmt.Sprintf("%d partitions:", len(ps))
	for _, st := range partition.States {
		if n := counts[st]; n > 0 {
			s += fmt.Sprintf(" %s=%d", st, n)
		}
	}
	if lastErr != "" {
		s += "; last error: " + lastErr
	}
	return s
}
