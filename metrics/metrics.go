// Package metrics exports an engine's Snapshot as Prometheus series, and
// serves /healthz and /readyz next to /metrics. It is an adapter, not a
// second bookkeeping: every scrape takes one Snapshot and turns its values
// into metrics, so /metrics and the console always agree.
//
// Every series is declared in the registry (registry.go); docs/metrics.md
// is generated from it:
//
//go:generate go test -run TestMetricsDoc -update .
package metrics

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// Granularity is how finely partition numbers are exported.
type Granularity string

const (
	// PerPartition exports the partition_* series: about 25 series per
	// partition (2.5 million at 100k partitions).
	PerPartition Granularity = "partition"
	// PerTopic exports the topic_* series instead, summed over each
	// topic's partitions: about 20 series per topic.
	PerTopic Granularity = "topic"
)

// ParseGranularity reads --metrics-granularity.
func ParseGranularity(s string) (Granularity, error) {
	switch g := Granularity(s); g {
	case PerPartition, PerTopic:
		return g, nil
	}
	return "", fmt.Errorf("--metrics-granularity %q: want partition or topic", s)
}

// Build names the running build for kmirror_build_info.
type Build struct {
	Version  string // the release, "dev" for a local build
	Revision string // the commit, "" when unknown
}

// Config is what an exporter shows besides the snapshot.
type Config struct {
	Build       Build
	Granularity Granularity // "" is PerPartition
	// Health is what /readyz checks; nil takes it from a snapshot (cheap
	// for an Observer, whose snapshots are made ahead). An Engine passes
	// its Health method, which does not copy every partition.
	Health func() engine.Health
}

// Collector turns a Snapshot into metrics at each scrape.
type Collector struct {
	snapshot func() engine.Snapshot
	cfg      Config
}

// NewCollector returns a collector over snapshot, typically
// (*engine.Engine).Snapshot.
func NewCollector(snapshot func() engine.Snapshot, cfg Config) *Collector {
	if cfg.Granularity == "" {
		cfg.Granularity = PerPartition
	}
	return &Collector{snapshot: snapshot, cfg: cfg}
}

// exports reports whether the collector exports m.
func (c *Collector) exports(m *Metric) bool {
	return m.Scope == ScopeAlways || string(m.Scope) == string(c.cfg.Granularity)
}

// Describe sends the description of every metric exported.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range registry {
		if c.exports(m) {
			ch <- m.desc
		}
	}
}

func (m *Metric) emit(ch chan<- prometheus.Metric, v float64, labels ...string) {
	vt := prometheus.GaugeValue
	if m.Type == Counter {
		vt = prometheus.CounterValue
	}
	ch <- prometheus.MustNewConstMetric(m.desc, vt, v, labels...)
}

// Collect takes one snapshot and emits its values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	mBuildInfo.emit(ch, 1, c.cfg.Build.Version, c.cfg.Build.Revision, runtime.Version())
	h := healthOf(s)
	for _, chk := range Readiness(h) {
		mReady.emit(ch, boolValue(chk.OK), s.Instance, chk.Name)
	}
	if h.Member.Joined {
		mShards.emit(ch, float64(h.Member.Shards), s.Instance)
	}
	mDestUp.emit(ch, boolValue(!s.DestReach.Down), s.Instance)
	for _, m := range s.Mirrors {
		mMirror.emit(ch, 1, m.Name, m.Source.ID, s.Destination.ID, s.Instance)
		if runsHere(m) {
			collectMirror(ch, m)
		}
		// A snapshot also lists partitions other instances own, with
		// only what __mirror_state recorded; each instance exports its
		// own so that sums over instances count every partition once.
		var own []engine.PartitionSnapshot
		for _, p := range m.Partitions {
			if p.Owner == s.Instance {
				own = append(own, p)
			}
		}
		if c.cfg.Granularity == PerTopic {
			collectTopics(ch, m.Name, own)
		} else {
			for _, p := range own {
				collectPartition(ch, m.Name, p)
			}
		}
		for _, g := range m.Groups {
			mGroupSync.emit(ch, unixSeconds(g.LastSync), m.Name, g.Group)
			mGroupSkip.emit(ch, boolValue(g.Skip != engine.SkipNone), m.Name, g.Group, g.Skip.String())
		}
	}
}

// runsHere reports whether this instance runs the mirror: mirrors only
// other instances run have no latency histograms here.
func runsHere(m engine.MirrorSnapshot) bool { return len(m.Latency.Engine.Counts) > 0 }

