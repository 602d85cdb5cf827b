package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bench's cluster and scale
// children, the way main() does for the kmirror binary: the bench
// re-executes its own executable with ClusterEnv or ScaleEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(ClusterEnv) != "" {
		os.Exit(ClusterMain(os.Args[1:]))
	}
	if os.Getenv(ScaleEnv) != "" {
		os.Exit(ScaleMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// cliArgs runs the real command from go test, for measuring without a
// kmirror binary: go test ./internal/bench -run TestCLI -timeout 0 -args -kmirror.bench="--quick --json"
var cliArgs = flag.String("kmirror.bench", "", "run kmirror bench with these space-separated arguments and print its output")

func TestCLI(t *testing.T) {
	if *cliArgs == "" {
		t.Skip("no -kmirror.bench arguments")
	}
	if code := Main(context.Background(), strings.Fields(*cliArgs), os.Stdout, os.Stderr); code != exitOK {
		t.Fatalf("kmirror bench %s: exit code %d", *cliArgs, code)
	}
}

// testWriter sends the bench's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestTinyBenchJSON runs every measurement at a tiny scale and checks the
// JSON report: one object, every required figure present, finite and
// positive where a zero would mean nothing was measured. It asserts no
// timing.
func TestTinyBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two cluster processes")
	}
	o := defaultOptions()
	o.size, o.partitions, o.repeats, o.json = 4e6, 2, 1, true
	o.scale, o.scaleTopic = []int{20, 200}, 20 // 180 partitions apart: the heap slope stands out of the fixed cost's noise (20 apart, it came out negative once in ten runs)
	o.lagDuration, o.lagWarmup, o.settle = 2*time.Second, 500*time.Millisecond, 500*time.Millisecond
	o.phaseTimeout, o.scaleTimeout = 2*time.Minute, 2*time.Minute
	o.profileDir = t.TempDir()
	o.progress = testWriter{t}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := execute(ctx, o, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}

	raw := bytes.Clone(stdout.Bytes())
	dec := json.NewDecoder(&stdout)
	var rep map[string]any
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatalf("more than one JSON value on stdout")
	}
	positive := []string{
		"throughput_ratio_vs_reference", "throughput_ratio_vs_naive", "throughput_ratio_vs_raw_fetch",
		"cpu_per_gb_ratio_vs_naive", "cpu_per_gb_ratio_vs_reference", "bytes_alloc_per_wire_byte",
		"dest_broker_cpu_s_per_gb", "lag_p50_added_ms", "lag_p99_added_ms",
		"failover_1000_partitions_s", "failover_partitions", "heap_bytes_per_partition", "elapsed_s",
		"data.records", "data.wire_bytes", "data.batches", "data.compression_ratio",
		"lag.samples", "lag.achieved_mb_per_s", "lag.target_mb_per_s",
		"throughput_ratio_rtt50", "naive_throughput_ratio_rtt50", "throughput_ratio_produce_latency",
		"raw_fetch_ratio_rtt50", "throughput_ratio_vs_raw_fetch_rtt50",
		"raw_produce_ratio_produce_latency", "throughput_ratio_vs_raw_produce_latency",
		"lag_p99_ratio_vs_reference", "lag_reference.samples", "lag_light.samples",
		"scale_max_partitions", "start_100k_s", "stop_100k_s", "heap_bytes_per_partition_100k",
	}
	for _, ph := range phaseNames {
		for _, k := range []string{"mb_per_s", "cpu_s_per_gb", "alloc_bytes_per_wire_byte"} {
			positive = append(positive, "phases."+ph+"."+k)
		}
	}
	for _, ph := range []string{phaseReference, phaseNaive, phaseEngine} {
		positive = append(positive, "phases."+ph+".dest_broker_cpu_s_per_gb")
	}
	for _, k := range positive {
		v, ok := lookup(rep, k)
		if !ok {
			t.Errorf("report has no %s", k)
			continue
		}
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			t.Errorf("%s = %v, want a finite positive number", k, v)
		}
	}
	if v, _ := lookup(rep, "lag.missing"); v != 0.0 {
		t.Errorf("lag.missing = %v: acknowledged batches never reached the destination", v)
	}
	if v, _ := lookup(rep, "lag_reference.missing"); v != 0.0 {
		t.Errorf("lag_reference.missing = %v: acknowledged batches never reached the destination", v)
	}
	// The copy (4), link (2), lag (1) and idle-partition (6) goals.
	goals, _ := rep["goals"].([]any)
	if len(goals) != 13 {
		t.Errorf("goals = %v, want 13 entries", rep["goals"])
	}
	for _, f := range []string{"engine.cpu.pprof", "engine.heap0.pprof", "engine.heap1.pprof", "stop-200.cpu.pprof", "idle-200.heap.pprof", "idle-200.cpu.pprof"} {
		if st, err := os.Stat(o.profileDir + "/" + f); err != nil || st.Size() == 0 {
			t.Errorf("profile %s not written: %v", f, err)
		}
	}

	// The table is made from the same report.
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode report: %v", err)
	}
	var table strings.Builder
	if err := writeTable(&table, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"engine", "naive", "reference", "raw_fetch", "added lag", "goals"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	t.Logf("table:\n%s", table.String())
}

