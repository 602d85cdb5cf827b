package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/sandbox"
)

// offsets are per topic, per partition offsets.
type offsets map[string]map[int32]int64

// measurements are what the common steps learn and the report tells; each
// target keeps its own besides. Only the running step touches them.
type measurements struct {
	topics []string // the mirror's topics, from preflight
	t0     time.Time
	t0Snap engine.Snapshot
	t0Ends offsets // B's log ends at T0

	outageAt    time.Time
	lagAtOutage time.Duration // the mirror's worst lag time as the source went away

	stopSent, stopDone time.Time
	lme                map[string]int64 // "topic/p" → last mirrored offset at stop
	openAtStop         map[string]int   // "topic/p" → mirrored transactions the stop found open on B
	// synced is each group's last sync status seen up to the failover: the
	// engine drops a group's status once its topics stop (nothing is synced
	// for stopped topics), and a sync fails while the source is down.
	synced map[string]engine.GroupSnapshot

	firstProduceB, firstConsumeB time.Time

	bWritable bool
	failback  []FailbackPartition
	anomalies []string
}

func (m *measurements) anomaly(format string, args ...any) {
	m.anomalies = append(m.anomalies, fmt.Sprintf(format, args...))
}

// admin is a short-lived admin client of one cluster.
func admin(c cluster) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(c.clientOpts("kmirror-drill", kgo.RetryTimeout(10*time.Second))...)
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

// endOffsets lists the log end offsets of topics on c.
func endOffsets(ctx context.Context, c cluster, topics []string) (offsets, error) {
	cl, adm, err := admin(c)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(lctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets on %s: %w", c, err)
	}
	out := offsets{}
	var firstErr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && firstErr == nil {
			firstErr = fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, firstErr
}

// groupOffsets reads a group's committed offsets on c, by topic and
// partition; a group that never committed there has none.
func groupOffsets(ctx context.Context, c cluster, group string) (offsets, error) {
	cl, adm, err := admin(c)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(fctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return offsets{}, nil // nothing ever committed for the group there
	}
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	out := offsets{}
	for t, ps := range resp {
		for p, o := range ps {
			if o.Err == nil && o.At >= 0 {
				if out[t] == nil {
					out[t] = map[int32]int64{}
				}
				out[t][p] = o.At
			}
		}
	}
	return out, nil
}

// committedIDs reads B from the given offsets to the given ends,
// read_committed, and returns the ids of the demo records it holds: a
// record of an aborted transaction, or of one the failover aborted, is not
// there for a consumer.
func committedIDs(ctx context.Context, c cluster, from, to offsets, timeout time.Duration) (map[string]bool, error) {
	ids := map[string]bool{}
	err := readRange(ctx, c, from, to, true, timeout, func(r *kgo.Record) {
		if id := sandbox.IDOf(r.Value); id != "" {
			ids[id] = true
		}
	})
	return ids, err
}

// readRange reads c's partitions from the given offsets to the given ends
// (read_committed when committed) and hands each data record to fn. Control
// records are read too, so a partition whose tail is transaction markers
// still shows it has been read to its end; a partition that cannot be read
// to its end fails the read rather than leaving records out unnoticed.
func readRange(ctx context.Context, c cluster, from, to offsets, committed bool, timeout time.Duration, fn func(*kgo.Record)) error {
	assign := map[string]map[int32]kgo.Offset{}
	pos := map[string]map[int32]int64{}
	left := 0
	for t, ps := range from {
		for p, o := range ps {
			if to[t][p] > o {
				if assign[t] == nil {
					assign[t], pos[t] = map[int32]kgo.Offset{}, map[int32]int64{}
				}
				assign[t][p], pos[t][p] = kgo.NewOffset().At(o), o
				left++
			}
		}
	}
	if left == 0 {
		return nil
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(c.clientOpts("kmirror-drill-reader",
		kgo.ConsumePartitions(assign), kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fetchErr := map[string]error{} // the last fetch error of each partition, for the timeout's message
	for left > 0 {
		fs := cl.PollFetches(rctx)
		fs.EachError(func(t string, p int32, err error) { fetchErr[ptKey(t, p)] = err })
		if rctx.Err() != nil {
			var behind []string
			for t, ps := range pos {
				for p, o := range ps {
					if o < to[t][p] {
						why := ""
						if err := fetchErr[ptKey(t, p)]; err != nil {
							why = " (" + err.Error() + ")"
						}
						behind = append(behind, fmt.Sprintf("%s at %d of %d%s", ptKey(t, p), o, to[t][p], why))
					}
				}
			}
			slices.Sort(behind)
			return fmt.Errorf("read %s to its log end within %s: %s not read through: %w", c.name, timeout, strings.Join(behind, ", "), rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() && r.Offset < to[r.Topic][r.Partition] {
				fn(r)
			}
			before := pos[r.Topic][r.Partition]
			if r.Offset+1 > before {
				pos[r.Topic][r.Partition] = r.Offset + 1
				if before < to[r.Topic][r.Partition] && r.Offset+1 >= to[r.Topic][r.Partition] {
					left--
				}
			}
		})
	}
	return nil
}

// lostAcks returns the writes side A acknowledged that B does not hold.
// Below B's log end at T0 a write is on B by offset identity (kmirror
// checks every append lands at the source's offset); beyond it, B's
// records are read and matched by id. Transactional topics are matched by
// id throughout: a mirrored transaction still open at the stop is aborted
// on B, whatever offsets its records had. On a compacted topic a record may be
// gone from B because a newer one with its key replaced it, so there a
// write at or below the stop's LME counts as mirrored (compacted topics
// carry no transactions the stop could abort).
func lostAcks(acks []sandbox.Ack, t0Ends offsets, onB map[string]bool, lme map[string]int64) []sandbox.Ack {
	compacted := map[string]bool{}
	for _, t := range sandbox.Topics {
		compacted[t.Name] = t.Compacted
	}
	var lost []sandbox.Ack
	for _, a := range acks {
		if onB[a.ID] || (a.Offset < t0Ends[a.Topic][a.Partition] && !sandbox.IsTransactional(a.Topic)) {
			continue
		}
		if l, ok := lme[ptKey(a.Topic, a.Partition)]; ok && compacted[a.Topic] && a.Offset <= l {
			continue
		}
		lost = append(lost, a)
	}
	return lost
}

func ptKey(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }
