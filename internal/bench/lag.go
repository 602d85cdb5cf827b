package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/internal/backoff"
)

// lagResult is the replication lag the engine adds under a steady load.
type lagResult struct {
	TargetMBPerS   float64 `json:"target_mb_per_s"`
	AchievedMBPerS float64 `json:"achieved_mb_per_s"`
	BatchRecords   int     `json:"batch_records"`
	BatchInterval  float64 `json:"batch_interval_ms"`
	Samples        int     `json:"samples"`
	Missing        int     `json:"missing"` // acknowledged batches never seen on the destination
	P50AddedMs     float64 `json:"p50_added_ms"`
	P99AddedMs     float64 `json:"p99_added_ms"`
	MaxAddedMs     float64 `json:"max_added_ms"`
	// The same reader on the source: how late a consumer sees a batch
	// without any mirror. It is part of the added figures too. It can be
	// slightly negative: the ack time is taken when the producer goroutine
	// gets the answer, which may be after the reader got the batch.
	SourceP50Ms float64 `json:"source_read_p50_ms"`
	SourceP99Ms float64 `json:"source_read_p99_ms"`
	// How long the brokers took to acknowledge a Produce in the same
	// window: the paced producer's batches on the source, and a probe
	// of one small record per destination broker every 10ms. A mirrored
	// batch waits for a destination acknowledgement before a reader of
	// the destination can see it, so the destination's tail is part of
	// the added lag whatever the mirror does.
	SourceProduceP99Ms float64 `json:"source_produce_p99_ms"`
	DestProduceP50Ms   float64 `json:"dest_produce_p50_ms"`
	DestProduceP99Ms   float64 `json:"dest_produce_p99_ms"`
	// The engine's own histograms over the same window (bucket upper
	// bounds, at most 19 % above the true figure): from a fetch answer
	// until the batch's Produce was sent, and that Produce's round trip.
	EngineP50Ms       float64 `json:"engine_p50_ms"`
	EngineP99Ms       float64 `json:"engine_p99_ms"`
	EngineAppendP50Ms float64 `json:"engine_append_p50_ms"`
	EngineAppendP99Ms float64 `json:"engine_append_p99_ms"`
}

// sent is one paced batch: where it landed and when the source acked it.
type sent struct {
	base  int64
	ackAt time.Time
	rtt   time.Duration // from the send to the acknowledgement
	bytes int
}

// The copies whose lag is measured.
const (
	lagEngine    = "engine"
	lagReference = "reference"
)

