package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/engine"
)

const namespace = "kmirror"

// Label names, one place so series stay joinable across metrics.
const (
	labelMirror    = "mirror"
	labelTopic     = "topic"
	labelPartition = "partition"
	labelState     = "state"
	labelGroup     = "group"
	labelReason    = "reason"
	labelCause     = "cause"
	labelKind      = "kind"
	labelCheck     = "check"
	labelBroker    = "broker"
	labelInstance  = "kmirror_instance"
	labelSourceID  = "source_cluster_id"
	labelDestID    = "destination_cluster_id"
	labelVersion   = "version"
	labelRevision  = "revision"
	labelGoVersion = "go_version"
)

// Type is a metric's Prometheus type.
type Type string

const (
	Gauge     Type = "gauge"
	Counter   Type = "counter"
	Histogram Type = "histogram"
)

// Scope says when a metric is exported: always, or only at one
// --metrics-granularity.
type Scope string

const (
	ScopeAlways    Scope = ""
	ScopePartition Scope = "partition" // --metrics-granularity partition (the default)
	ScopeTopic     Scope = "topic"     // --metrics-granularity topic
)

// Metric is one entry of the registry: a series family kmirror exports.
type Metric struct {
	Name   string // full name, kmirror_...
	Type   Type
	Help   string
	Labels []string
	Scope  Scope

	desc *prometheus.Desc
}

// registry lists every metric, in the order docs/metrics.md shows them.
var registry []*Metric

func def(t Type, scope Scope, name, help string, labels ...string) *Metric {
	full := prometheus.BuildFQName(namespace, "", name)
	m := &Metric{Name: full, Type: t, Help: help, Labels: labels, Scope: scope,
		desc: prometheus.NewDesc(full, help, labels, nil)}
	registry = append(registry, m)
	return m
}

var (
	partLabels  = []string{labelMirror, labelTopic, labelPartition}
	topicLabels = []string{labelMirror, labelTopic}
)

// Process and instance.
var (
	mBuildInfo = def(Gauge, ScopeAlways, "build_info", "Always 1; the labels name the build: kmirror's release, the commit and the Go version.",
		labelVersion, labelRevision, labelGoVersion)
	mReady = def(Gauge, ScopeAlways, "instance_ready", "1 while the readiness check passes, per check: joined (a member of the instances' group, not suspended), shards (owns at least one), destination (answers); /readyz answers 200 when all are 1. A console without an instance has the destination check only.",
		labelInstance, labelCheck)
	mShards = def(Gauge, ScopeAlways, "instance_shards", "Shards of __mirror_state this instance owns (assigned by the instances' group and replayed). Summed over instances it is 50 when every shard has a live owner.",
		labelInstance)
	mDestUp = def(Gauge, ScopeAlways, "destination_up", "1 while the destination cluster answers this instance's checks, 0 after checks in a row failed.",
		labelInstance)
)

// Per mirror.
var (
	mMirror = def(Gauge, ScopeAlways, "mirror_info", "One series per mirror this instance runs, naming the clusters.",
		labelMirror, labelSourceID, labelDestID, labelInstance)
	mSourceUp = def(Gauge, ScopeAlways, "mirror_source_up", "1 while the mirror's source cluster answers this instance's checks, 0 after checks in a row failed.",
		labelMirror)
	mSourceDown = def(Gauge, ScopeAlways, "mirror_source_unreachable_since_timestamp_seconds", "Unix time of the first failed check of the current source outage, 0 while the source answers.",
		labelMirror)
	mSourceRTT = def(Gauge, ScopeAlways, "mirror_source_round_trip_seconds", "Round trip this instance measured to a source broker in the last 10 to 20 s (the shortest answer of its fetches there that did not long-poll); left out while there is none (the broker's partitions long-poll) and while the source is unreachable. The fetches of a partition that is behind grow with it.",
		labelMirror, labelBroker)
	mEngineTime = def(Histogram, ScopeAlways, "mirror_engine_seconds", "Time from the fetch answer that brought a batch until its Produce was sent to the destination (handling, and waits for a full pipeline or the throttle).",
		labelMirror)
	mProduceRTT = def(Histogram, ScopeAlways, "mirror_destination_produce_seconds", "Round trip of the mirror's Produce requests to the destination.",
		labelMirror)
	mFailures = def(Counter, ScopeAlways, "mirror_partition_failures_total", "Partitions that went FAILED on this instance, by cause (the names partition records in __mirror_state carry). A retry that fails again counts again.",
		labelMirror, labelCause)
	mRealigns = def(Counter, ScopeAlways, "mirror_realignments_total", "Realignments of MIRRORING partitions (back to the destination's log end after an append or fetch error, without going FAILED), by the cause of the error.",
		labelMirror, labelCause)
	mSyncLast = def(Gauge, ScopeAlways, "mirror_sync_last_timestamp_seconds", "Unix time of the mirror's last metadata sync run without error, by kind: topics (discovery and partition growth), configs, acls, groups (a consumer- and share-group offset sync round); 0 when none yet or the kind is off.",
		labelMirror, labelKind)
	mGroupSync = def(Gauge, ScopeAlways, "group_sync_last_timestamp_seconds", "Unix time of the group's last offset sync, 0 when it was not synced in the last round.",
		labelMirror, labelGroup)
	mGroupSkip = def(Gauge, ScopeAlways, "group_sync_skipped", "1 when the group was skipped in the last sync round, with the reason ("+skipReasons()+"); 0 with reason none when it was synced.",
		labelMirror, labelGroup, labelReason)
)

