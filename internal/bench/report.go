package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// report is everything one bench run measured. Its JSON form is the
// machine-readable output of --json; the table is made from it too.
type report struct {
	Config configReport `json:"config"`
	Data   dataReport   `json:"data"`
	// Phases by name: raw_fetch, reference, naive, engine. Figures are
	// medians over the repeats.
	Phases map[string]phaseReport `json:"phases"`

	ThroughputRatioVsReference float64 `json:"throughput_ratio_vs_reference"`
	ThroughputRatioVsNaive     float64 `json:"throughput_ratio_vs_naive"`
	ThroughputRatioVsRawFetch  float64 `json:"throughput_ratio_vs_raw_fetch"`
	CPUPerGBRatioVsNaive       float64 `json:"cpu_per_gb_ratio_vs_naive"`
	CPUPerGBRatioVsReference   float64 `json:"cpu_per_gb_ratio_vs_reference"`
	BytesAllocPerWireByte      float64 `json:"bytes_alloc_per_wire_byte"`      // the engine's
	DestBrokerCPUSPerGB        float64 `json:"dest_broker_cpu_s_per_gb"`       // while the engine copies
	NaiveDestBrokerCPUSPerGB   float64 `json:"naive_dest_broker_cpu_s_per_gb"` // while the naive mirror copies

	// Across the link model: the engine's throughput from a source
	// behind the added round trip over its throughput without, the same
	// for the naive mirror, and the engine's to a replicating
	// destination over its own without. 0 when the phase did not run.
	//
	// The engine's ratios compare copy rates (after each run's start-up,
	// CopyMBPerS); the _with_start ones the whole runs.
	ThroughputRatioRTT50          float64 `json:"throughput_ratio_rtt50"`
	ThroughputRatioRTT50WithStart float64 `json:"throughput_ratio_rtt50_with_start"`
	NaiveThroughputRatioRTT50     float64 `json:"naive_throughput_ratio_rtt50"`
	ThroughputRatioVsNaiveRTT50   float64 `json:"throughput_ratio_vs_naive_rtt50"`
	// RawFetchRTT50Ratio is what the link leaves of the reading ceiling:
	// the streams reader across it (raw_fetch_rtt: a connection per
	// partition, one 8 MiB fetch in flight each, as the engine fetches
	// there) over the raw fetch without it. ThroughputRatioVsRawFetchRTT50
	// is the engine's copy rate across the link over that reader's.
	RawFetchRTT50Ratio             float64 `json:"raw_fetch_ratio_rtt50"`
	ThroughputRatioVsRawFetchRTT50 float64 `json:"throughput_ratio_vs_raw_fetch_rtt50"`
	// RawProduceLatencyRatio is what the replicating destination leaves of
	// the writing ceiling: the raw writer's rate to it (raw_produce_latency)
	// over its rate without (raw_produce); ThroughputRatioVsRawProduceLatency
	// the engine's copy rate to it over that writer's.
	RawProduceLatencyRatio                 float64 `json:"raw_produce_ratio_produce_latency"`
	ThroughputRatioVsRawProduceLatency     float64 `json:"throughput_ratio_vs_raw_produce_latency"`
	ThroughputRatioProduceLatency          float64 `json:"throughput_ratio_produce_latency"`
	ThroughputRatioProduceLatencyWithStart float64 `json:"throughput_ratio_produce_latency_with_start"`
	// ProduceLatencyCeilingMBPerS is what any client could append to the
	// replicating destination: a Produce carries one batch per
	// partition and a connection has one in the broker at a time, so a
	// partition gains at most one batch per produce latency.
	ProduceLatencyCeilingMBPerS float64 `json:"produce_latency_ceiling_mb_per_s"`

	LagP50AddedMs float64   `json:"lag_p50_added_ms"` // at half the engine's rate
	LagP99AddedMs float64   `json:"lag_p99_added_ms"`
	Lag           lagResult `json:"lag"`
	LagLight      lagResult `json:"lag_light"`     // the same at a tenth of the engine's rate
	LagReference  lagResult `json:"lag_reference"` // the reference copy loop's at the same tenth
	// LagP99RatioVsReference is the engine's added lag p99 at a tenth
	// of its rate over the reference copy's under the same load.
	LagP99RatioVsReference float64 `json:"lag_p99_ratio_vs_reference"`

	// Failover1000PartitionsS is the stop time at the scale point
	// closest to 1,000 partitions (FailoverPartitions says which).
	Failover1000PartitionsS float64 `json:"failover_1000_partitions_s"`
	FailoverPartitions      int     `json:"failover_partitions"`
	// HeapBytesPerPartition is the slope of the idle heap between the
	// scale points, or the heap per partition when there is one point.
	HeapBytesPerPartition  float64      `json:"heap_bytes_per_partition"`
	StackBytesPerPartition float64      `json:"stack_bytes_per_partition"`
	Scale                  []scalePoint `json:"scale"`

	// The largest count of idle partitions (100,000 in a full run;
	// ScaleMaxPartitions says which): start, idle CPU, stop, and the
	// heap and goroutines per partition as slopes from the count below
	// it.
	ScaleMaxPartitions         int     `json:"scale_max_partitions"`
	Start100kS                 float64 `json:"start_100k_s"`
	IdleCPU100kPct             float64 `json:"idle_cpu_100k_pct"`
	IdleSrcBrokerCPU100kPct    float64 `json:"idle_source_broker_cpu_100k_pct"` // context, no goal: the idle long-polls' cost to the source
	HeapBytesPerPartition100k  float64 `json:"heap_bytes_per_partition_100k"`
	GoroutinesPerPartition100k float64 `json:"goroutines_per_partition_100k"`
	Stop100kS                  float64 `json:"stop_100k_s"`
	// ScaleFailed is the largest idle partition count when a count could
	// not be measured (those after it did not run), ScaleError why, naming
	// the count; 0 and "" when all ran. The largest count's goals are then
	// missed, with the error.
	ScaleFailed int    `json:"scale_failed_partitions,omitempty"`
	ScaleError  string `json:"scale_error,omitempty"`

	Goals    []goal  `json:"goals"`
	ElapsedS float64 `json:"elapsed_s"`
}

