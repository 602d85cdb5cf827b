package engine_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/metrics"
)

// newReachEnv starts a joined instance mirroring topic from a source whose
// network the test can take down.
func newReachEnv(t *testing.T, topic string, partitions int32) (*env, *engine.Admin, *enginetest.Network) {
	t.Helper()
	n := enginetest.NewNetwork()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(n.Listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	e, adm := newStateEnvWith(t, src, dst, topic, partitions, fastCheckpoints)
	return e, adm, n
}

// mirrorOf returns the snapshot of mirror a-to-b.
func mirrorOf(t *testing.T, eng *engine.Engine) engine.MirrorSnapshot {
	t.Helper()
	for _, m := range eng.Snapshot().Mirrors {
		if m.Name == "a-to-b" {
			return m
		}
	}
	t.Fatal("no mirror a-to-b in the snapshot")
	return engine.MirrorSnapshot{}
}

// TestSourceUnreachableIsFailedAndRecovers takes every source broker off
// the network. Within a few checks the partitions are FAILED, retryable,
// naming the unreachable source, and stay FAILED with a growing retry
// count (persisted too) while the snapshot and the metrics say the source
// is down and the lag in time grows; the records behind are unknown. When
// the source answers again they mirror again by themselves, identical.
func TestSourceUnreachableIsFailedAndRecovers(t *testing.T) {
	e, adm, n := newReachEnv(t, "orders", 3)
	enginetest.Produce(t, e.srcCl, "orders", 3, 30, "before")
	e.waitCaughtUp("orders")

	n.Down("")
	attempts := map[int32]int{}
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ok := 0
		for _, p := range e.partitions() {
			if p.State == partition.Failed && p.Retryable && p.Cause == partition.CauseSourceUnreachable &&
				strings.Contains(p.Error, "source cluster unreachable: "+strings.Join(e.src.Addrs(), ",")) {
				attempts[p.Partition] = p.Attempt
				ok++
			}
		}
		return ok == 3, e.describe()
	})
	m := mirrorOf(t, e.eng)
	if !m.SourceReach.Down || m.SourceReach.DownSince.IsZero() || m.SourceReach.Error == "" {
		t.Fatalf("snapshot source reachability %+v, want down", m.SourceReach)
	}
	// The retries go on, counted, without leaving FAILED.
	var lagTime time.Duration
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		grown := 0
		for _, p := range e.partitions() {
			if p.State != partition.Failed {
				t.Fatalf("%s/%d left FAILED while the source is down: %s %s", p.Topic, p.Partition, p.State, p.Error)
			}
			if p.Attempt >= attempts[p.Partition]+2 {
				grown++
			}
			if p.Lag != 0 || p.SourceHWM != -1 {
				t.Fatalf("%s/%d shows lag %d (source high watermark %d) with the source down", p.Topic, p.Partition, p.Lag, p.SourceHWM)
			}
			lagTime = p.LagTime
		}
		return grown == 3, fmt.Sprintf("attempts then %v: %s", attempts, e.describe())
	})
	if lagTime < time.Second {
		t.Fatalf("lag time %s after seconds of outage", lagTime)
	}
	cat, err := adm.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		rec := cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "orders", Partition: p}]
		if rec.State != partition.Failed || !rec.Retryable || rec.Attempt < attempts[p]+1 {
			t.Fatalf("persisted orders/%d: %s retryable %v attempt %d (first seen %d)", p, rec.State, rec.Retryable, rec.Attempt, attempts[p])
		}
	}
	srv := httptest.NewServer(metrics.Handler(e.eng.Snapshot, metrics.Config{}))
	defer srv.Close()
	body := get(t, srv.URL)
	if !strings.Contains(body, `kmirror_mirror_source_up{mirror="a-to-b"} 0`) || !strings.Contains(body, `kmirror_destination_up{kmirror_instance="one"} 1`) {
		t.Fatalf("metrics do not say the source is down:\n%s", grep(body, "kmirror_"))
	}

	n.Up()
	e.waitAll(3, partition.Mirroring)
	enginetest.Produce(t, e.srcCl, "orders", 3, 20, "after")
	e.waitCaughtUp("orders")
	e.assertIdentical("orders")
	if m := mirrorOf(t, e.eng); m.SourceReach.Down {
		t.Fatalf("source still down in the snapshot: %+v", m.SourceReach)
	}
	if body := get(t, srv.URL); !strings.Contains(body, `kmirror_mirror_source_up{mirror="a-to-b"} 1`) {
		t.Fatalf("metrics do not say the source is back:\n%s", grep(body, "_up"))
	}
}

