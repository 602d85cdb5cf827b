package metrics_test

import (
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/metrics"
)

// TestInstanceAndMirrorSeries checks the series that are not about one
// partition on a fixed snapshot: build info, readiness per check, shards,
// failures and realignments by cause (every cause, 0 included), the sync
// times per kind, a round trip series for each source broker in the
// snapshot and no other.
func TestInstanceAndMirrorSeries(t *testing.T) {
	snap := richSnapshot()
	srv := httptest.NewServer(metrics.Handler(func() engine.Snapshot { return snap }, metrics.Config{Build: metrics.Build{Version: "v1.2.3", Revision: "abc123"}}))
	defer srv.Close()
	body := scrape(t, srv.URL)
	m := `mirror="a-to-b"`
	expectSeries(t, body, []want{
		{"kmirror_build_info", `go_version="` + runtime.Version() + `",revision="abc123",version="v1.2.3"`, "1"},
		{"kmirror_instance_ready", `check="joined",kmirror_instance="i1"`, "1"},
		{"kmirror_instance_ready", `check="shards",kmirror_instance="i1"`, "1"},
		{"kmirror_instance_ready", `check="destination",kmirror_instance="i1"`, "1"},
		{"kmirror_instance_shards", `kmirror_instance="i1"`, "50"},
		{"kmirror_mirror_partition_failures_total", m + `,cause="transient"`, "3"},
		{"kmirror_mirror_partition_failures_total", m + `,cause="diverged"`, "0"},
		{"kmirror_mirror_realignments_total", m + `,cause="transient"`, "2"},
		{"kmirror_mirror_sync_last_timestamp_seconds", m + `,kind="topics"`, "1.7e+09"},
		{"kmirror_mirror_sync_last_timestamp_seconds", m + `,kind="groups"`, "1.7e+09"},
		{"kmirror_mirror_sync_last_timestamp_seconds", m + `,kind="acls"`, "0"},
		{"kmirror_group_sync_skipped", m + `,group="busy",reason="active_on_destination"`, "1"},
		{"kmirror_mirror_source_round_trip_seconds", m + `,broker="2"`, "0.048"},
	})
	if n := strings.Count(body, "kmirror_mirror_source_round_trip_seconds{"); n != 1 {
		t.Errorf("%d round trip series, want one, for the one broker in the snapshot", n)
	}
	if strings.Contains(body, `cause=""`) {
		t.Error("a series for the empty cause")
	}
	if strings.Contains(body, "kmirror_topic_") {
		t.Error("topic series at partition granularity")
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", grepKmirror(body))
	}
}

// TestTopicGranularity: at topic granularity the partitions a topic has
// on this instance are summed up (lag summed, lag time the worst, states
// counted), partitions of other instances stay out, and no series carries
// a partition label.
func TestTopicGranularity(t *testing.T) {
	snap := richSnapshot()
	srv := httptest.NewServer(metrics.Handler(func() engine.Snapshot { return snap }, metrics.Config{Granularity: metrics.PerTopic}))
	defer srv.Close()
	body := scrape(t, srv.URL)
	o := `mirror="a-to-b",topic="orders"`
	expectSeries(t, body, []want{
		{"kmirror_topic_lag_records", o, "12"}, // 5 + 7; orders/2 is i2's
		{"kmirror_topic_lag_seconds", o, "9"},
		{"kmirror_topic_partitions", o + `,state="MIRRORING"`, "1"},
		{"kmirror_topic_partitions", o + `,state="FAILED"`, "1"},
		{"kmirror_topic_partitions", o + `,state="PAUSED"`, "0"},
		{"kmirror_topic_retry_attempt_max", o, "3"},
		{"kmirror_topic_bytes_copied_total", o, "1500"},
		{"kmirror_topic_batches_copied_total", o, "15"},
		{"kmirror_topic_filler_batches_total", o, "1"},
		{"kmirror_topic_open_transactions", o, "1"},
		{"kmirror_topic_bytes_per_second", o, "100"},
		{"kmirror_topic_partitions", `mirror="a-to-b",topic="clicks",state="MIRRORING"`, "1"},
	})
	if strings.Contains(body, "partition=") || strings.Contains(body, "kmirror_partition_") {
		t.Errorf("partition series at topic granularity:\n%s", grepKmirror(body))
	}
}
