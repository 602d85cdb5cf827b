package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/internal/backoff"
)

// scalePoint is what the engine costs with many idle mirrored partitions
// and how fast it stops them all.
type scalePoint struct {
	Partitions int     `json:"partitions"`
	Topics     int     `json:"topics"`
	StartS     float64 `json:"start_s"` // StartMirror until every partition is MIRRORING and caught up
	// HeapBytes is runtime HeapAlloc after GC with the mirror idle, minus
	// the same before StartMirror.
	HeapBytes        int64   `json:"heap_bytes"`
	HeapPerPartition float64 `json:"heap_bytes_per_partition"`
	// Goroutine stacks are not in HeapAlloc; a goroutine per partition
	// makes them the larger part, so they are shown next to it.
	StackBytes        int64   `json:"stack_bytes"`
	StackPerPartition float64 `json:"stack_bytes_per_partition"`
	Goroutines        int     `json:"goroutines"`
	IdleCPUPercent    float64 `json:"idle_cpu_percent"` // of one core, engine process, nothing to copy
	// IdleSrcBrokerCPUPercent is the source brokers' CPU in the same
	// window, of one core: what the idle partitions' long-polls cost the
	// cluster they are mirrored from.
	IdleSrcBrokerCPUPercent float64 `json:"idle_source_broker_cpu_percent"`
	StopS                   float64 `json:"stop_s"`               // Control(CmdStop) until every partition is STOPPED
	StopError               string  `json:"stop_error,omitempty"` // why the stop was not seen to end (within --scale-timeout)

	// The CPU time of the engine and of the broker processes during the
	// start and the stop: what the time went to. The brokers' is sampled
	// by the bench every quarter second around the windows.
	StartCPUS          float64 `json:"start_cpu_s"`
	StopCPUS           float64 `json:"stop_cpu_s"`
	StartSrcBrokerCPUS float64 `json:"start_source_broker_cpu_s"`
	StartDstBrokerCPUS float64 `json:"start_destination_broker_cpu_s"`
	StopDstBrokerCPUS  float64 `json:"stop_destination_broker_cpu_s"`
	// The windows, as Unix nanoseconds, for the bench to place the
	// brokers' samples.
	StartAt, StartedAt, IdleAt, IdledAt, StopAt, StoppedAt int64 `json:",omitempty"`
}

// idleTopic names the i-th topic of the idle partitions.
func (b *bench) idleTopic(i int) string { return fmt.Sprintf("%s-idle-%03d", b.data.topic, i) }

// measureScale creates topics for the largest count (topicSize partitions
// each, one record per partition so every partition has something
// mirrored), then for each count starts a mirror of that many partitions,
// measures its idle heap, and stops it.
func (b *bench) measureScale(ctx context.Context, counts []int, topicSize int) ([]scalePoint, error) {
	if len(counts) == 0 {
		return nil, nil
	}
	most := slices.Max(counts)
	ntopics := most / topicSize
	if err := b.fillIdleTopics(ctx, ntopics, topicSize); err != nil {
		return nil, err
	}
	out := make([]scalePoint, 0, len(counts))
	for i, n := range counts {
		b.progress("scale: %d idle partitions in %d topics", n, n/topicSize)
		pt, err := b.runScaleChild(ctx, n, topicSize, i == len(counts)-1)
		if err != nil {
			return out, fmt.Errorf("%d partitions: %w", n, err)
		}
		stop := fmt.Sprintf("stop %.3fs", pt.StopS)
		if pt.StopError != "" {
			stop = "stop not measured: " + pt.StopError
		}
		b.progress("scale: %d partitions: start %.1fs, idle CPU %.1f%% (source brokers %.1f%%), heap %.0f B/partition, stack %.0f B/partition, %s",
			n, pt.StartS, pt.IdleCPUPercent, pt.IdleSrcBrokerCPUPercent, pt.HeapPerPartition, pt.StackPerPartition, stop)
		out = append(out, pt)
	}
	return out, nil
}

