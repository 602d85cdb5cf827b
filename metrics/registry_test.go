package metrics_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/metrics"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md from the registry")

const docPath = "../docs/metrics.md"

// TestMetricsDoc: docs/metrics.md is what the registry says, so a metric
// added without its line fails here. go generate ./metrics (or
// go test -run TestMetricsDoc -update) rewrites it.
func TestMetricsDoc(t *testing.T) {
	want := metrics.Markdown()
	if *update {
		if err := os.MkdirAll(filepath.Dir(docPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (go generate ./metrics writes it)", err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the registry says: run go generate ./metrics", docPath)
	}
	for _, m := range metrics.Metrics() {
		if !strings.Contains(string(got), "| `"+m.Name+"` | "+string(m.Type)+" |") {
			t.Errorf("%s has no line for %s", docPath, m.Name)
		}
	}
}

// richSnapshot has something for every series: a mirror run here with a
// FAILED and a MIRRORING partition, groups synced and skipped, an
// instance that joined.
func richSnapshot() engine.Snapshot {
	now := time.Unix(1_700_000_000, 0)
	lat := engine.LatencyHistogram{Counts: make([]uint64, 96)}
	return engine.Snapshot{
		Instance: "i1", Destination: engine.ClusterInfo{ID: "dst"},
		DestReach: engine.Reachability{LastOK: now},
		Member:    engine.Membership{Joined: true, Writable: true, Shards: 50},
		Mirrors: []engine.MirrorSnapshot{{
			Name: "a-to-b", Source: engine.ClusterInfo{ID: "src"},
			Latency:       engine.MirrorLatency{Engine: lat, DestinationProduce: lat},
			Failures:      map[partition.Cause]int64{partition.CauseTransient: 3},
			Realignments:  map[partition.Cause]int64{partition.CauseTransient: 2},
			GroupSyncLast: now,
			Meta:          engine.MetaSyncStatus{Topics: engine.MetaSyncKind{LastSync: now}},
			Partitions: []engine.PartitionSnapshot{
				{Topic: "orders", Partition: 0, Owner: "i1", State: partition.Mirroring, Lag: 5, LagTime: 2 * time.Second,
					SourceHWM: 10, DestLogEnd: 5, LastOffset: 4, BytesPerSec: 100, BatchesPerSec: 1, BytesCopied: 1000, BatchesCopied: 10, FillerBatches: 1, OpenTxns: 1},
				{Topic: "orders", Partition: 1, Owner: "i1", State: partition.Failed, Attempt: 3, Retryable: true, Lag: 7, LagTime: 9 * time.Second,
					SourceHWM: -1, DestLogEnd: -1, LastOffset: -1, BytesCopied: 500, BatchesCopied: 5},
				{Topic: "clicks", Partition: 0, Owner: "i1", State: partition.Mirroring, SourceHWM: 1, DestLogEnd: 1, LastOffset: 0},
				{Topic: "orders", Partition: 2, Owner: "i2", State: partition.Mirroring, Lag: 100},
			},
			Groups:           []engine.GroupSnapshot{{Group: "billing", LastSync: now}, {Group: "busy", Skip: engine.SkipActive, SkipReason: "active"}},
			SourceRoundTrips: []engine.BrokerRoundTrip{{Broker: 2, RTT: 48 * time.Millisecond}},
		}},
	}
}

// gather collects snap at granularity g: family name → type.
func gather(t *testing.T, snap engine.Snapshot, g metrics.Granularity) map[string]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewCollector(func() engine.Snapshot { return snap }, metrics.Config{Granularity: g, Build: metrics.Build{Version: "v1", Revision: "abc"}}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather (%s): %v", g, err)
	}
	out := map[string]string{}
	for _, f := range fams {
		out[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	return out
}

// TestRegistryIsWhatIsExported: every family a scrape yields is in the
// registry with its type and scope, and every registry entry is yielded
// at its granularity (no entry documented but never exported).
func TestRegistryIsWhatIsExported(t *testing.T) {
	reg := map[string]metrics.Metric{}
	for _, m := range metrics.Metrics() {
		reg[m.Name] = m
	}
	seen := map[string]bool{}
	for _, g := range []metrics.Granularity{metrics.PerPartition, metrics.PerTopic} {
		for name, typ := range gather(t, richSnapshot(), g) {
			m, ok := reg[name]
			switch {
			case !ok:
				t.Errorf("%s exported at granularity %s but not in the registry", name, g)
			case string(m.Type) != typ:
				t.Errorf("%s exported as a %s, the registry says %s", name, typ, m.Type)
			case m.Scope != metrics.ScopeAlways && string(m.Scope) != string(g):
				t.Errorf("%s (scope %s) exported at granularity %s", name, m.Scope, g)
			}
			seen[name] = true
		}
	}
	for name := range reg {
		if !seen[name] {
			t.Errorf("%s is in the registry but never exported", name)
		}
	}
}

// metricRef finds the kmirror series names a rules file or dashboard uses.
var metricRef = regexp.MustCompile(`\bkmirror_[a-z0-9_]+`)

// TestDeployUsesKnownMetrics: every kmirror series the alert rules (and
// their promtool tests) and the Grafana dashboard in deploy/ query exists
// in the registry (a histogram's _bucket, _sum and _count included), and
// each file uses some.
func TestDeployUsesKnownMetrics(t *testing.T) {
	known, labels := map[string]bool{}, map[string]bool{}
	for _, m := range metrics.Metrics() {
		known[m.Name] = true
		for _, l := range m.Labels {
			labels[l] = true // kmirror_instance is a label, not a series
		}
		if m.Type == metrics.Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Name+s] = true
			}
		}
	}
	files, err := filepath.Glob("../deploy/*/*")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if !slices.Contains([]string{".yml", ".yaml", ".json"}, filepath.Ext(f)) || strings.Contains(f, "kubernetes") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		refs := metricRef.FindAllString(string(b), -1)
		if len(refs) == 0 {
			t.Errorf("%s uses no kmirror series", f)
		}
		for _, r := range refs {
			if !known[r] && !labels[r] {
				t.Errorf("%s uses %s, which kmirror does not export", f, r)
			}
		}
		checked++
	}
	if checked < 2 {
		t.Errorf("checked %d files under deploy/, want the alert rules and the dashboard", checked)
	}
}