// measureLag mirrors a fresh topic while a paced producer writes to it at
// rate wire bytes per second, and measures for each batch the time from
// the source's acknowledgement to the moment a reader of the destination
// gets it. Each batch carries its send time as its timestamp. copier is
// lagEngine or lagReference (the bench's minimal raw batch copy, following
// the topic from its start).
func (b *bench) measureLag(ctx context.Context, name, copier string, rate float64) (lagResult, error) {
	topic := b.data.topic + "-" + name
	parts := b.data.partitions
	sl, err := createTopic(ctx, b.srcCl, topic, parts, nil)
	if err != nil {
		return lagResult{}, err
	}
	defer func() {
		_ = deleteTopics(context.WithoutCancel(ctx), b.srcCl, topic)
		_ = deleteTopics(context.WithoutCancel(ctx), b.dstCl, topic)
	}()
	var (
		eng     *engine.Engine
		dl      layout
		stopRef = func() error { return nil }
	)
	if copier == lagEngine {
		if eng, dl, err = b.startLagEngine(ctx, name, topic); eng != nil {
			defer eng.Close()
		}
	} else {
		var stop func() error
		if dl, stop, err = b.startLagReference(ctx, topic, sl); stop != nil {
			stopRef = sync.OnceValue(stop)
			defer stopRef()
		}
	}
	if err != nil {
		return lagResult{}, err
	}

	// A batch of n records every interval on each partition gives the
	// rate; intervals stay short so the load is smooth, not bursty.
	perRecord := float64(b.data.wireBytes) / float64(b.data.records)
	interval := 10 * time.Millisecond
	n := int(rate * interval.Seconds() / float64(parts) / perRecord)
	n = min(max(n, 1), 1000)
	template, err := lagBatch(b.codec, n, b.opts.recordSize)
	if err != nil {
		return lagResult{}, err
	}
	if want := time.Duration(float64(parts) * float64(len(template)) / rate * float64(time.Second)); want > interval {
		interval = min(want, time.Second)
	}

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	dstSeen, srcSeen := newArrivals(parts), newArrivals(parts)
	var readers sync.WaitGroup
	readErr := make(chan error, 2)
	readers.Go(func() { readErr <- dstSeen.follow(readCtx, b.dstCl, dl) })
	readers.Go(func() { readErr <- srcSeen.follow(readCtx, b.srcCl, sl) })

	start := time.Now()
	measureFrom := start.Add(b.opts.lagWarmup)
	until := measureFrom.Add(b.opts.lagDuration)
	acks := make([][]sent, parts)
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	probed := make(chan probeResult, 1)
	go func() { probed <- b.probeDestination(probeCtx, topic+"-probe", until) }()
	latencyAtStart := make(chan engine.MirrorLatency, 1)
	go func() {
		if backoff.Sleep(probeCtx, time.Until(measureFrom)) == nil && eng != nil {
			latencyAtStart <- mirrorLatency(eng, name)
		}
		close(latencyAtStart)
	}()
	err = forEachPartition(ctx, parts, func(ctx context.Context, p int32) error {
		buf := slices.Clone(template)
		var err error
		acks[p], err = pace(ctx, b.srcCl, sl, p, buf, interval, until)
		return err
	})
	if err != nil {
		return lagResult{}, fmt.Errorf("paced producer: %w", err)
	}
	var latencyAtEnd engine.MirrorLatency
	if eng != nil {
		latencyAtEnd = mirrorLatency(eng, name)
	}
	probe := <-probed
	if probe.err != nil {
		return lagResult{}, probe.err
	}
	atStart := <-latencyAtStart
	// Let the readers see everything acknowledged, then stop them.
	ends := make([]int64, parts)
	for p, a := range acks {
		if len(a) > 0 {
			ends[p] = a[len(a)-1].base + int64(n)
		}
	}
	werr := dstSeen.waitFor(ctx, ends, 30*time.Second)
	if werr == nil {
		werr = srcSeen.waitFor(ctx, ends, 10*time.Second)
	}
	stopReading()
	readers.Wait()
	close(readErr)
	for err := range readErr {
		if err != nil {
			return lagResult{}, err
		}
	}
	if err := stopRef(); err != nil {
		return lagResult{}, fmt.Errorf("reference copy: %w", err)
	}
	res := lagResult{TargetMBPerS: rate / 1e6, BatchRecords: n, BatchInterval: float64(interval) / float64(time.Millisecond)}
	var added, srcRead, srcProduce []float64
	var bytes int
	for p, as := range acks {
		for _, a := range as {
			if a.ackAt.Before(measureFrom) {
				continue
			}
			bytes += a.bytes
			srcProduce = append(srcProduce, ms(a.rtt))
			d, ok := dstSeen.at[p][a.base]
			if !ok {
				res.Missing++
				continue
			}
			added = append(added, ms(d.Sub(a.ackAt)))
			if s, ok := srcSeen.at[p][a.base]; ok {
				srcRead = append(srcRead, ms(s.Sub(a.ackAt)))
			}
		}
	}
	res.AchievedMBPerS = float64(bytes) / b.opts.lagDuration.Seconds() / 1e6
	res.Samples = len(added)
	res.P50AddedMs, res.P99AddedMs, res.MaxAddedMs = quantile(added, 0.5), quantile(added, 0.99), quantile(added, 1)
	res.SourceP50Ms, res.SourceP99Ms = quantile(srcRead, 0.5), quantile(srcRead, 0.99)
	res.SourceProduceP99Ms = quantile(srcProduce, 0.99)
	var dstProduce []float64
	for _, a := range probe.acks {
		if !a.ackAt.Before(measureFrom) {
			dstProduce = appendExpected(dstProduce, a.rtt, probeInterval)
		}
	}
	res.DestProduceP50Ms, res.DestProduceP99Ms = quantile(dstProduce, 0.5), quantile(dstProduce, 0.99)
	handled := latencyAtEnd.Engine.Since(atStart.Engine)
	appended := latencyAtEnd.DestinationProduce.Since(atStart.DestinationProduce)
	res.EngineP50Ms, res.EngineP99Ms = ms(handled.Quantile(0.5)), ms(handled.Quantile(0.99))
	res.EngineAppendP50Ms, res.EngineAppendP99Ms = ms(appended.Quantile(0.5)), ms(appended.Quantile(0.99))
	if werr != nil && res.Samples == 0 {
		return res, fmt.Errorf("lag: %w", werr)
	}
	return res, nil
}