// ScaleEnv, when set in the environment, makes the kmirror binary measure
// one count of idle partitions (ScaleMain) instead of its normal modes.
// Each count is measured in a fresh process: in the bench's own, the
// goroutines of the earlier phases leave their descriptors behind (the
// runtime never frees them) and the idle runners would reuse them unseen,
// hiding part of what a partition costs, by a different amount each run.
const ScaleEnv = "KMIRROR_BENCH_SCALE"

// runScaleChild measures n idle partitions in a child process. After the
// last count the mirrored topics stay on the destination: the clusters
// close next, and deleting thousands of topics costs the in-memory broker
// minutes (it walks its whole store for each).
func (b *bench) runScaleChild(ctx context.Context, n, topicSize int, last bool) (scalePoint, error) {
	exe, err := os.Executable()
	if err != nil {
		return scalePoint{}, fmt.Errorf("find own executable: %w", err)
	}
	o := b.opts
	source := b.src.addrs
	if o.scaleLink {
		source = b.srcWAN
	}
	args := []string{
		"--source", strings.Join(source, ","), "--destination", strings.Join(b.dst.addrs, ","),
		"--partitions", strconv.Itoa(n), "--topic-size", strconv.Itoa(topicSize), "--topic-prefix", b.data.topic,
		"--settle", o.settle.String(), "--timeout", o.scaleTimeout.String(), "--profile", o.profileDir,
		"--max-inflight", strconv.Itoa(o.maxInFlight), "--num-fetchers", strconv.Itoa(o.numFetchers),
		"--fetch-max-wait", o.fetchMaxWait.String(), "--partition-fetch-bytes", strconv.Itoa(int(o.partitionFetchBytes)),
		"--keep-topics=" + strconv.FormatBool(last),
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), ScaleEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	sampled := b.sampleBrokerCPU(ctx)
	err = cmd.Run()
	samples := sampled()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return scalePoint{}, fmt.Errorf("measuring process: %w: %s", err, msg)
	}
	var pt scalePoint
	if err := json.Unmarshal(stdout.Bytes(), &pt); err != nil {
		return scalePoint{}, fmt.Errorf("measuring process: unreadable result %q: %w", stdout.String(), err)
	}
	pt.StartSrcBrokerCPUS = samples.between(pt.StartAt, pt.StartedAt, func(c cpuSample) time.Duration { return c.src })
	pt.StartDstBrokerCPUS = samples.between(pt.StartAt, pt.StartedAt, func(c cpuSample) time.Duration { return c.dst })
	pt.StopDstBrokerCPUS = samples.between(pt.StopAt, pt.StoppedAt, func(c cpuSample) time.Duration { return c.dst })
	if idle := time.Duration(pt.IdledAt - pt.IdleAt); idle > 0 {
		pt.IdleSrcBrokerCPUPercent = 100 * samples.between(pt.IdleAt, pt.IdledAt, func(c cpuSample) time.Duration { return c.src }) / idle.Seconds()
	}
	return pt, nil
}

// cpuSample is the broker processes' CPU time at a moment.
type cpuSample struct {
	at       int64 // Unix nanoseconds
	src, dst time.Duration
}

type cpuSamples []cpuSample

// sampleBrokerCPU samples the brokers' CPU time every quarter second until
// the returned function is called, which returns the samples.
func (b *bench) sampleBrokerCPU(ctx context.Context) func() cpuSamples {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		out cpuSamples
	)
	take := func(ctx context.Context) {
		src, err1 := b.src.cpu(ctx)
		dst, err2 := b.dst.cpu(ctx)
		if err1 == nil && err2 == nil {
			out = append(out, cpuSample{at: time.Now().UnixNano(), src: src, dst: dst})
		}
	}
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			take(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() cpuSamples {
		cancel()
		wg.Wait()
		take(context.WithoutCancel(ctx))
		return out
	}
}