type configReport struct {
	SizeBytes   int64  `json:"size_bytes"`
	Partitions  int32  `json:"partitions"`
	Codec       string `json:"codec"`
	Repeats     int    `json:"repeats"`
	Quick       bool   `json:"quick"`
	Brokers     int    `json:"brokers"`
	MaxInFlight int    `json:"max_inflight"` // 0: the engine's default
	NumFetchers int    `json:"num_fetchers"` // 0: the engine's default
	CPUs        int    `json:"cpus"`
	// The link model of the WAN and replicated-destination phases.
	RTTMs            float64 `json:"rtt_ms"`
	BandwidthBPerS   int64   `json:"bandwidth_bytes_per_s"`
	ProduceLatencyMs float64 `json:"produce_latency_ms"`
	// The idle partition counts were measured with the source behind
	// the WAN link.
	ScaleAcrossLink bool `json:"scale_across_link,omitempty"`
	// Load averages of the machine when the run began and ended (Linux
	// only, empty elsewhere): other work on a shared machine shows here.
	LoadAvgStart string `json:"load_avg_start,omitempty"`
	LoadAvgEnd   string `json:"load_avg_end,omitempty"`
}

type dataReport struct {
	Records          int64   `json:"records"`
	RecordBytes      int64   `json:"record_bytes"` // keys and values, uncompressed
	WireBytes        int64   `json:"wire_bytes"`   // compressed batches, what every phase moves
	Batches          int64   `json:"batches"`
	CompressionRatio float64 `json:"compression_ratio"`
	ProduceS         float64 `json:"produce_s"`
}

// phaseReport is one phase's medians and its runs. Rates are wire bytes
// of the source data set (the same for every phase) per second; CPU is
// per GB of them.
type phaseReport struct {
	MBPerS float64 `json:"mb_per_s"`
	// StartS and CopyMBPerS (engine phases): the time until the first
	// batch was appended, and the rate after it.
	StartS              float64     `json:"start_s,omitempty"`
	CopyMBPerS          float64     `json:"copy_mb_per_s,omitempty"`
	CPUSPerGB           float64     `json:"cpu_s_per_gb"`
	AllocPerWireByte    float64     `json:"alloc_bytes_per_wire_byte"`
	DestBrokerCPUSPerGB float64     `json:"dest_broker_cpu_s_per_gb"`
	SrcBrokerCPUSPerGB  float64     `json:"source_broker_cpu_s_per_gb"`
	Runs                []runReport `json:"runs"`
}