// collectMirror emits the series of a mirror this instance runs.
func collectMirror(ch chan<- prometheus.Metric, m engine.MirrorSnapshot) {
	ch <- latencyMetric(mEngineTime, m.Latency.Engine, m.Name)
	ch <- latencyMetric(mProduceRTT, m.Latency.DestinationProduce, m.Name)
	mSourceUp.emit(ch, boolValue(!m.SourceReach.Down), m.Name)
	var since time.Time
	if m.SourceReach.Down {
		since = m.SourceReach.DownSince
	}
	mSourceDown.emit(ch, unixSeconds(since), m.Name)
	for _, b := range m.SourceRoundTrips {
		mSourceRTT.emit(ch, b.RTT.Seconds(), m.Name, strconv.Itoa(int(b.Broker)))
	}
	// Every cause, 0 included, so that rate() sees the first failure.
	for _, cause := range partition.Causes {
		if cause == partition.CauseNone {
			continue
		}
		mFailures.emit(ch, float64(m.Failures[cause]), m.Name, cause.String())
		mRealigns.emit(ch, float64(m.Realignments[cause]), m.Name, cause.String())
	}
	for _, k := range []struct {
		kind string
		at   time.Time
	}{{"topics", m.Meta.Topics.LastSync}, {"configs", m.Meta.Configs.LastSync}, {"acls", m.Meta.ACLs.LastSync}, {"groups", m.GroupSyncLast}} {
		mSyncLast.emit(ch, unixSeconds(k.at), m.Name, k.kind)
	}
}

func collectPartition(ch chan<- prometheus.Metric, mirror string, p engine.PartitionSnapshot) {
	lv := []string{mirror, p.Topic, strconv.Itoa(int(p.Partition))}
	mLagRecords.emit(ch, float64(p.Lag), lv...)
	mLagSeconds.emit(ch, p.LagTime.Seconds(), lv...)
	for _, st := range partition.States {
		mState.emit(ch, boolValue(p.State == st), append(lv, st.String())...)
	}
	mStateCode.emit(ch, float64(p.State), lv...)
	mAttempt.emit(ch, float64(p.Attempt), lv...)
	mRetryable.emit(ch, boolValue(p.State == partition.Failed && p.Retryable), lv...)
	mBytesRate.emit(ch, p.BytesPerSec, lv...)
	mBatchRate.emit(ch, p.BatchesPerSec, lv...)
	mBytes.emit(ch, float64(p.BytesCopied), lv...)
	mBatches.emit(ch, float64(p.BatchesCopied), lv...)
	mFillers.emit(ch, float64(p.FillerBatches), lv...)
	// Unknown offsets (-1) are left out rather than exported as a value a
	// dashboard would plot as a real offset.
	if p.SourceHWM >= 0 {
		mSourceHWM.emit(ch, float64(p.SourceHWM), lv...)
	}
	if p.DestLogEnd >= 0 {
		mDestEnd.emit(ch, float64(p.DestLogEnd), lv...)
	}
	if p.LastOffset >= 0 {
		mLastOffset.emit(ch, float64(p.LastOffset), lv...)
	}
	mOpenTxns.emit(ch, float64(p.OpenTxns), lv...)
}

// topicSums is one topic's partitions summed up.
type topicSums struct {
	states               map[partition.State]int
	lag                  int64
	lagTime              time.Duration
	attempt              int
	bytesRate, batchRate float64
	bytes, batches, fill int64
	txns                 int
}

// collectTopics emits the topic_* series of ps.
func collectTopics(ch chan<- prometheus.Metric, mirror string, ps []engine.PartitionSnapshot) {
	sums := map[string]*topicSums{}
	var topics []string // in the order first seen
	for _, p := range ps {
		t := sums[p.Topic]
		if t == nil {
			t = &topicSums{states: map[partition.State]int{}}
			sums[p.Topic] = t
			topics = append(topics, p.Topic)
		}
		t.states[p.State]++
		t.lag += p.Lag
		t.lagTime = max(t.lagTime, p.LagTime)
		if p.State == partition.Failed {
			t.attempt = max(t.attempt, p.Attempt)
		}
		t.bytesRate += p.BytesPerSec
		t.batchRate += p.BatchesPerSec
		t.bytes += p.BytesCopied
		t.batches += p.BatchesCopied
		t.fill += p.FillerBatches
		t.txns += p.OpenTxns
	}
	for _, topic := range topics {
		t := sums[topic]
		for _, st := range partition.States {
			mTopicStates.emit(ch, float64(t.states[st]), mirror, topic, st.String())
		}
		mTopicLag.emit(ch, float64(t.lag), mirror, topic)
		mTopicLagTime.emit(ch, t.lagTime.Seconds(), mirror, topic)
		mTopicAttempt.emit(ch, float64(t.attempt), mirror, topic)
		mTopicBytesR.emit(ch, t.bytesRate, mirror, topic)
		mTopicBatchR.emit(ch, t.batchRate, mirror, topic)
		mTopicBytes.emit(ch, float64(t.bytes), mirror, topic)
		mTopicBatches.emit(ch, float64(t.batches), mirror, topic)
		mTopicFillers.emit(ch, float64(t.fill), mirror, topic)
		mTopicTxns.emit(ch, float64(t.txns), mirror, topic)
	}
}

// latencyEvery exports every fourth bucket bound of an engine latency
// histogram (the bounds then double): 24 buckets per histogram instead
// of 96.
const latencyEvery = 4

// latencyMetric turns an engine latency histogram into a Prometheus one.
func latencyMetric(m *Metric, h engine.LatencyHistogram, mirror string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Counts)/latencyEvery)
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		if (i+1)%latencyEvery == 0 && i < len(h.Counts)-1 {
			buckets[h.Bound(i).Seconds()] = cum
		}
	}
	return prometheus.MustNewConstHistogram(m.desc, cum, h.Sum.Seconds(), buckets, mirror)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unixSeconds is t as Unix seconds, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / float64(time.Second)
}