// between is the CPU time of one process (of) from from to to, Unix
// nanoseconds, interpolated between the samples around them; 0 without
// samples on both sides.
func (cs cpuSamples) between(from, to int64, of func(cpuSample) time.Duration) float64 {
	at := func(t int64) (time.Duration, bool) {
		for i := 1; i < len(cs); i++ {
			a, b := cs[i-1], cs[i]
			if t >= a.at && t <= b.at {
				if b.at == a.at {
					return of(a), true
				}
				f := float64(t-a.at) / float64(b.at-a.at)
				return of(a) + time.Duration(f*float64(of(b)-of(a))), true
			}
		}
		return 0, false
	}
	a, ok1 := at(from)
	b, ok2 := at(to)
	if !ok1 || !ok2 || to <= from {
		return 0
	}
	return (b - a).Seconds()
}

// ScaleMain measures one count of idle partitions (see ScaleEnv) and
// prints its scalePoint as JSON. It returns the process exit code.
func ScaleMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return scaleMain(ctx, args, os.Stdout, os.Stderr)
}

// finePartitionSampling is the heap sampling rate of the idle partitions'
// profile: a sample every 512 bytes allocated.
const finePartitionSampling = 512

func scaleMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror bench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := defaultOptions()
	src := fs.String("source", "", "source bootstrap servers, comma-separated")
	dst := fs.String("destination", "", "destination bootstrap servers, comma-separated")
	n := fs.Int("partitions", 1000, "idle partitions")
	topicSize := fs.Int("topic-size", 100, "partitions per topic")
	prefix := fs.String("topic-prefix", "bench-data", "the data set topic the idle topics are named after")
	fs.DurationVar(&o.settle, "settle", o.settle, "idle time before the heap is read")
	fs.DurationVar(&o.scaleTimeout, "timeout", o.scaleTimeout, "bound of the start and of the stop")
	fs.StringVar(&o.profileDir, "profile", "", "profile directory")
	fs.IntVar(&o.maxInFlight, "max-inflight", 0, "engine batches in flight per partition")
	fs.IntVar(&o.numFetchers, "num-fetchers", 0, "engine fetchers per source broker")
	fs.DurationVar(&o.fetchMaxWait, "fetch-max-wait", 0, "engine fetch long-poll time")
	fetchBytes := fs.Int("partition-fetch-bytes", 0, "engine bytes per partition per fetch")
	keep := fs.Bool("keep-topics", false, "leave the mirrored topics on the destination")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *src == "" || *dst == "" || *n < 1 || *topicSize < 1 || *n%*topicSize != 0 {
		fmt.Fprintln(stderr, "kmirror bench scale: --source, --destination and --partitions (a multiple of --topic-size) are required")
		return exitUsage
	}
	o.partitionFetchBytes = int32(*fetchBytes)
	o.progress = stderr
	if o.profileDir != "" {
		// A heap profile of a few MB needs a finer sampling rate than
		// the default 512 KiB to show per-partition structures.
		runtime.MemProfileRate = finePartitionSampling
	}
	b := &bench{opts: o, src: &clusterProc{addrs: strings.Split(*src, ",")}, dst: &clusterProc{addrs: strings.Split(*dst, ",")}}
	b.data.topic = *prefix
	var err error
	if b.dstCl, err = newClient(b.dst.addrs); err != nil {
		fmt.Fprintf(stderr, "kmirror bench scale: %v\n", err)
		return exitFail
	}
	defer b.dstCl.Close()
	pt, err := b.scalePoint(ctx, *n, *topicSize, *keep)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench scale: %v\n", err)
		return exitFail
	}
	if err := json.NewEncoder(stdout).Encode(pt); err != nil {
		fmt.Fprintf(stderr, "kmirror bench scale: %v\n", err)
		return exitFail
	}
	return exitOK
}

