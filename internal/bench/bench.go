// Package bench is "kmirror bench": it measures the engine's data path
// against what a copy cannot beat (reading the source), against a minimal
// raw batch copy without the engine's safety, and against the
// decompress-and-recompress mirror kmirror replaces; and it measures the
// replication lag the engine adds, how fast it stops many partitions, and
// what an idle partition costs in memory.
//
// The source and destination clusters run in child processes (the running
// binary re-executed with ClusterEnv set), so broker CPU is never counted as
// the engine's, and the destination's CPU per GB can be reported apart.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

// Exit codes, as for every kmirror mode.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// options are what one bench run measures and how.
type options struct {
	size        int64 // compressed bytes of the data set's batches (what a mirror moves)
	partitions  int32
	codec       string
	repeats     int
	quick       bool
	json        bool
	brokers     int
	profileDir  string
	profileCopy bool // with profileDir, the copy phases' first runs are profiled too
	recordSize  int
	maxInFlight int
	numFetchers int

	fetchMaxWait        time.Duration // 0: the engine's default
	partitionFetchBytes int32         // 0: the engine's default

	// The link model (linkproxy): the WAN phases fetch from the source
	// through an added round trip (and bandwidth cap), the replicated
	// destination phase appends through a Produce answer delay with one
	// request at a time per connection. A zero rtt (with no bandwidth)
	// or produceLatency leaves its phases out.
	rtt            time.Duration
	bandwidth      int64 // bytes per second each way, 0: no cap
	produceLatency time.Duration

	measure    map[string]bool // which measures run: measureCopy, measureLag, measureScale
	onlyPhases []string        // the copy phases to run (--phases), nil: all the options call for

	scale        []int         // partition counts for the idle heap and stop measures
	scaleTopic   int           // partitions per topic at scale
	scaleLink    bool          // the idle partitions' source is behind the WAN link (--scale-across-link)
	lagDuration  time.Duration // measured part of the lag run
	lagWarmup    time.Duration
	settle       time.Duration // idle time before the heap is read
	phaseTimeout time.Duration
	scaleTimeout time.Duration
	progress     io.Writer
	logFlags     logging.Flags
	log          *slog.Logger // the engines' log (nil: none)
}

// The measures a run can be limited to (--measure).
const (
	measureCopy  = "copy"
	measureLag   = "lag"
	measureScale = "scale"
)

func defaultOptions() options {
	return options{
		measure: map[string]bool{measureCopy: true, measureLag: true, measureScale: true},
		size:    1e9, partitions: 8, codec: "zstd", repeats: 3, brokers: 3, recordSize: 1024,
		scale: []int{1000, 10_000, 100_000}, scaleTopic: 100,
		rtt: 50 * time.Millisecond, produceLatency: 2 * time.Millisecond,
		lagDuration: 15 * time.Second, lagWarmup: 3 * time.Second, settle: 3 * time.Second,
		phaseTimeout: 10 * time.Minute, scaleTimeout: 10 * time.Minute, profileCopy: true,
	}
}

// applyQuick sets what --quick implies: a data set small enough, one repeat and the
// 1k- and 10k-partition scale only, to finish in about two minutes on two cores.
func (o *options) applyQuick() {
	o.size, o.repeats, o.scale = 200e6, 1, []int{1000, 10_000}
	o.lagDuration, o.lagWarmup, o.settle = 6*time.Second, 2*time.Second, 2*time.Second
}

const usageText = `Usage: kmirror bench [--size 1GB] [--partitions 8] [--codec zstd] [--repeats 3] [--quick] [--json]

--size is the data set as stored on the source: compressed batches, the bytes
every phase moves and every MB/s counts.

Measures kmirror's engine against a raw fetch (the reading ceiling), a minimal
raw batch copy (the reference) and a decompress-and-recompress mirror (the
MirrorMaker-like baseline), on two in-memory clusters run as child processes.
The engine and the naive mirror also copy from a source behind an added round
trip (--rtt, a WAN link), and the engine to a destination that answers each
Produce late and one request per connection at a time (--produce-latency, a
replicating broker); loopback proxies model both. Also measures the
replication lag added at half and a tenth of the engine's rate (and the
reference copy's at a tenth), and idle mirrored partitions by the thousand:
start, idle CPU, heap per partition, stop.
`

