// Package metrics exports an engine's Snapshot as Prometheus series. It is
// an adapter, not a second bookkeeping: every scrape takes one Snapshot and
// turns its values into metrics, so /metrics and the console always agree.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

const namespace = "kmirror"

// Label names, one place so series stay joinable across metrics.
const (
	labelMirror    = "mirror"
	labelTopic     = "topic"
	labelPartition = "partition"
	labelState     = "state"
	labelGroup     = "group"
	labelInstance  = "kmirror_instance"
	labelSourceID  = "source_cluster_id"
	labelDestID    = "destination_cluster_id"
)

var partLabels = []string{labelMirror, labelTopic, labelPartition}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	descLagRecords = desc("partition_lag_records", "Source high watermark minus destination log end.", partLabels...)
	descLagSeconds = desc("partition_lag_seconds", "Source max timestamp of the newest batch minus that of the newest mirrored batch (live RPO estimate).", partLabels...)
	descState      = desc("partition_state", "1 for the partition's current state, 0 for every other state.", append(partLabels, labelState)...)
	descStateCode  = desc("partition_state_code", "The partition's state as a number (the order of kmirror's state list; 0 = UNKNOWN).", partLabels...)
	descAttempt    = desc("partition_retry_attempt", "Retry attempt of a FAILED partition, 0 when healthy.", partLabels...)
	descRetryable  = desc("partition_failed_retryable", "1 when a FAILED partition will retry by itself, 0 when it waits for --recover.", partLabels...)
	descBytesRate  = desc("partition_bytes_per_second", "Bytes appended to the destination per second over the last check interval.", partLabels...)
	descBatchRate  = desc("partition_batches_per_second", "Batches appended to the destination per second over the last check interval.", partLabels...)
	descBytes      = desc("partition_bytes_copied_total", "Bytes appended since the partition started on this instance.", partLabels...)
	descBatches    = desc("partition_batches_copied_total", "Batches appended since the partition started on this instance, fillers included.", partLabels...)
	descFillers    = desc("partition_filler_batches_total", "Batches appended only to keep offsets aligned.", partLabels...)
	descSourceHWM  = desc("partition_source_high_watermark", "Source high watermark.", partLabels...)
	descDestEnd    = desc("partition_destination_log_end", "Destination log end offset.", partLabels...)
	descLastOffset = desc("partition_last_mirrored_offset", "Last mirrored source offset (LME).", partLabels...)
	descOpenTxns   = desc("partition_open_transactions", "Mirrored transactions open on the destination partition.", partLabels...)
	descGroupSync  = desc("group_sync_last_timestamp_seconds", "Unix time of the group's last offset sync, 0 when never synced.", labelMirror, labelGroup)
	descGroupSkip  = desc("group_sync_skipped", "1 when the group was skipped in the last sync run (see the console for the reason).", labelMirror, labelGroup)
	descMirror     = desc("mirror_info", "One series per mirror this instance runs, naming the clusters.", labelMirror, labelSourceID, labelDestID, labelInstance)
	descEngineTime = desc("mirror_engine_seconds", "Time from the fetch answer that brought a batch until its Produce was sent to the destination (handling, and waits for a full pipeline or the throttle).", labelMirror)
	descProduceRTT = desc("mirror_destination_produce_seconds", "Round trip of the mirror's Produce requests to the destination.", labelMirror)
	descSourceUp   = desc("mirror_source_up", "1 while the mirror's source cluster answers this instance's checks, 0 after checks in a row failed.", labelMirror)
	descSourceDown = desc("mirror_source_unreachable_since_timestamp_seconds", "Unix time of the first failed check of the current source outage, 0 while the source answers.", labelMirror)
	descDestUp     = desc("destination_up", "1 while the destination cluster answers this instance's checks, 0 after checks in a row failed.", labelInstance)
)

// latencyEvery exports every fourth bucket bound of an engine latency
// histogram (the bounds then double): 24 buckets per histogram instead
// of 96.
const latencyEvery = 4

// latencyMetric turns an engine latency histogram into a Prometheus one.
func latencyMetric(d *prometheus.Desc, h engine.LatencyHistogram, mirror string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Counts)/latencyEvery)
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		if (i+1)%latencyEvery == 0 && i < len(h.Counts)-1 {
			buckets[h.Bound(i).Seconds()] = cum
		}
	}
	return prometheus.MustNewConstHistogram(d, cum, h.Sum.Seconds(), buckets, mirror)
}

// Collector turns a Snapshot into metrics at each scrape.
type Collector struct {
	snapshot func() engine.Snapshot
}

// NewCollector returns a collector over snapshot, typically
// (*engine.Engine).Snapshot.
func NewCollector(snapshot func() engine.Snapshot) *Collector {
	return &Collector{snapshot: snapshot}
}