// fillIdleTopics creates the idle topics with one record per partition.
// Its producer is closed before anything is measured: a franz-go producer
// keeps per-partition buffers that would count as the engine's heap.
func (b *bench) fillIdleTopics(ctx context.Context, ntopics, topicSize int) error {
	prod, err := newClient(b.src.addrs, kgo.ProducerBatchCompression(b.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := range ntopics {
		if _, err := createTopic(ctx, prod, b.idleTopic(i), int32(topicSize), nil); err != nil {
			return err
		}
		for p := range topicSize {
			recs = append(recs, &kgo.Record{Topic: b.idleTopic(i), Partition: int32(p), Value: []byte(`{"idle":true}`)})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce to idle topics: %w", err)
	}
	return nil
}

// scalePoint measures n idle partitions; unless keep, it deletes their
// mirrored topics on the destination afterwards.
func (b *bench) scalePoint(ctx context.Context, n, topicSize int, keep bool) (scalePoint, error) {
	pt := scalePoint{Partitions: n, Topics: n / topicSize}
	topics := make([]string, pt.Topics)
	for i := range topics {
		topics[i] = b.idleTopic(i)
	}
	if !keep {
		defer func() { _ = deleteTopics(context.WithoutCancel(ctx), b.dstCl, topics...) }()
	}
	eng, err := engine.New(ctx, engine.Config{Destination: b.dst.addrs, Instance: "bench-scale"})
	if err != nil {
		return pt, fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close()
	// Events are read, as the console and the headless log read them: an
	// unread queue would count up to its limit of events as heap.
	stopReading := readEvents(eng)
	defer stopReading()
	before, err := liveMemory(ctx)
	if err != nil {
		return pt, err
	}
	goroutines := runtime.NumGoroutine()
	name := fmt.Sprintf("idle-%d", n)
	stopStartProfile, err := b.startCPUProfile(fmt.Sprintf("start-%d.cpu.pprof", n), false)
	if err != nil {
		return pt, err
	}
	startCPU, err := processCPU()
	if err != nil {
		return pt, err
	}
	start := time.Now()
	pt.StartAt = start.UnixNano()
	if err := eng.StartMirror(ctx, b.mirrorConfig(name, b.src.addrs, topics...)); err != nil {
		stopStartProfile()
		return pt, err
	}
	// A snapshot of thousands of partitions costs this process several
	// milliseconds (measured: ~5ms at 10k); polling less often as the
	// count grows keeps that a few percent of what is measured.
	every := max(10*time.Millisecond, time.Duration(n)*20*time.Microsecond)
	err = pollSnapshot(ctx, eng, every, b.opts.scaleTimeout, func(ps []engine.PartitionSnapshot) (bool, error) {
		done := 0
		for _, p := range ps {
			if p.State == partition.Failed && !p.Retryable {
				return false, fmt.Errorf("%w: %s/%d: %s", errPartitionFailed, p.Topic, p.Partition, p.Error)
			}
			if p.State == partition.Mirroring && p.DestLogEnd == 1 {
				done++
			}
		}
		return done == n, nil
	})
	pt.StartS = time.Since(start).Seconds()
	pt.StartedAt = time.Now().UnixNano()
	if c, cerr := processCPU(); cerr == nil {
		pt.StartCPUS = (c - startCPU).Seconds()
	}
	stopStartProfile()
	if err != nil {
		return pt, fmt.Errorf("start: %w", err)
	}

	// Idle: nothing to copy, the fetchers long-poll and the destination
	// check ticks. Let the start-up garbage go, then measure. The fine
	// heap sampling the profile of the partitions' structures needs
	// would cost the idle loop more than it costs itself (a stack walk
	// every few allocations): it is suspended until the heap profile is
	// written, which therefore shows what the start allocated, and what
	// the idle loop allocates sampled a thousand times less.
	if b.opts.profileDir != "" {
		runtime.MemProfileRate = 512 << 10
	}
	cpu0, err := processCPU()
	if err != nil {
		return pt, err
	}
	stopIdleProfile, err := b.startCPUProfile(fmt.Sprintf("idle-%d.cpu.pprof", n), false)
	if err != nil {
		return pt, err
	}
	t0 := time.Now()
	pt.IdleAt = t0.UnixNano()
	err = backoff.Sleep(ctx, b.opts.settle)
	pt.IdledAt = time.Now().UnixNano()
	stopIdleProfile()
	if err != nil {
		return pt, err
	}
	cpu1, err := processCPU()
	if err != nil {
		return pt, err
	}
	pt.IdleCPUPercent = 100 * (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds()
	after, err := liveMemory(ctx)
	if err != nil {
		return pt, err
	}
	pt.Goroutines = runtime.NumGoroutine() - goroutines
	pt.HeapBytes = int64(after.heap) - int64(before.heap)
	pt.StackBytes = int64(after.stack) - int64(before.stack)
	pt.HeapPerPartition = float64(pt.HeapBytes) / float64(n)
	pt.StackPerPartition = float64(pt.StackBytes) / float64(n)
	if b.opts.profileDir != "" {
		runtime.MemProfileRate = finePartitionSampling
	}
	if err := b.writeHeapProfile(fmt.Sprintf("idle-%d.heap.pprof", n)); err != nil {
		return pt, err
	}

	stopProfile, err := b.startCPUProfile(fmt.Sprintf("stop-%d.cpu.pprof", n), false)
	if err != nil {
		return pt, err
	}
	stopCPU, err := processCPU()
	if err != nil {
		return pt, err
	}
	start = time.Now()
	pt.StopAt = start.UnixNano()
	err = eng.Control(ctx, engine.Command{Kind: engine.CmdStop, Mirror: name})
	if err == nil {
		err = pollSnapshot(ctx, eng, every, b.opts.scaleTimeout, func(ps []engine.PartitionSnapshot) (bool, error) {
			stopped := 0
			for _, p := range ps {
				if p.State == partition.Stopped {
					stopped++
				}
			}
			return stopped == n, nil
		})
	}
	pt.StopS = time.Since(start).Seconds()
	pt.StoppedAt = time.Now().UnixNano()
	if c, cerr := processCPU(); cerr == nil {
		pt.StopCPUS = (c - stopCPU).Seconds()
	}
	stopProfile()
	if err != nil {
		if ctx.Err() != nil {
			return pt, fmt.Errorf("stop: %w", err)
		}
		// The start and the idle figures stand: only the stop's goal
		// has no value (its time is how long it was waited for).
		pt.StopError = err.Error()
	}
	return pt, nil
}

// readEvents discards the engine's events until the returned function is
// called.
func readEvents(eng *engine.Engine) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-eng.Events():
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// memory is the live heap and the goroutine stacks in use.
type memory struct{ heap, stack uint64 }

// liveMemory returns the smallest of five after-GC readings a tenth of a
// second apart: what the idle partitions keep, without the garbage
// allocated between a GC and its reading by still-running goroutines, or
// the answer to a long-poll (one entry per partition it asked for) that
// one reading may catch being decoded. A tenth of a second is the engine's
// default long-poll time, so the readings fall at different points of the
// fetchers' cycle. The requests themselves are in flight at every reading
// and are counted. It ends early with ctx's cause.
func liveMemory(ctx context.Context) (memory, error) {
	var best memory
	for i := range 5 {
		if i > 0 {
			if err := backoff.Sleep(ctx, 100*time.Millisecond); err != nil {
				return best, err
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if i == 0 || ms.HeapAlloc < best.heap {
			best.heap = ms.HeapAlloc
		}
		if i == 0 || ms.StackInuse < best.stack {
			best.stack = ms.StackInuse
		}
	}
	return best, nil
}