// Per partition (--metrics-granularity partition).
var (
	mLagRecords = def(Gauge, ScopePartition, "partition_lag_records", "Source high watermark minus destination log end.", partLabels...)
	mLagSeconds = def(Gauge, ScopePartition, "partition_lag_seconds", "Source max timestamp of the newest batch minus that of the newest mirrored batch (live RPO estimate).", partLabels...)
	mState      = def(Gauge, ScopePartition, "partition_state", "1 for the partition's current state, 0 for every other state.", append(partLabels, labelState)...)
	mStateCode  = def(Gauge, ScopePartition, "partition_state_code", "The partition's state as a number (the order of kmirror's state list; 0 = UNKNOWN).", partLabels...)
	mAttempt    = def(Gauge, ScopePartition, "partition_retry_attempt", "Retry attempt of a FAILED partition, 0 when healthy.", partLabels...)
	mRetryable  = def(Gauge, ScopePartition, "partition_failed_retryable", "1 when a FAILED partition will retry by itself, 0 when it waits for --recover.", partLabels...)
	mBytesRate  = def(Gauge, ScopePartition, "partition_bytes_per_second", "Bytes appended to the destination per second over the last check interval.", partLabels...)
	mBatchRate  = def(Gauge, ScopePartition, "partition_batches_per_second", "Batches appended to the destination per second over the last check interval.", partLabels...)
	mBytes      = def(Counter, ScopePartition, "partition_bytes_copied_total", "Bytes appended since the partition started on this instance.", partLabels...)
	mBatches    = def(Counter, ScopePartition, "partition_batches_copied_total", "Batches appended since the partition started on this instance, fillers included.", partLabels...)
	mFillers    = def(Counter, ScopePartition, "partition_filler_batches_total", "Batches appended only to keep offsets aligned.", partLabels...)
	mSourceHWM  = def(Gauge, ScopePartition, "partition_source_high_watermark", "Source high watermark (left out while unknown).", partLabels...)
	mDestEnd    = def(Gauge, ScopePartition, "partition_destination_log_end", "Destination log end offset (left out while unknown).", partLabels...)
	mLastOffset = def(Gauge, ScopePartition, "partition_last_mirrored_offset", "Last mirrored source offset, the LME (left out while none).", partLabels...)
	mOpenTxns   = def(Gauge, ScopePartition, "partition_open_transactions", "Mirrored transactions open on the destination partition.", partLabels...)
)

// Per topic (--metrics-granularity topic): the partition series summed up
// over the topic's partitions this instance owns.
var (
	mTopicStates  = def(Gauge, ScopeTopic, "topic_partitions", "Partitions of the topic this instance owns in each state (every state, 0 included).", append(topicLabels, labelState)...)
	mTopicLag     = def(Gauge, ScopeTopic, "topic_lag_records", "Sum of the partitions' lag in records.", topicLabels...)
	mTopicLagTime = def(Gauge, ScopeTopic, "topic_lag_seconds", "The largest lag in time of the topic's partitions (live RPO estimate of its worst partition).", topicLabels...)
	mTopicAttempt = def(Gauge, ScopeTopic, "topic_retry_attempt_max", "The highest retry attempt of the topic's FAILED partitions, 0 when none is FAILED.", topicLabels...)
	mTopicBytesR  = def(Gauge, ScopeTopic, "topic_bytes_per_second", "Sum of the partitions' bytes appended per second.", topicLabels...)
	mTopicBatchR  = def(Gauge, ScopeTopic, "topic_batches_per_second", "Sum of the partitions' batches appended per second.", topicLabels...)
	mTopicBytes   = def(Counter, ScopeTopic, "topic_bytes_copied_total", "Sum of the partitions' bytes appended since they started on this instance.", topicLabels...)
	mTopicBatches = def(Counter, ScopeTopic, "topic_batches_copied_total", "Sum of the partitions' batches appended, fillers included.", topicLabels...)
	mTopicFillers = def(Counter, ScopeTopic, "topic_filler_batches_total", "Sum of the partitions' filler batches.", topicLabels...)
	mTopicTxns    = def(Gauge, ScopeTopic, "topic_open_transactions", "Mirrored transactions open on the topic's destination partitions.", topicLabels...)
)

// Metrics returns every metric kmirror exports besides the Go runtime's
// (go_*) and the process's (process_*), in the registry's order.
func Metrics() []Metric {
	out := make([]Metric, len(registry))
	for i, m := range registry {
		out[i] = *m
	}
	return out
}

// skipReasons lists the reason label's values but none.
func skipReasons() string {
	var out []string
	for _, s := range engine.GroupSkips {
		if s != engine.SkipNone {
			out = append(out, s.String())
		}
	}
	return strings.Join(out, ", ")
}