// parseArgs turns the command line into options.
func parseArgs(args []string, stdout io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("kmirror bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported on one line by Main
	size := fs.String("size", "1GB", "size of the data set as stored: compressed batches, what a mirror moves (KB, MB, GB; KiB, MiB, GiB)")
	parts := fs.Int("partitions", int(o.partitions), "partitions of the data set topic")
	fs.StringVar(&o.codec, "codec", o.codec, "compression codec of the data set: none, gzip, snappy, lz4, zstd")
	fs.IntVar(&o.repeats, "repeats", o.repeats, "how many times each copy phase runs (interleaved)")
	fs.BoolVar(&o.quick, "quick", false, "about 200MB, one repeat, 1k-partition scale only")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	fs.IntVar(&o.brokers, "brokers", o.brokers, "brokers per cluster")
	fs.StringVar(&o.profileDir, "profile", "", "write CPU and heap profiles of each phase's first run (and of the idle partitions) into this directory; profiling adds to the idle CPU measured")
	fs.BoolVar(&o.profileCopy, "profile-copy", o.profileCopy, "with --profile, profile the copy phases' first runs too (false: only the idle partitions and the brokers; an execution trace slows the run it records)")
	fs.IntVar(&o.maxInFlight, "max-inflight", 0, "engine batches in flight per partition (0: engine default)")
	fs.IntVar(&o.numFetchers, "num-fetchers", 0, "engine fetchers per source broker (0: engine default)")
	fs.DurationVar(&o.fetchMaxWait, "fetch-max-wait", 0, "engine fetch long-poll time (0: engine default)")
	fetchBytes := fs.String("partition-fetch-bytes", "0", "engine bytes per partition per fetch (0: engine default)")
	scaleTopic := fs.Int("scale-topic-partitions", o.scaleTopic, "partitions per topic in the 1k/10k-partition measures")
	fs.BoolVar(&o.scaleLink, "scale-across-link", false, "measure the idle partition counts with the source behind the WAN link (--rtt, --bandwidth): a start's round trips to a far source")
	fs.DurationVar(&o.scaleTimeout, "scale-timeout", o.scaleTimeout, "bound of the start and of the stop of each idle partition count")
	scale := fs.String("scale", "", "idle partition counts to measure, comma-separated (default 1000,10000,100000; 1000,10000 with --quick)")
	fs.DurationVar(&o.rtt, "rtt", o.rtt, "round trip added to the source in the WAN phases (0: no such phases unless --bandwidth)")
	bandwidth := fs.String("bandwidth", "0", "bandwidth cap of the source link in the WAN phases, bytes per second each way (e.g. 100MB; 0: none)")
	phases := fs.String("phases", "", "copy phases to run, comma-separated (default: all; raw_fetch, raw_produce, reference, naive, engine, raw_fetch_rtt, naive_rtt, engine_rtt, raw_produce_latency, engine_produce_latency)")
	measure := fs.String("measure", "copy,lag,scale", "which measures run, comma-separated: copy (the copy phases), lag (needs copy), scale (idle partitions)")
	fs.DurationVar(&o.produceLatency, "produce-latency", o.produceLatency, "delay of each destination Produce answer, one request per connection at a time, in the replicated-destination phase (0: no such phase)")
	o.logFlags.Register(fs, "warn", "text")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText+"\nFlags:\n")
			fs.VisitAll(func(f *flag.Flag) { // --flag style, as every kmirror help
				name, usage := flag.UnquoteUsage(f)
				if name != "" {
					name = " " + name
				}
				if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
					usage += " (default " + f.DefValue + ")"
				}
				fmt.Fprintf(stdout, "  --%s%s\n        %s\n", f.Name, name, usage)
			})
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	n, err := parseSize(*size)
	if err != nil {
		return o, fmt.Errorf("--size: %w", err)
	}
	o.size = n
	if o.quick {
		// Flags given explicitly win over what --quick implies.
		repeats := o.repeats
		o.applyQuick()
		if set["size"] {
			o.size = n
		}
		if set["repeats"] {
			o.repeats = repeats
		}
	}
	if *fetchBytes != "0" {
		n, err := parseSize(*fetchBytes)
		if err != nil || n > 1<<30 {
			return o, fmt.Errorf("--partition-fetch-bytes: invalid size %q", *fetchBytes)
		}
		o.partitionFetchBytes = int32(n)
	}
	o.measure = map[string]bool{}
	for m := range strings.SplitSeq(*measure, ",") {
		m = strings.TrimSpace(m)
		if m != measureCopy && m != measureLag && m != measureScale {
			return o, fmt.Errorf("--measure: unknown measure %q (want copy, lag, scale)", m)
		}
		o.measure[m] = true
	}
	if *phases != "" {
		for ph := range strings.SplitSeq(*phases, ",") {
			ph = strings.TrimSpace(ph)
			if !slices.Contains(phaseNames, ph) {
				return o, fmt.Errorf("--phases: unknown phase %q", ph)
			}
			o.onlyPhases = append(o.onlyPhases, ph)
		}
		if o.measure[measureLag] && !slices.Contains(o.onlyPhases, phaseEngine) {
			return o, fmt.Errorf("--phases without engine: the lag measure needs the engine's rate (add --measure copy,scale)")
		}
	}
	if o.measure[measureLag] && !o.measure[measureCopy] {
		return o, fmt.Errorf("--measure lag needs copy: the load is a fraction of the engine's copy rate")
	}
	if *bandwidth != "0" {
		n, err := parseSize(*bandwidth)
		if err != nil {
			return o, fmt.Errorf("--bandwidth: %w", err)
		}
		o.bandwidth = n
	}
	if o.rtt < 0 || o.produceLatency < 0 {
		return o, fmt.Errorf("--rtt and --produce-latency must not be negative, got %s and %s", o.rtt, o.produceLatency)
	}
	if o.scaleLink && !o.wan() {
		return o, errors.New("--scale-across-link needs a link: --rtt or --bandwidth above 0")
	}
	if o.scaleTimeout <= 0 {
		return o, fmt.Errorf("--scale-timeout must be positive, got %s", o.scaleTimeout)
	}
	if o.fetchMaxWait < 0 {
		return o, fmt.Errorf("--fetch-max-wait must not be negative, got %s", o.fetchMaxWait)
	}
	if *scaleTopic < 1 || 1000%*scaleTopic != 0 {
		return o, fmt.Errorf("--scale-topic-partitions must divide 1000, got %d", *scaleTopic)
	}
	o.scaleTopic = *scaleTopic
	if *scale != "" {
		counts, err := parseScale(*scale, o.scaleTopic)
		if err != nil {
			return o, fmt.Errorf("--scale: %w", err)
		}
		o.scale = counts
	}
	if o.repeats < 1 {
		return o, fmt.Errorf("--repeats must be at least 1, got %d", o.repeats)
	}
	if *parts < 1 || *parts > 10_000 {
		return o, fmt.Errorf("--partitions must be between 1 and 10000, got %d", *parts)
	}
	o.partitions = int32(*parts)
	if _, ok := codecs[o.codec]; !ok {
		return o, fmt.Errorf("--codec %q: want none, gzip, snappy, lz4 or zstd", o.codec)
	}
	if o.brokers < 1 {
		return o, fmt.Errorf("--brokers must be at least 1, got %d", o.brokers)
	}
	if o.maxInFlight < 0 || o.maxInFlight > 5 {
		return o, fmt.Errorf("--max-inflight must be between 0 and 5, got %d", o.maxInFlight)
	}
	if o.numFetchers < 0 {
		return o, fmt.Errorf("--num-fetchers must not be negative, got %d", o.numFetchers)
	}
	if o.size < int64(o.recordSize)*int64(o.partitions) {
		return o, fmt.Errorf("--size %s is smaller than one %d-byte record per partition", *size, o.recordSize)
	}
	return o, nil
}