// lookup finds a dotted key in decoded JSON.
func lookup(m map[string]any, key string) (any, bool) {
	var cur any = m
	for part := range strings.SplitSeq(key, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--codec", "brotli"},
		{"--size", "lots"},
		{"--partitions", "0"},
		{"--repeats", "0"},
		{"--bogus"},
		{"extra"},
		{"--size", "1KB"},
		{"--scale", "1000,500"},
		{"--scale", "150"},
		{"--scale", "0"},
		{"--scale", "1000,x"},
		{"--rtt", "-1s"},
		{"--scale-across-link", "--rtt", "0"},
		{"--produce-latency", "soon"},
		{"--bandwidth", "fast"},
		{"--measure", "lag"},
		{"--measure", "copy,everything"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), args, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("%v: exit code %d, want %d", args, code, exitUsage)
		}
		if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.HasPrefix(stderr.String(), "kmirror bench: ") {
			t.Errorf("%v: stderr %q, want one kmirror bench: line", args, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: wrote %q to stdout", args, stdout.String())
		}
	}
	var stdout bytes.Buffer
	if code := Main(context.Background(), []string{"--help"}, &stdout, io.Discard); code != exitOK || !strings.Contains(stdout.String(), "--quick") {
		t.Errorf("--help: exit %d, output %q", code, stdout.String())
	}
}