// Describe sends every metric description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLagRecords, descLagSeconds, descState, descStateCode, descAttempt, descRetryable,
		descBytesRate, descBatchRate, descBytes, descBatches, descFillers, descSourceHWM, descDestEnd, descLastOffset,
		descOpenTxns, descGroupSync, descGroupSkip, descMirror, descEngineTime, descProduceRTT, descSourceUp, descSourceDown, descDestUp} {
		ch <- d
	}
}

// Collect takes one snapshot and emits its values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	ch <- prometheus.MustNewConstMetric(descDestUp, prometheus.GaugeValue, boolValue(!s.DestReach.Down), s.Instance)
	for _, m := range s.Mirrors {
		ch <- prometheus.MustNewConstMetric(descMirror, prometheus.GaugeValue, 1, m.Name, m.Source.ID, s.Destination.ID, s.Instance)
		if len(m.Latency.Engine.Counts) > 0 { // mirrors other instances run have none here
			ch <- latencyMetric(descEngineTime, m.Latency.Engine, m.Name)
			ch <- latencyMetric(descProduceRTT, m.Latency.DestinationProduce, m.Name)
			ch <- prometheus.MustNewConstMetric(descSourceUp, prometheus.GaugeValue, boolValue(!m.SourceReach.Down), m.Name)
			var since float64
			if m.SourceReach.Down {
				since = float64(m.SourceReach.DownSince.UnixNano()) / float64(time.Second)
			}
			ch <- prometheus.MustNewConstMetric(descSourceDown, prometheus.GaugeValue, since, m.Name)
		}
		for _, p := range m.Partitions {
			// A snapshot also lists partitions other instances own, with
			// only what __mirror_state recorded; each instance exports its
			// own so that sums over instances count every partition once.
			if p.Owner != s.Instance {
				continue
			}
			collectPartition(ch, m.Name, p)
		}
		for _, g := range m.Groups {
			var last float64
			if !g.LastSync.IsZero() {
				last = float64(g.LastSync.UnixNano()) / float64(time.Second)
			}
			ch <- prometheus.MustNewConstMetric(descGroupSync, prometheus.GaugeValue, last, m.Name, g.Group)
			ch <- prometheus.MustNewConstMetric(descGroupSkip, prometheus.GaugeValue, boolValue(g.SkipReason != ""), m.Name, g.Group)
		}
	}
}

func collectPartition(ch chan<- prometheus.Metric, mirror string, p engine.PartitionSnapshot) {
	lv := []string{mirror, p.Topic, strconv.Itoa(int(p.Partition))}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge(descLagRecords, float64(p.Lag))
	gauge(descLagSeconds, p.LagTime.Seconds())
	for _, st := range partition.States {
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, boolValue(p.State == st), append(lv, st.String())...)
	}
	gauge(descStateCode, float64(p.State))
	gauge(descAttempt, float64(p.Attempt))
	gauge(descRetryable, boolValue(p.State == partition.Failed && p.Retryable))
	gauge(descBytesRate, p.BytesPerSec)
	gauge(descBatchRate, p.BatchesPerSec)
	counter(descBytes, float64(p.BytesCopied))
	counter(descBatches, float64(p.BatchesCopied))
	counter(descFillers, float64(p.FillerBatches))
	// Unknown offsets (-1) are left out rather than exported as a value a
	// dashboard would plot as a real offset.
	if p.SourceHWM >= 0 {
		gauge(descSourceHWM, float64(p.SourceHWM))
	}
	if p.DestLogEnd >= 0 {
		gauge(descDestEnd, float64(p.DestLogEnd))
	}
	if p.LastOffset >= 0 {
		gauge(descLastOffset, float64(p.LastOffset))
	}
	gauge(descOpenTxns, float64(p.OpenTxns))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the snapshot's series plus the Go runtime and process
// series on a registry of its own, so two engines in one process (tests)
// never collide.
func Handler(snapshot func() engine.Snapshot) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(snapshot), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Server serves /metrics on its own listener until Close.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup
	errc chan error
}

// shutdownTimeout bounds how long Close waits for scrapes in progress.
const shutdownTimeout = 5 * time.Second

// Start listens on addr (host:port; port 0 picks a free one) and serves
// /metrics from snapshot.
func Start(addr string, snapshot func() engine.Snapshot) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(snapshot))
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		errc: make(chan error, 1),
	}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("metrics server %s: %w", ln.Addr(), err)
		}
	})
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, letting scrapes in progress finish, and returns
// the error that ended serving early, if any.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.wg.Wait()
	select {
	case serr := <-s.errc:
		return serr
	default:
	}
	if err != nil {
		return fmt.Errorf("metrics server shutdown: %w", err)
	}
	return nil
}