// startLagEngine starts an engine mirroring topic and waits until every
// partition is MIRRORING; it returns the engine (to close, even with an
// error) and the destination topic's layout.
func (b *bench) startLagEngine(ctx context.Context, name, topic string) (*engine.Engine, layout, error) {
	parts := b.data.partitions
	eng, err := engine.New(ctx, engine.Config{Destination: b.dst.addrs, Instance: "bench-lag", Logger: b.opts.log})
	if err != nil {
		return nil, layout{}, fmt.Errorf("start engine: %w", err)
	}
	if err := eng.StartMirror(ctx, b.mirrorConfig(name, b.src.addrs, topic)); err != nil {
		return eng, layout{}, err
	}
	err = pollSnapshot(ctx, eng, 10*time.Millisecond, b.opts.phaseTimeout, func(ps []engine.PartitionSnapshot) (bool, error) {
		n := 0
		for _, p := range ps {
			if p.State == partition.Mirroring {
				n++
			}
		}
		return n == int(parts), nil
	})
	if err != nil {
		return eng, layout{}, fmt.Errorf("lag mirror start: %w", err)
	}
	dl, err := topicLayout(ctx, b.dstCl, topic)
	return eng, dl, err
}

// startLagReference starts the reference copy loop following every
// partition of topic (layout sl) from its start, into a destination topic
// it creates; stop ends it and returns how it failed, if it did.
func (b *bench) startLagReference(ctx context.Context, topic string, sl layout) (layout, func() error, error) {
	dl, err := createTopic(ctx, b.dstCl, topic, b.data.partitions, mirrorTopicConfigs)
	if err != nil {
		return layout{}, nil, err
	}
	src, err := newClient(b.src.addrs)
	if err != nil {
		return layout{}, nil, err
	}
	dst, err := newClient(b.dst.addrs)
	if err != nil {
		src.Close()
		return layout{}, nil, err
	}
	copyCtx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		copyErr error
	)
	wg.Go(func() {
		copyErr = forEachPartition(copyCtx, b.data.partitions, func(ctx context.Context, p int32) error {
			return referenceCopy(ctx, src, dst, sl, dl, p, math.MaxInt64)
		})
	})
	return dl, func() error {
		cancel()
		wg.Wait()
		src.Close()
		dst.Close()
		if errors.Is(copyErr, context.Canceled) {
			return nil
		}
		return copyErr
	}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile returns the q-quantile (nearest rank) of xs, 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// lagBatch builds one compressed batch of n data-set-like records, all with
// timestamp delta 0: every record's timestamp is then the batch's base
// timestamp, which lives in the header and can be restamped per send
// without recompressing.
func lagBatch(codec kgo.CompressionCodec, n, recordSize int) ([]byte, error) {
	values := recordValues(recordSize, 2)
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Key: fmt.Appendf(nil, "user-%06d", i), Value: values[i%len(values)]}
	}
	b, err := batch.Build(codec, time.Now().UnixMilli(), anonymousWriter, recs)
	if err != nil {
		return nil, fmt.Errorf("build lag batch: %w", err)
	}
	return b, nil
}

// anonymousWriter is a non-idempotent client's identity.
var anonymousWriter = batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// Header offsets of the timestamps the paced producer restamps.
const (
	offBaseTimestamp = 27
	offMaxTimestamp  = 35
)

// pace produces buf to partition p once per interval until until, stamping
// each send's time into the batch, and returns where each batch landed and
// when it was acknowledged. A slow answer delays the next send rather than
// queueing sends, so the achieved rate is reported, not assumed.
func pace(ctx context.Context, cl *kgo.Client, l layout, p int32, buf []byte, interval time.Duration, until time.Time) ([]sent, error) {
	// Spread the partitions' sends over the interval.
	if err := backoff.Sleep(ctx, interval*time.Duration(p)/time.Duration(len(l.leaders))); err != nil {
		return nil, err
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var out []sent
	for {
		now := time.Now()
		if now.After(until) {
			return out, nil
		}
		binary.BigEndian.PutUint64(buf[offBaseTimestamp:], uint64(now.UnixMilli()))
		binary.BigEndian.PutUint64(buf[offMaxTimestamp:], uint64(now.UnixMilli()))
		batch.Transform(buf, anonymousWriter)
		base, err := rawProduce(ctx, cl, l, p, buf)
		if err != nil {
			return out, err
		}
		ackAt := time.Now()
		out = append(out, sent{base: base, ackAt: ackAt, rtt: ackAt.Sub(now), bytes: len(buf)})
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-tick.C:
		}
	}
}