type runReport struct {
	Seconds             float64 `json:"s"`
	StartS              float64 `json:"start_s,omitempty"`
	MBPerS              float64 `json:"mb_per_s"`
	CPUSPerGB           float64 `json:"cpu_s_per_gb"`
	AllocPerWireByte    float64 `json:"alloc_bytes_per_wire_byte"`
	DestBrokerCPUSPerGB float64 `json:"dest_broker_cpu_s_per_gb"`
	SrcBrokerCPUSPerGB  float64 `json:"source_broker_cpu_s_per_gb"`
}

// goalOf is a measured goal.
func goalOf(name, target string, value float64, met bool) goal {
	return goal{Name: name, Target: target, Value: value, Met: met}
}

// goal is one target the engine is held to.
type goal struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
	Note   string  `json:"note,omitempty"` // why there is no value
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratio is a/b, 0 when b is 0 so the JSON stays finite.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0
	}
	return a / b
}

func (b *bench) newReport(samples map[string][]sample) *report {
	o, wire := b.opts, b.data.wireBytes
	r := &report{
		Config: configReport{SizeBytes: o.size, Partitions: o.partitions, Codec: o.codec, Repeats: o.repeats, Quick: o.quick,
			Brokers: o.brokers, MaxInFlight: o.maxInFlight, NumFetchers: o.numFetchers, CPUs: runtime.NumCPU(),
			RTTMs: ms(o.rtt), BandwidthBPerS: o.bandwidth, ProduceLatencyMs: ms(o.produceLatency),
			ScaleAcrossLink: o.scaleLink},
		Data: dataReport{Records: b.data.records, RecordBytes: b.data.recordBytes, WireBytes: wire, Batches: b.data.batches,
			CompressionRatio: ratio(float64(b.data.recordBytes), float64(wire)), ProduceS: b.data.produceTime.Seconds()},
		Phases: map[string]phaseReport{},
	}
	for name, ss := range samples {
		var pr phaseReport
		var mbs, cpu, alloc, dcpu, scpu, starts, copies []float64
		for _, s := range ss {
			rr := runReport{Seconds: s.elapsed.Seconds(), StartS: s.startup.Seconds(), MBPerS: s.mbPerS(wire), CPUSPerGB: s.cpuPerGB(wire),
				AllocPerWireByte: s.allocPerByte(wire), DestBrokerCPUSPerGB: s.dstCPUPerGB(wire), SrcBrokerCPUSPerGB: s.srcCPUPerGB(wire)}
			pr.Runs = append(pr.Runs, rr)
			if s.startup > 0 {
				starts, copies = append(starts, s.startup.Seconds()), append(copies, s.copyMBPerS(wire))
			}
			mbs, cpu, alloc = append(mbs, rr.MBPerS), append(cpu, rr.CPUSPerGB), append(alloc, rr.AllocPerWireByte)
			dcpu, scpu = append(dcpu, rr.DestBrokerCPUSPerGB), append(scpu, rr.SrcBrokerCPUSPerGB)
		}
		pr.MBPerS, pr.CPUSPerGB, pr.AllocPerWireByte = median(mbs), median(cpu), median(alloc)
		pr.DestBrokerCPUSPerGB, pr.SrcBrokerCPUSPerGB = median(dcpu), median(scpu)
		pr.StartS, pr.CopyMBPerS = median(starts), median(copies)
		r.Phases[name] = pr
	}
	e, ref, naive, raw := r.Phases[phaseEngine], r.Phases[phaseReference], r.Phases[phaseNaive], r.Phases[phaseRawFetch]
	r.ThroughputRatioVsReference = ratio(e.MBPerS, ref.MBPerS)
	r.ThroughputRatioVsNaive = ratio(e.MBPerS, naive.MBPerS)
	r.ThroughputRatioVsRawFetch = ratio(e.MBPerS, raw.MBPerS)
	r.CPUPerGBRatioVsNaive = ratio(e.CPUSPerGB, naive.CPUSPerGB)
	r.CPUPerGBRatioVsReference = ratio(e.CPUSPerGB, ref.CPUSPerGB)
	r.BytesAllocPerWireByte = e.AllocPerWireByte
	r.DestBrokerCPUSPerGB = e.DestBrokerCPUSPerGB
	r.NaiveDestBrokerCPUSPerGB = naive.DestBrokerCPUSPerGB
	// The link ratios compare copy rates, after each run's start-up (a
	// start across a WAN pays its dozen round trips once, whatever the
	// data); the ratios with the start-up in are reported next to them.
	rtt, pl := r.Phases[phaseEngineRTT], r.Phases[phaseEngineProduceLatency]
	r.ThroughputRatioRTT50 = ratio(rtt.CopyMBPerS, e.CopyMBPerS)
	r.ThroughputRatioRTT50WithStart = ratio(rtt.MBPerS, e.MBPerS)
	r.NaiveThroughputRatioRTT50 = ratio(r.Phases[phaseNaiveRTT].MBPerS, naive.MBPerS)
	r.ThroughputRatioVsNaiveRTT50 = ratio(rtt.MBPerS, r.Phases[phaseNaiveRTT].MBPerS)
	r.RawFetchRTT50Ratio = ratio(r.Phases[phaseRawFetchRTT].MBPerS, raw.MBPerS)
	r.ThroughputRatioVsRawFetchRTT50 = ratio(rtt.CopyMBPerS, r.Phases[phaseRawFetchRTT].MBPerS)
	r.RawProduceLatencyRatio = ratio(r.Phases[phaseRawProduceLatency].MBPerS, r.Phases[phaseRawProduce].MBPerS)
	r.ThroughputRatioVsRawProduceLatency = ratio(pl.CopyMBPerS, r.Phases[phaseRawProduceLatency].MBPerS)
	r.ThroughputRatioProduceLatency = ratio(pl.CopyMBPerS, e.CopyMBPerS)
	r.ThroughputRatioProduceLatencyWithStart = ratio(pl.MBPerS, e.MBPerS)
	if o.produceLatency > 0 && b.data.batches > 0 {
		meanBatch := float64(wire) / float64(b.data.batches)
		r.ProduceLatencyCeilingMBPerS = float64(o.partitions) * meanBatch / o.produceLatency.Seconds() / 1e6
	}
	return r
}

