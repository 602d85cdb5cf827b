package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/metrics"
)

// want is one series of an exposition and its value.
type want struct{ name, labels, value string }

// expectSeries checks that body has each series with its value.
func expectSeries(t *testing.T, body string, wants []want) {
	t.Helper()
	for _, w := range wants {
		got, ok := series(body, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s{%s} = %q (found %v), want %s", w.name, w.labels, got, ok, w.value)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// series finds the value of one series in a text exposition. labels is a
// comma-separated list of name="value" pairs in any order; the exposition
// sorts them by name.
func series(body, name, labels string) (string, bool) {
	pairs := strings.Split(labels, ",")
	slices.Sort(pairs)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+strings.Join(pairs, ",")+"}") + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// TestMetricsFromSnapshot checks the adapter on a fixed snapshot: every
// series is derived from it, one state series per state with exactly one
// at 1, unknown offsets left out, and partitions of other instances left to
// those instances.
func TestMetricsFromSnapshot(t *testing.T) {
	synced := time.Unix(1_700_000_000, 0)
	snap := engine.Snapshot{
		Instance:    "i1",
		Destination: engine.ClusterInfo{ID: "dst-id"},
		Mirrors: []engine.MirrorSnapshot{{
			Name:   "a-to-b",
			Source: engine.ClusterInfo{ID: "src-id"},
			Partitions: []engine.PartitionSnapshot{
				{Topic: "orders", Partition: 0, Owner: "i1", State: partition.Mirroring, Lag: 42, LagTime: 1500 * time.Millisecond,
					SourceHWM: 100, DestLogEnd: 58, LastOffset: 57, BytesPerSec: 2048, BatchesPerSec: 3, BytesCopied: 9000, BatchesCopied: 12, FillerBatches: 2},
				{Topic: "orders", Partition: 1, Owner: "i1", State: partition.Failed, Attempt: 4, Retryable: true,
					SourceHWM: -1, DestLogEnd: -1, LastOffset: -1},
				{Topic: "orders", Partition: 2, Owner: "i2", State: partition.Mirroring, Lag: 7},
			},
			Groups: []engine.GroupSnapshot{{Group: "billing", LastSync: synced}, {Group: "busy", SkipReason: "active on the destination", Skip: engine.SkipActive}},
		}},
	}
	srv := httptest.NewServer(metrics.Handler(func() engine.Snapshot { return snap }, metrics.Config{}))
	defer srv.Close()
	body := scrape(t, srv.URL)

	p0, p1 := `mirror="a-to-b",partition="0",topic="orders"`, `mirror="a-to-b",partition="1",topic="orders"`
	expectSeries(t, body, []want{
		{"kmirror_partition_lag_records", p0, "42"},
		{"kmirror_partition_lag_seconds", p0, "1.5"},
		{"kmirror_partition_state", p0 + `,state="MIRRORING"`, "1"},
		{"kmirror_partition_state", p0 + `,state="FAILED"`, "0"},
		{"kmirror_partition_state", p1 + `,state="FAILED"`, "1"},
		{"kmirror_partition_state_code", p1, fmt.Sprint(int(partition.Failed))},
		{"kmirror_partition_retry_attempt", p1, "4"},
		{"kmirror_partition_failed_retryable", p1, "1"},
		{"kmirror_partition_bytes_per_second", p0, "2048"},
		{"kmirror_partition_batches_per_second", p0, "3"},
		{"kmirror_partition_bytes_copied_total", p0, "9000"},
		{"kmirror_partition_batches_copied_total", p0, "12"},
		{"kmirror_partition_filler_batches_total", p0, "2"},
		{"kmirror_partition_source_high_watermark", p0, "100"},
		{"kmirror_partition_destination_log_end", p0, "58"},
		{"kmirror_partition_last_mirrored_offset", p0, "57"},
		{"kmirror_group_sync_last_timestamp_seconds", `group="billing",mirror="a-to-b"`, "1.7e+09"},
		{"kmirror_group_sync_last_timestamp_seconds", `group="busy",mirror="a-to-b"`, "0"},
		{"kmirror_group_sync_skipped", `group="busy",mirror="a-to-b",reason="active_on_destination"`, "1"},
		{"kmirror_group_sync_skipped", `group="billing",mirror="a-to-b",reason="none"`, "0"},
		{"kmirror_mirror_info", `destination_cluster_id="dst-id",kmirror_instance="i1",mirror="a-to-b",source_cluster_id="src-id"`, "1"},
	})
	if n := strings.Count(body, `kmirror_partition_state{mirror="a-to-b",partition="0",state=`); n != len(partition.States) {
		t.Errorf("%d state series for orders/0, want one per state (%d)", n, len(partition.States))
	}
	for _, absent := range []string{
		"kmirror_partition_source_high_watermark{" + p1, // unknown offsets are not exported as -1
		`partition="2"`, // owned by instance i2, which exports it
	} {
		if strings.Contains(body, absent) {
			t.Errorf("exposition has %s", absent)
		}
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", body)
	}
}

// TestMetricsOfRunningMirror scrapes /metrics of an engine mirroring two
// partitions and finds lag and state series for both, following the data.
func TestMetricsOfRunningMirror(t *testing.T) {
	src, dst := enginetest.Pair(t)
	src.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 120, "m")
	ctx := context.Background()
	eng, err := engine.New(ctx, engine.Config{Destination: dst.Addrs(), Instance: "metrics-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.StartMirror(ctx, engine.MirrorConfig{Name: "a-to-b", SourceBootstrap: src.Addrs(), Topics: []string{"orders"},
		CheckInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ms, err := metrics.Start("127.0.0.1:0", eng.Snapshot, metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ms.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	url := "http://" + ms.Addr().String() + "/metrics"
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		body := scrape(t, url)
		for p := range 2 {
			l := fmt.Sprintf(`mirror="a-to-b",partition="%d",topic="orders"`, p)
			if v, ok := series(body, "kmirror_partition_state", l+`,state="MIRRORING"`); !ok || v != "1" {
				return false, fmt.Sprintf("orders/%d not MIRRORING in the exposition:\n%s", p, grepKmirror(body))
			}
			if v, ok := series(body, "kmirror_partition_lag_records", l); !ok || v != "0" {
				return false, fmt.Sprintf("orders/%d lag %q (found %v)", p, v, ok)
			}
			if v, ok := series(body, "kmirror_partition_destination_log_end", l); !ok || v != "120" {
				return false, fmt.Sprintf("orders/%d destination end %q (found %v)", p, v, ok)
			}
			if _, ok := series(body, "kmirror_partition_lag_seconds", l); !ok {
				return false, fmt.Sprintf("orders/%d has no lag_seconds", p)
			}
		}
		return true, ""
	})
	body := scrape(t, url)
	if !strings.Contains(body, "go_goroutines") {
		t.Error("no Go runtime series")
	}
	// Every batch appended so far was counted in both latency histograms.
	var batches float64
	for p := range 2 {
		v, _ := series(body, "kmirror_partition_batches_copied_total", fmt.Sprintf(`mirror="a-to-b",partition="%d",topic="orders"`, p))
		var n float64
		fmt.Sscan(v, &n)
		batches += n
	}
	for _, name := range []string{"kmirror_mirror_engine_seconds", "kmirror_mirror_destination_produce_seconds"} {
		count, _ := series(body, name+"_count", `mirror="a-to-b"`)
		// The exposition puts le last, not in name order.
		inf := name + `_bucket{mirror="a-to-b",le="+Inf"} ` + count
		if count != fmt.Sprint(batches) || !strings.Contains(body, inf+"\n") {
			t.Errorf("%s: count %q, want the %v batches copied and the line %s:\n%s", name, count, batches, inf, grepKmirror(body))
		}
	}
}

func grepKmirror(body string) string {
	var keep []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "kmirror_") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