// mirrorLatency returns the latency histograms of the named mirror.
func mirrorLatency(eng *engine.Engine, name string) engine.MirrorLatency {
	for _, m := range eng.Snapshot().Mirrors {
		if m.Name == name {
			return m.Latency
		}
	}
	return engine.MirrorLatency{}
}

// probeInterval is how often the destination probe produces to each broker.
const probeInterval = 10 * time.Millisecond

// appendExpected appends a round trip to xs, in ms, with the samples a
// stall kept from being taken: the probe sends again only once answered,
// so a 100ms stall yields one sample where a steady sender would have
// seen ten, at 100, 90, ... 10ms. Without them the probe would
// under-count exactly the stalls it is there to show.
func appendExpected(xs []float64, rtt, every time.Duration) []float64 {
	xs = append(xs, ms(rtt))
	for d := rtt - every; d > 0; d -= every {
		xs = append(xs, ms(d))
	}
	return xs
}

// probeResult is what probeDestination measured.
type probeResult struct {
	acks []sent
	err  error
}

// probeDestination produces one small record to every destination broker
// every 10ms until until, on a topic of its own with a partition led by
// each broker, and returns each acknowledgement's round trip: how the
// destination answers Produce requests while the mirror appends to it.
func (b *bench) probeDestination(ctx context.Context, topic string, until time.Time) probeResult {
	l, err := createTopic(ctx, b.dstCl, topic, int32(b.opts.brokers), nil)
	if err != nil {
		return probeResult{err: fmt.Errorf("probe topic: %w", err)}
	}
	defer func() { _ = deleteTopics(context.WithoutCancel(ctx), b.dstCl, topic) }()
	record, err := batch.Build(kgo.NoCompression(), time.Now().UnixMilli(), anonymousWriter, []batch.Record{{Value: []byte("probe")}})
	if err != nil {
		return probeResult{err: fmt.Errorf("probe batch: %w", err)}
	}
	// One partition per leading broker; kfake may lead several
	// partitions from one broker and none from another.
	var parts []int32
	for _, ps := range l.byLeader() {
		parts = append(parts, ps[0])
	}
	acks := make([][]sent, len(parts))
	err = forEachPartition(ctx, int32(len(parts)), func(ctx context.Context, i int32) error {
		var err error
		acks[i], err = pace(ctx, b.dstCl, l, parts[i], slices.Clone(record), probeInterval, until)
		return err
	})
	if err != nil {
		return probeResult{err: fmt.Errorf("destination probe: %w", err)}
	}
	return probeResult{acks: slices.Concat(acks...)}
}

// arrivals records when a reader first got each batch of a topic.
type arrivals struct {
	at   []map[int64]time.Time // by partition, by base offset; written by follow only
	next []atomic.Int64        // by partition: offset the reader reads next
}

func newArrivals(parts int32) *arrivals {
	a := &arrivals{at: make([]map[int64]time.Time, parts), next: make([]atomic.Int64, parts)}
	for i := range a.at {
		a.at[i] = make(map[int64]time.Time)
	}
	return a
}

// follow long-polls every partition of l from offset 0 until ctx ends,
// like a consumer that never decompresses, so the reader's own cost stays
// small next to the engine's. Each broker's partitions are read by one
// goroutine; the maps of different partitions are disjoint.
func (a *arrivals) follow(ctx context.Context, cl *kgo.Client, l layout) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for broker, parts := range l.byLeader() {
		wg.Go(func() {
			req := make([]fetchPart, len(parts))
			for ctx.Err() == nil {
				for i, p := range parts {
					req[i] = fetchPart{partition: p, offset: a.next[p].Load(), maxBytes: 4 << 20}
				}
				answers, err := rawFetch(ctx, cl, broker, l, req, 200*time.Millisecond)
				now := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					return
				}
				for _, ans := range answers {
					_, _ = batch.Split(ans.records, func(h batch.Header, _ []byte) error {
						if _, ok := a.at[ans.partition][h.BaseOffset]; !ok {
							a.at[ans.partition][h.BaseOffset] = now
						}
						a.next[ans.partition].Store(h.NextOffset())
						return nil
					})
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// waitFor waits until the reader has read every partition up to ends.
func (a *arrivals) waitFor(ctx context.Context, ends []int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind := 0
		for p, e := range ends {
			if a.next[p].Load() < e {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reader still behind on %d partitions after %s", behind, timeout)
		}
		if err := backoff.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}