func TestParseArgsQuick(t *testing.T) {
	o, err := parseArgs([]string{"--quick", "--json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.size != 200e6 || o.repeats != 1 || !slices.Equal(o.scale, []int{1000, 10_000}) || !o.json {
		t.Errorf("--quick: size %d repeats %d scale %v json %v", o.size, o.repeats, o.scale, o.json)
	}
	o, err = parseArgs([]string{"--quick", "--size", "50MB", "--repeats", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.size != 50e6 || o.repeats != 2 {
		t.Errorf("explicit flags after --quick: size %d repeats %d", o.size, o.repeats)
	}
	o, err = parseArgs([]string{"--quick", "--scale", "1000, 4000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.scale, []int{1000, 4000}) {
		t.Errorf("--scale after --quick: %v, want [1000 4000]", o.scale)
	}
	o, err = parseArgs(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.size != 1e9 || o.repeats != 3 || o.partitions != 8 || o.codec != "zstd" || !slices.Equal(o.scale, []int{1000, 10_000, 100_000}) ||
		o.rtt != 50*time.Millisecond || o.produceLatency != 2*time.Millisecond || len(o.phases()) != 10 {
		t.Errorf("defaults: %+v", o)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"1GB": 1e9, "200MB": 200e6, "20mb": 20e6, "512KiB": 512 << 10, "1.5GiB": 3 << 29, "1000": 1000, "64k": 64e3,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GB", "-1MB", "1TB", "1e400"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	if q := quantile(xs, 0.5); q != 50 {
		t.Errorf("p50 = %v", q)
	}
	if q := quantile(xs, 0.99); q != 99 {
		t.Errorf("p99 = %v", q)
	}
	if q := quantile(xs, 1); q != 100 {
		t.Errorf("max = %v", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("empty = %v", q)
	}
}

// TestAppendExpected: a probe round trip longer than the probe's interval
// stands for the sends the stall held back, so a stall weighs in the
// quantiles as it would for a steady sender.
func TestAppendExpected(t *testing.T) {
	got := appendExpected(nil, 35*time.Millisecond, 10*time.Millisecond)
	want := []float64{35, 25, 15, 5}
	if !slices.Equal(got, want) {
		t.Fatalf("35ms round trip every 10ms: got %v, want %v", got, want)
	}
	if got := appendExpected(nil, 4*time.Millisecond, 10*time.Millisecond); !slices.Equal(got, []float64{4}) {
		t.Fatalf("4ms round trip: got %v, want [4]", got)
	}
}

// TestFailedScaleCountMissesItsGoals: when the largest idle count cannot
// be measured (its start ran out of time), the report keeps what the
// smaller counts measured and misses the largest count's goals, naming
// the error, instead of failing the whole run or letting a smaller count
// claim them.
func TestFailedScaleCountMissesItsGoals(t *testing.T) {
	r := &report{}
	r.setScale([]scalePoint{{Partitions: 1000, StartS: 1, StopS: 0.1}, {Partitions: 10_000, StartS: 5, StopS: 2}})
	r.ScaleFailed, r.ScaleError = 100_000, "100000 partitions: start not done within 10m0s"
	r.setGoals()
	missed := 0
	for _, g := range r.Goals {
		if strings.Contains(g.Name, "10000 ") && !strings.Contains(g.Name, "100000") {
			t.Errorf("a smaller count claims a goal: %+v", g)
		}
		if strings.Contains(g.Name, "100000") {
			if g.Met || !strings.Contains(g.Note, "start not done") {
				t.Errorf("goal of the failed count: %+v", g)
			}
			missed++
		}
	}
	if missed != 5 {
		t.Fatalf("%d goals of the failed count, want 5: %+v", missed, r.Goals)
	}
	var sb strings.Builder
	if err := writeTable(&sb, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "MISSED (not measured: 100000 partitions: start not done") {
		t.Fatalf("table:\n%s", sb.String())
	}
}

// TestUnfinishedStopKeepsTheCount: a count whose stop was not seen to end
// within the bound keeps its start, idle and heap figures and goals; only
// the stop's goal is missed, saying why.
func TestUnfinishedStopKeepsTheCount(t *testing.T) {
	r := &report{}
	r.setScale([]scalePoint{
		{Partitions: 10_000, StartS: 5, StopS: 2, HeapBytes: 10_000_000, Goroutines: 50, IdleCPUPercent: 1},
		{Partitions: 100_000, StartS: 12, StopS: 3000, HeapBytes: 100_000_000, Goroutines: 60, IdleCPUPercent: 6, StopError: "not done within 50m0s"},
	})
	r.setGoals()
	byName := map[string]goal{}
	for _, g := range r.Goals {
		byName[g.Name] = g
	}
	for name, met := range map[string]bool{
		"start of 100000 idle partitions (s)":              true,
		"idle CPU of 100000 partitions (% of a core)":      true,
		"heap per idle partition, slope to 100000 (bytes)": true,
		"goroutines per idle partition, slope to 100000":   true,
	} {
		if g, ok := byName[name]; !ok || g.Met != met || g.Note != "" {
			t.Errorf("goal %q: %+v (present %v), want met %v with a value", name, g, ok, met)
		}
	}
	stop := byName["stop of 100000 partitions (s)"]
	if stop.Met || !strings.Contains(stop.Note, "not measured: not done within 50m0s") {
		t.Fatalf("stop goal %+v, want missed, saying why", stop)
	}
}