// parseSize reads sizes like 1GB, 200MB, 512KiB or a plain byte count.
// KB, MB, GB are decimal, like the MB/s of the report.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := map[string]float64{
		"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || v <= 0 || v*mult > 1<<50 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1GB, 200MB, 512MiB)", s)
	}
	return int64(v * mult), nil
}

// maxScale bounds one idle-partition count: each partition is a goroutine
// and a few KiB in this process and in the brokers'.
const maxScale = 100_000

// parseScale reads the idle partition counts, "1000,10000": each a
// multiple of the partitions per topic, in increasing order.
func parseScale(s string, perTopic int) ([]int, error) {
	var counts []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil || n < 1 || n > maxScale:
			return nil, fmt.Errorf("invalid partition count %q (want 1 to %d)", f, maxScale)
		case n%perTopic != 0:
			return nil, fmt.Errorf("partition count %d is not a multiple of --scale-topic-partitions %d", n, perTopic)
		case len(counts) > 0 && n <= counts[len(counts)-1]:
			return nil, fmt.Errorf("partition counts must increase, got %d after %d", n, counts[len(counts)-1])
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// Main runs "kmirror bench" with args (after the mode name) and returns
// the exit code: 0 ok, 1 a measurement failed, 2 usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench: %v\n", err)
		return exitUsage
	}
	o.progress = stderr
	// The engines measured log to stderr, quietly by default: a log line
	// costs what the measures count.
	if o.log, err = o.logFlags.New(stderr); err != nil {
		fmt.Fprintf(stderr, "kmirror bench: %v\n", err)
		return exitUsage
	}
	return execute(ctx, o, stdout, stderr)
}