func (r *report) setLag(l, light, ref lagResult) {
	r.Lag, r.LagLight, r.LagReference = l, light, ref
	r.LagP50AddedMs, r.LagP99AddedMs = l.P50AddedMs, l.P99AddedMs
	r.LagP99RatioVsReference = ratio(light.P99AddedMs, ref.P99AddedMs)
}

func (r *report) setScale(pts []scalePoint) {
	r.Scale = pts
	if len(pts) == 0 {
		return
	}
	best := pts[0]
	for _, p := range pts[1:] {
		if abs(p.Partitions-1000) < abs(best.Partitions-1000) {
			best = p
		}
	}
	r.Failover1000PartitionsS, r.FailoverPartitions = best.StopS, best.Partitions
	last := pts[len(pts)-1]
	r.ScaleMaxPartitions, r.Start100kS, r.IdleCPU100kPct, r.Stop100kS = last.Partitions, last.StartS, last.IdleCPUPercent, last.StopS
	r.IdleSrcBrokerCPU100kPct = last.IdleSrcBrokerCPUPercent
	if len(pts) > 1 {
		below := pts[len(pts)-2]
		n := float64(last.Partitions - below.Partitions)
		r.HeapBytesPerPartition100k = float64(last.HeapBytes-below.HeapBytes) / n
		r.GoroutinesPerPartition100k = float64(last.Goroutines-below.Goroutines) / n
	} else {
		r.HeapBytesPerPartition100k = last.HeapPerPartition
		r.GoroutinesPerPartition100k = float64(last.Goroutines) / float64(last.Partitions)
	}
	first := pts[0]
	if last.Partitions > first.Partitions {
		n := float64(last.Partitions - first.Partitions)
		r.HeapBytesPerPartition = float64(last.HeapBytes-first.HeapBytes) / n
		r.StackBytesPerPartition = float64(last.StackBytes-first.StackBytes) / n
	} else {
		r.HeapBytesPerPartition, r.StackBytesPerPartition = first.HeapPerPartition, first.StackPerPartition
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// setGoals checks the figures against the engine's targets.
// Only what was measured has a goal line (--measure).
func (r *report) setGoals() {
	r.Goals = nil
	if r.ThroughputRatioVsReference > 0 {
		r.Goals = append(r.Goals, goalOf("throughput vs reference", ">= 0.9x", r.ThroughputRatioVsReference, r.ThroughputRatioVsReference >= 0.9))
	}
	if r.ThroughputRatioVsNaive > 0 {
		r.Goals = append(r.Goals,
			goalOf("throughput vs naive", ">= 5x", r.ThroughputRatioVsNaive, r.ThroughputRatioVsNaive >= 5),
			goalOf("CPU per GB vs naive", "<= 1/15 (0.067)", r.CPUPerGBRatioVsNaive, r.CPUPerGBRatioVsNaive > 0 && r.CPUPerGBRatioVsNaive <= 1.0/15))
	}
	if _, ok := r.Phases[phaseEngine]; ok {
		r.Goals = append(r.Goals, goalOf("bytes allocated per wire byte", "<= 1.1", r.BytesAllocPerWireByte, r.BytesAllocPerWireByte <= 1.1))
	}
	if r.ThroughputRatioRTT50 > 0 {
		r.Goals = append(r.Goals, goalOf(fmt.Sprintf("copy throughput with %.0f ms source RTT / without", r.Config.RTTMs), ">= 0.8", r.ThroughputRatioRTT50, r.ThroughputRatioRTT50 >= 0.8))
	}
	if r.ThroughputRatioProduceLatency > 0 {
		r.Goals = append(r.Goals, goalOf(fmt.Sprintf("copy throughput with %.0f ms Produce latency / without", r.Config.ProduceLatencyMs), ">= 0.8", r.ThroughputRatioProduceLatency, r.ThroughputRatioProduceLatency >= 0.8))
	}
	if r.Lag.TargetMBPerS > 0 {
		r.Goals = append(r.Goals, goalOf("added lag p99 at 10% load / reference's", "<= 2", r.LagP99RatioVsReference,
			r.LagReference.Samples > 0 && r.LagLight.Samples > 0 && r.LagP99RatioVsReference <= 2))
	}
	if n := r.ScaleFailed; n > 0 {
		// The largest count was not measured: its goals are missed,
		// saying why, rather than claimed by a smaller count.
		note := "not measured: " + r.ScaleError
		if r.FailoverPartitions > 0 {
			r.Goals = append(r.Goals, goalOf(fmt.Sprintf("stop of %d partitions (s)", r.FailoverPartitions), "<= 2", r.Failover1000PartitionsS, r.Failover1000PartitionsS <= 2))
		}
		for _, name := range []string{"start of %d idle partitions (s)", "idle CPU of %d partitions (%% of a core)", "heap per idle partition, slope to %d (bytes)", "goroutines per idle partition, slope to %d", "stop of %d partitions (s)"} {
			r.Goals = append(r.Goals, goal{Name: fmt.Sprintf(name, n), Target: "measured", Note: note})
		}
	} else if n := r.ScaleMaxPartitions; n > 0 {
		r.Goals = append(r.Goals,
			goalOf(fmt.Sprintf("stop of %d partitions (s)", r.FailoverPartitions), "<= 2", r.Failover1000PartitionsS, r.Failover1000PartitionsS <= 2),
			goalOf(fmt.Sprintf("start of %d idle partitions (s)", n), "<= 15", r.Start100kS, r.Start100kS <= 15),
			goalOf(fmt.Sprintf("idle CPU of %d partitions (%% of a core)", n), "<= 10", r.IdleCPU100kPct, r.IdleCPU100kPct <= 10),
			goalOf(fmt.Sprintf("heap per idle partition, slope to %d (bytes)", n), "<= 1024", r.HeapBytesPerPartition100k, len(r.Scale) > 1 && r.HeapBytesPerPartition100k <= 1024),
			goalOf(fmt.Sprintf("goroutines per idle partition, slope to %d", n), "<= 0.01 (O(brokers))", r.GoroutinesPerPartition100k, len(r.Scale) > 1 && r.GoroutinesPerPartition100k <= 0.01),
		)
		if last := r.Scale[len(r.Scale)-1]; last.StopError != "" {
			r.Goals = append(r.Goals, goal{Name: fmt.Sprintf("stop of %d partitions (s)", n), Target: "<= 10", Value: r.Stop100kS, Note: "not measured: " + last.StopError})
		} else {
			r.Goals = append(r.Goals, goalOf(fmt.Sprintf("stop of %d partitions (s)", n), "<= 10", r.Stop100kS, r.Stop100kS <= 10))
		}
	}
}

// writeTable prints the report for a person.
func writeTable(w io.Writer, r *report) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "kmirror bench: %d records, %s uncompressed, %s on the wire (%s, %.2fx), %d partitions, %d brokers per cluster, %d CPUs, %d repeat(s)\n\n",
		r.Data.Records, humanBytes(r.Data.RecordBytes), humanBytes(r.Data.WireBytes), r.Config.Codec, r.Data.CompressionRatio,
		r.Config.Partitions, r.Config.Brokers, r.Config.CPUs, r.Config.Repeats)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tMB/s\tCPU-s/GB\talloc B/wire B\tdest broker CPU-s/GB\tsource broker CPU-s/GB\truns (MB/s)\t")
	for _, name := range phaseNames {
		p, ok := r.Phases[name]
		if !ok {
			continue
		}
		runs := make([]string, len(p.Runs))
		for i, rr := range p.Runs {
			runs[i] = fmt.Sprintf("%.1f", rr.MBPerS)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.3f\t%.2f\t%.2f\t%s\t\n", name, p.MBPerS, p.CPUSPerGB, p.AllocPerWireByte,
			p.DestBrokerCPUSPerGB, p.SrcBrokerCPUSPerGB, strings.Join(runs, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&sb, "\nengine / reference throughput  %.2fx\n", r.ThroughputRatioVsReference)
	fmt.Fprintf(&sb, "engine / naive throughput      %.2fx\n", r.ThroughputRatioVsNaive)
	fmt.Fprintf(&sb, "engine / raw fetch throughput  %.2fx\n", r.ThroughputRatioVsRawFetch)
	fmt.Fprintf(&sb, "engine / naive CPU per GB      %.3f (1/%.1f)\n", r.CPUPerGBRatioVsNaive, ratio(1, r.CPUPerGBRatioVsNaive))
	fmt.Fprintf(&sb, "engine / reference CPU per GB  %.2f\n", r.CPUPerGBRatioVsReference)
	if r.ThroughputRatioRTT50 > 0 {
		fmt.Fprintf(&sb, "with %.0f ms source RTT / without: engine %.2fx copying (%.2fx with its start-up, %.2f s against %.2f s), naive %.2fx; engine / naive there %.2fx\n",
			r.Config.RTTMs, r.ThroughputRatioRTT50, r.ThroughputRatioRTT50WithStart, r.Phases[phaseEngineRTT].StartS, r.Phases[phaseEngine].StartS,
			r.NaiveThroughputRatioRTT50, r.ThroughputRatioVsNaiveRTT50)
	}
	if r.RawFetchRTT50Ratio > 0 {
		fmt.Fprintf(&sb, "reading across the link (one 8 MiB fetch in flight a partition, each on a connection of its own) / raw fetch without (1 MiB a partition, a broker's in one request): %.2fx", r.RawFetchRTT50Ratio)
		if r.ThroughputRatioVsRawFetchRTT50 > 0 {
			fmt.Fprintf(&sb, "; engine copying across it / that reading %.2fx", r.ThroughputRatioVsRawFetchRTT50)
		}
		sb.WriteString("\n")
	}
	if r.ThroughputRatioProduceLatency > 0 {
		fmt.Fprintf(&sb, "with %.0f ms Produce latency / without: engine %.2fx copying (%.2fx with its start-up; any client's ceiling there: %.0f MB/s, one %.0f KB batch per partition per answer)\n",
			r.Config.ProduceLatencyMs, r.ThroughputRatioProduceLatency, r.ThroughputRatioProduceLatencyWithStart,
			r.ProduceLatencyCeilingMBPerS, float64(r.Data.WireBytes)/float64(max(r.Data.Batches, 1))/1e3)
	}
	if r.RawProduceLatencyRatio > 0 {
		fmt.Fprintf(&sb, "writing with %.0f ms Produce latency (%d batches in flight a partition, each on a client of its own) / without: %.2fx", r.Config.ProduceLatencyMs, rawProduceInFlight, r.RawProduceLatencyRatio)
		if r.ThroughputRatioVsRawProduceLatency > 0 {
			fmt.Fprintf(&sb, "; engine copying there / that writing %.2fx", r.ThroughputRatioVsRawProduceLatency)
		}
		sb.WriteString("\n")
	}
	for _, l := range []struct {
		who, what string
		lagResult
	}{{"engine", "half", r.Lag}, {"engine", "a tenth of", r.LagLight}, {"reference copy", "a tenth of", r.LagReference}} {
		if l.TargetMBPerS == 0 {
			continue // not measured
		}
		fmt.Fprintf(&sb, "\n%s: added lag at %.1f MB/s (target %.1f, %s the engine's rate): p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d batches (%d missing)\n",
			l.who, l.AchievedMBPerS, l.TargetMBPerS, l.what, l.P50AddedMs, l.P99AddedMs, l.MaxAddedMs, l.Samples, l.Missing)
		fmt.Fprintf(&sb, "  a reader of the source itself sees them after p50 %.2f ms, p99 %.2f ms\n", l.SourceP50Ms, l.SourceP99Ms)
		fmt.Fprintf(&sb, "  Produce round trips in the same window: source p99 %.2f ms; destination probe p50 %.2f ms, p99 %.2f ms\n",
			l.SourceProduceP99Ms, l.DestProduceP50Ms, l.DestProduceP99Ms)
		if l.who != "engine" {
			continue
		}
		fmt.Fprintf(&sb, "  the engine's own histograms: fetch answer to Produce sent p50 %.2f ms, p99 %.2f ms; its Produce round trips p50 %.2f ms, p99 %.2f ms\n",
			l.EngineP50Ms, l.EngineP99Ms, l.EngineAppendP50Ms, l.EngineAppendP99Ms)
	}
	if len(r.Scale) > 0 {
		sb.WriteString("\n")
		if r.Config.ScaleAcrossLink {
			fmt.Fprintf(&sb, "idle partitions with the source across the link (%.0f ms round trip):\n", r.Config.RTTMs)
		}
		tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "idle partitions\ttopics\tstart s\t(CPU-s: engine, source, destination)\theap B/partition\tstack B/partition\tgoroutines\tidle CPU %\t(source brokers)\tstop s\t(CPU-s: engine, destination)\t")
		for _, p := range r.Scale {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.1f %.1f %.1f\t%.0f\t%.0f\t%d\t%.1f\t%.1f\t%.3f\t%.1f %.1f\t\n", p.Partitions, p.Topics, p.StartS,
				p.StartCPUS, p.StartSrcBrokerCPUS, p.StartDstBrokerCPUS, p.HeapPerPartition,
				p.StackPerPartition, p.Goroutines, p.IdleCPUPercent, p.IdleSrcBrokerCPUPercent, p.StopS, p.StopCPUS, p.StopDstBrokerCPUS)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(&sb, "heap per idle partition (slope): %.0f B, stacks %.0f B; to %d: %.0f B heap, %.4f goroutines\n",
			r.HeapBytesPerPartition, r.StackBytesPerPartition, r.ScaleMaxPartitions, r.HeapBytesPerPartition100k, r.GoroutinesPerPartition100k)
	}
	sb.WriteString("\ngoals\n")
	tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	for _, g := range r.Goals {
		mark := "MISSED"
		if g.Met {
			mark = "met"
		}
		if g.Note != "" {
			fmt.Fprintf(tw, "  %s\t%s\t-\t%s (%s)\n", g.Name, g.Target, mark, g.Note)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.3f\t%s\n", g.Name, g.Target, g.Value, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&sb, "\ntotal %.0f s", r.ElapsedS)
	if r.Config.LoadAvgStart != "" {
		fmt.Fprintf(&sb, "; load average %s at the start, %s at the end", r.Config.LoadAvgStart, r.Config.LoadAvgEnd)
	}
	sb.WriteString("\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