// TestStopWithSourceGone: the source and the instance are lost together;
// an instance started during the outage opens the mirror from
// __mirror_state alone and fails over every partition: STOPPED, with the
// last mirrored offset the destination holds, the topic's writer epoch
// bumped (it never fenced them). Also when the partitions come to it by takeover
// from another instance that died in the outage.
func TestStopWithSourceGone(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("takeover=%v", takeover), func(t *testing.T) {
			e, adm, n := newReachEnv(t, "orders", 4)
			enginetest.Produce(t, e.srcCl, "orders", 4, 40, "before")
			e.waitCaughtUp("orders")
			waitCheckpointed(t, e, adm, "orders", 4)
			ends, err := enginetest.Ends(context.Background(), e.dstCl, "orders")
			if err != nil {
				t.Fatal(err)
			}
			n.Down("")
			var survivor *engine.Engine
			if takeover {
				// A second instance is up during the outage; the first dies.
				survivor = e.joinInstance("two")
				e.eng.Close()
			} else {
				e.eng.Close()
				survivor = e.joinInstance("two")
			}
			e.eng = survivor
			inits := countWriterInits(e.dst, "orders")
			if _, err := adm.Control(context.Background(), engine.CmdStop, "a-to-b", nil, false); err != nil {
				t.Fatal(err)
			}
			recs := waitPersisted(t, adm, "orders", 4, partition.Stopped, "two")
			// The survivor never fenced the partitions (the source is
			// away, none aligned): the stop bumps the topic's writer
			// epoch, once for all four.
			if n := inits.Load(); n != 1 {
				t.Fatalf("the stop sent %d InitProducerID requests for the topic it never fenced, want 1", n)
			}
			for p, rec := range recs {
				if rec.LastOffset != ends[p]-1 {
					t.Fatalf("orders/%d STOPPED with last mirrored offset %d, destination end %d", p, rec.LastOffset, ends[p])
				}
			}
			// The destination is writable.
			enginetest.Produce(t, e.dstCl, "orders", 4, 1, "on-b")
		})
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test server on loopback
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grep returns the lines of s containing sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkStopSourceGone measures a failover of 1,000 partitions (10
// topics of 100) with every source broker unreachable, right after it went
// away and once every partition is FAILED for it: from the stop command
// until every partition is STOPPED. The goal is at most 2 s (stop-s).
func BenchmarkStopSourceGone(b *testing.B) {
	for _, failedFirst := range []bool{false, true} {
		b.Run(fmt.Sprintf("failed-first=%v", failedFirst), func(b *testing.B) { benchStopSourceGone(b, failedFirst) })
	}
}

// benchStopSourceGone stops right after the source went away, or once
// every partition is FAILED for it (failedFirst).
func benchStopSourceGone(b *testing.B, failedFirst bool) {
	const topics, per = 10, 100
	b.StopTimer()
	for range b.N {
		n := enginetest.NewNetwork()
		src := enginetest.NewCluster(b, "kmirror-test-source", kfake.ListenFn(n.Listen))
		dst := enginetest.NewCluster(b, "kmirror-test-destination")
		var names []string
		cl := src.Client(b, enginetest.ProducerOpts("zstd", true)...)
		for i := range topics {
			name := fmt.Sprintf("stop-%02d", i)
			names = append(names, name)
			src.CreateTopic(b, name, per, nil)
			enginetest.Produce(b, cl, name, per, 1, "r")
		}
		eng, err := engine.New(context.Background(), engine.Config{Destination: dst.Addrs(), Instance: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.StartMirror(context.Background(), engine.MirrorConfig{Name: "a-to-b", SourceBootstrap: src.Addrs(), Topics: names}); err != nil {
			b.Fatal(err)
		}
		states := func(want partition.State) (bool, string) {
			got, seen := 0, map[string]int{}
			for _, m := range eng.Snapshot().Mirrors {
				for _, p := range m.Partitions {
					seen[fmt.Sprintf("%s end %d", p.State, p.DestLogEnd)]++
					if p.State == want && (want != partition.Mirroring || p.DestLogEnd == 1) {
						got++
					}
				}
			}
			return got == topics*per, fmt.Sprintf("%d of %d partitions %s: %v", got, topics*per, want, seen)
		}
		enginetest.Wait(b, 2*time.Minute, func() (bool, string) { return states(partition.Mirroring) })
		n.Down("")
		if failedFirst {
			enginetest.Wait(b, 2*time.Minute, func() (bool, string) { return states(partition.Failed) })
		}
		b.StartTimer()
		start := time.Now()
		if err := eng.Control(context.Background(), engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
			b.Fatal(err)
		}
		enginetest.Wait(b, 2*time.Minute, func() (bool, string) { return states(partition.Stopped) })
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "stop-s")
		eng.Close()
	}
}

// TestRetryInsideMirroringIsRecorded: a retry MIRRORING makes on its own
// (the source answers Fetch with NOT_LEADER_OR_FOLLOWER) is shown in the
// snapshot and written to the partition's record with its attempt and
// cause, so --describe shows a partition that is not moving; progress
// clears both.
func TestRetryInsideMirroringIsRecorded(t *testing.T) {
	src, dst := enginetest.Pair(t)
	e, adm := newStateEnvWith(t, src, dst, "orders", 1, fastCheckpoints)
	enginetest.Produce(t, e.srcCl, "orders", 1, 20, "before")
	e.waitCaughtUp("orders")
	fault := e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "orders", Err: kerr.NotLeaderForPartition, Count: -1})
	ctx := context.Background()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		cat, err := adm.Catalog(ctx)
		if err != nil {
			return false, err.Error()
		}
		rec := cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "orders", Partition: 0}]
		return rec.State == partition.Mirroring && rec.Attempt >= 2 && strings.Contains(rec.Error, "NOT_LEADER"),
			fmt.Sprintf("record %s attempt %d %q; %s", rec.State, rec.Attempt, rec.Error, e.describe())
	})
	fault.Remove()
	enginetest.Produce(t, e.srcCl, "orders", 1, 20, "after")
	e.waitCaughtUp("orders")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		cat, err := adm.Catalog(ctx)
		if err != nil {
			return false, err.Error()
		}
		rec := cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "orders", Partition: 0}]
		ps := e.partitions()[0]
		return rec.Attempt == 0 && rec.Error == "" && ps.Attempt == 0 && ps.Error == "",
			fmt.Sprintf("record attempt %d %q, snapshot attempt %d %q", rec.Attempt, rec.Error, ps.Attempt, ps.Error)
	})
}