// execute runs the bench with parsed options and writes the report.
func execute(ctx context.Context, o options, stdout, stderr io.Writer) int {
	rep, err := runBench(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench: %v\n", err)
		return exitFail
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // goals read ">= 0.9x", not "\u003e= 0.9x"
		err = enc.Encode(rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench: write report: %v\n", err)
		return exitFail
	}
	return exitOK
}

// bench holds what every measurement of one run shares.
type bench struct {
	opts         options
	codec        kgo.CompressionCodec
	src, dst     *clusterProc
	srcCl, dstCl *kgo.Client
	data         dataset

	// Bootstrap addresses behind the link proxies: the source across a
	// WAN, the destination replicating; nil when not modelled.
	srcWAN, dstReplicated []string
}

// wan reports whether the run has WAN phases.
func (o options) wan() bool { return o.rtt > 0 || o.bandwidth > 0 }

// brokerProfile is the file of a cluster's CPU profile, with --profile.
func (b *bench) brokerProfile(side string) string {
	if b.opts.profileDir == "" {
		return ""
	}
	return filepath.Join(b.opts.profileDir, side+"-brokers.cpu.pprof")
}

// startClusters starts the source and destination clusters and their
// clients, first closing any it started before.
func (b *bench) startClusters(ctx context.Context) error {
	b.closeClusters()
	var err error
	if b.src, err = startCluster(ctx, "kmirror-bench-source", b.opts.brokers, b.brokerProfile("source"), b.opts.progress); err != nil {
		return err
	}
	if b.dst, err = startCluster(ctx, "kmirror-bench-destination", b.opts.brokers, b.brokerProfile("destination"), b.opts.progress); err != nil {
		return err
	}
	if b.opts.wan() {
		if b.srcWAN, err = b.src.link(ctx, linkproxy.Options{RTT: b.opts.rtt, Bandwidth: b.opts.bandwidth}); err != nil {
			return err
		}
	}
	if b.opts.produceLatency > 0 {
		if b.dstReplicated, err = b.dst.link(ctx, linkproxy.Options{ProduceLatency: b.opts.produceLatency}); err != nil {
			return err
		}
	}
	if b.srcCl, err = newClient(b.src.addrs); err != nil {
		return err
	}
	b.dstCl, err = newClient(b.dst.addrs)
	return err
}

// closeClusters closes whatever startClusters started.
func (b *bench) closeClusters() {
	for _, cl := range []*kgo.Client{b.srcCl, b.dstCl} {
		if cl != nil {
			cl.Close()
		}
	}
	for _, p := range []*clusterProc{b.src, b.dst} {
		if p != nil {
			p.close()
		}
	}
	b.src, b.dst, b.srcCl, b.dstCl, b.srcWAN, b.dstReplicated = nil, nil, nil, nil, nil, nil
}

func (b *bench) progress(format string, args ...any) {
	if b.opts.progress != nil {
		fmt.Fprintf(b.opts.progress, "bench: "+format+"\n", args...)
	}
}

// runBench starts the clusters, produces the data set and runs every
// measurement.
func runBench(ctx context.Context, o options) (*report, error) {
	began, load := time.Now(), loadAvg()
	b := &bench{opts: o, codec: codecs[o.codec]}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return nil, fmt.Errorf("profile directory: %w", err)
		}
	}
	defer b.closeClusters()
	if err := b.startClusters(ctx); err != nil {
		return nil, err
	}
	var err error
	if !o.measure[measureCopy] {
		b.data.topic = "bench-data"
		rep := b.newReport(nil)
		return b.finishReport(ctx, rep, began, load)
	}
	b.progress("producing %s of %s-compressed %d-byte records to %d partitions", humanBytes(o.size), o.codec, o.recordSize, o.partitions)
	if b.data, err = produceDataset(ctx, b.srcCl, "bench-data", o.partitions, b.codec, o.size, o.recordSize); err != nil {
		return nil, err
	}
	if b.data.wireBytes, b.data.batches, err = readAll(ctx, b.srcCl, b.data, nil); err != nil {
		return nil, fmt.Errorf("scan data set: %w", err)
	}
	b.progress("data set: %d records, %s on the wire in %d batches (%.2fx compression), produced in %.1fs",
		b.data.records, humanBytes(b.data.wireBytes), b.data.batches, float64(b.data.recordBytes)/float64(b.data.wireBytes), b.data.produceTime.Seconds())

	samples := map[string][]sample{}
	for r := range o.repeats {
		// Interleave: each repeat starts with the next phase, so drift
		// (heap growth, broker state) does not always hit the same one.
		names := o.phases()
		for i := range names {
			name := names[(i+r)%len(names)]
			s, err := b.runPhase(ctx, name, r+1)
			if err != nil {
				return nil, fmt.Errorf("phase %s, repeat %d: %w", name, r+1, err)
			}
			b.progress("%-9s repeat %d: %7.1f MB/s, %6.2f CPU-s/GB, %5.2f B alloc/B, destination broker %6.2f CPU-s/GB",
				name, r+1, s.mbPerS(b.data.wireBytes), s.cpuPerGB(b.data.wireBytes), s.allocPerByte(b.data.wireBytes), s.dstCPUPerGB(b.data.wireBytes))
			samples[name] = append(samples[name], s)
		}
	}
	rep := b.newReport(samples)

	// The engine's lag at half its rate and at a tenth, and the
	// reference copy's at the same tenth: the goal compares the two at
	// a tenth, where neither saturates the machine; half shows what a
	// busy machine does to it.
	// Each runs on fresh clusters: the copy phases leave gigabytes of
	// deleted topics in the in-memory brokers' heaps, and the garbage
	// collection that frees them (measured: 3.8 GB → 0.4 GB) stalls
	// every broker of the machine for tens of milliseconds, a pause no
	// real broker has and no mirror can hide.
	lagRuns := []struct {
		copier string
		frac   float64
	}{{lagEngine, 0.5}, {lagEngine, 0.1}, {lagReference, 0.1}}
	if !o.measure[measureLag] {
		lagRuns = nil
	}
	lags := make([]lagResult, 3)
	for i, lr := range lagRuns {
		if err := b.startClusters(ctx); err != nil {
			return nil, fmt.Errorf("fresh clusters for the lag measure: %w", err)
		}
		target := rep.Phases[phaseEngine].MBPerS * 1e6 * lr.frac
		b.progress("lag: %s, paced load at %.1f MB/s (%.0f%% of the engine's rate) for %s", lr.copier, target/1e6, lr.frac*100, o.lagDuration)
		if lags[i], err = b.measureLag(ctx, fmt.Sprintf("lag%d", i), lr.copier, target); err != nil {
			return nil, fmt.Errorf("%s lag at %.0f%% load: %w", lr.copier, lr.frac*100, err)
		}
		l := lags[i]
		b.progress("lag: %s: %.1f MB/s achieved: added p50 %.2f ms, p99 %.2f ms; source reader p99 %.2f ms",
			lr.copier, l.AchievedMBPerS, l.P50AddedMs, l.P99AddedMs, l.SourceP99Ms)
	}
	rep.setLag(lags[0], lags[1], lags[2])
	return b.finishReport(ctx, rep, began, load)
}

// finishReport measures the idle partitions (if asked) and completes rep.
func (b *bench) finishReport(ctx context.Context, rep *report, began time.Time, load string) (*report, error) {
	o := b.opts
	if o.measure[measureScale] {
		pts, err := b.measureScale(ctx, o.scale, min(o.scaleTopic, slicesMin(o.scale)))
		rep.setScale(pts)
		if err != nil {
			// What was measured is reported; the largest count's
			// goals are missed, the error names the count that failed.
			if ctx.Err() != nil {
				return nil, fmt.Errorf("scale: %w", err)
			}
			b.progress("scale: %v", err)
			rep.ScaleError = err.Error()
			rep.ScaleFailed = slices.Max(o.scale)
		}
	}
	rep.ElapsedS = time.Since(began).Seconds()
	rep.Config.LoadAvgStart, rep.Config.LoadAvgEnd = load, loadAvg()
	rep.setGoals()
	return rep, nil
}

func slicesMin(xs []int) int {
	if len(xs) == 0 {
		return 1
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// sample is one measured phase run.
type sample struct {
	elapsed        time.Duration
	startup        time.Duration // of elapsed, until the first batch was appended; 0 when not measured
	cpu            time.Duration // this process
	alloc          uint64        // bytes allocated by this process
	srcCPU, dstCPU time.Duration // the broker processes
}

func (s sample) mbPerS(wire int64) float64 { return float64(wire) / s.elapsed.Seconds() / 1e6 }

// copyMBPerS is the rate once copying began: after the start-up.
func (s sample) copyMBPerS(wire int64) float64 {
	return float64(wire) / (s.elapsed - s.startup).Seconds() / 1e6
}
func (s sample) cpuPerGB(wire int64) float64 {
	return s.cpu.Seconds() / (float64(wire) / 1e9)
}
func (s sample) allocPerByte(wire int64) float64 { return float64(s.alloc) / float64(wire) }
func (s sample) dstCPUPerGB(wire int64) float64 {
	return s.dstCPU.Seconds() / (float64(wire) / 1e9)
}
func (s sample) srcCPUPerGB(wire int64) float64 {
	return s.srcCPU.Seconds() / (float64(wire) / 1e9)
}

// runPhase prepares, measures and verifies one run of a phase.
func (b *bench) runPhase(ctx context.Context, name string, repeat int) (sample, error) {
	r, err := b.prepare(ctx, name, repeat)
	if err != nil {
		return sample{}, err
	}
	s, err := b.measure(ctx, name, repeat, r.work)
	if r.startup != nil {
		s.startup = r.startup()
	}
	if ferr := r.finish(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	return s, err
}

// measure runs work and takes this process's CPU time and allocations and
// the brokers' CPU time around it.
func (b *bench) measure(ctx context.Context, name string, repeat int, work func(context.Context) error) (sample, error) {
	var s sample
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	src0, err := b.src.cpu(ctx)
	if err != nil {
		return s, err
	}
	dst0, err := b.dst.cpu(ctx)
	if err != nil {
		return s, err
	}
	var stopProfile func()
	if repeat == 1 && b.opts.profileCopy {
		if stopProfile, err = b.startCPUProfile(name+".cpu.pprof", true); err != nil {
			return s, err
		}
		if err := b.writeHeapProfile(name + ".heap0.pprof"); err != nil {
			return s, err
		}
	}
	cpu0, err := processCPU()
	if err != nil {
		return s, err
	}
	t0 := time.Now()
	werr := work(ctx)
	s.elapsed = time.Since(t0)
	cpu1, err := processCPU()
	if err != nil {
		return s, err
	}
	runtime.ReadMemStats(&m1)
	if stopProfile != nil {
		stopProfile()
		if err := b.writeHeapProfile(name + ".heap1.pprof"); err != nil {
			return s, err
		}
	}
	if werr != nil {
		return s, werr
	}
	src1, err := b.src.cpu(ctx)
	if err != nil {
		return s, err
	}
	dst1, err := b.dst.cpu(ctx)
	if err != nil {
		return s, err
	}
	s.cpu, s.alloc = cpu1-cpu0, m1.TotalAlloc-m0.TotalAlloc
	s.srcCPU, s.dstCPU = src1-src0, dst1-dst0
	return s, nil
}

// startCPUProfile profiles this process into the profile directory until
// the returned function is called, with an execution trace of the same
// window when traced; without --profile it does nothing.
func (b *bench) startCPUProfile(file string, traced bool) (func(), error) {
	if b.opts.profileDir == "" {
		return func() {}, nil
	}
	stopCPU, err := startProcessProfile(filepath.Join(b.opts.profileDir, file))
	if err != nil || !traced {
		return stopCPU, err
	}
	// An execution trace shows what a latency-bound phase waits for (go
	// tool trace -pprof=sync|net|sched).
	tf, err := os.Create(filepath.Join(b.opts.profileDir, strings.TrimSuffix(file, ".cpu.pprof")+".trace"))
	if err != nil {
		stopCPU()
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := trace.Start(tf); err != nil {
		stopCPU()
		tf.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() {
		trace.Stop()
		tf.Close()
		stopCPU()
	}, nil
}

// writeHeapProfile writes the allocation profile so far; two of them
// around a phase give its allocations with pprof -base.
func (b *bench) writeHeapProfile(file string) error {
	if b.opts.profileDir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(b.opts.profileDir, file))
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("heap profile %s: %w", file, err)
	}
	return nil
}

// loadAvg returns the 1, 5 and 15 minute load averages, "" where the
// system does not publish them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// humanBytes formats a byte count in decimal units.
func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
