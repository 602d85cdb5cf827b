package engine_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

// TestFetchesGrowAcrossALongRoundTrip: a partition megabytes behind a
// source 40 ms away asks for more than the configured 1 MiB a fetch (its
// fetcher measured the round trip, and one fetch a round trip of 1 MiB
// would move 25 MiB/s), the snapshot shows that round trip, and the copy
// is identical. Then, off the happy path: the engine restarts (its
// fetchers measure anew) behind a new backlog while the source fails the
// first fetches of the topic; the fetches grow again and the copy is
// identical again. Last, the source gone, no round trip is shown.
func TestFetchesGrowAcrossALongRoundTrip(t *testing.T) {
	src, dst := enginetest.Pair(t)
	link, err := linkproxy.Start(src.Addrs(), linkproxy.Options{RTT: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	e := envOn(t, src, dst)
	e.startEngine()

	const (
		topic      = "far"
		partitions = 2
		perPart    = 4000 // records of 1 KiB that do not compress: 4 MB a partition
	)
	e.src.CreateTopic(t, topic, partitions, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("none", true)...)
	produce := func() {
		t.Helper()
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for range perPart {
				v := make([]byte, 1024)
				_, _ = rand.Read(v)
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce()

	var (
		mu     sync.Mutex
		widest int32 // the most bytes a Fetch asked of one partition
	)
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				widest = max(widest, rp.PartitionMaxBytes)
			}
		}
		return nil, nil, false
	})
	// mirrorWidest copies the topic and returns the widest fetch the mirror
	// sent meanwhile (the comparison after it reads with its own).
	mirrorWidest := func() int32 {
		t.Helper()
		mu.Lock()
		widest = 0
		mu.Unlock()
		e.startMirrorWith(func(c *engine.MirrorConfig) { c.SourceBootstrap = link.Addrs() }, topic)
		e.waitCaughtUp(topic)
		mu.Lock()
		defer mu.Unlock()
		return widest
	}
	grew := func(w int32, when string) {
		t.Helper()
		t.Logf("%s: the widest fetch asked for %d bytes of a partition", when, w)
		if w <= 1<<20 {
			t.Fatalf("%s: across a 40 ms round trip no fetch asked for more than %d bytes of a partition: the fetches did not grow with the round trip", when, w)
		}
	}

	first := mirrorWidest()
	roundTripShown(t, e.eng.Snapshot(), 40*time.Millisecond)
	e.assertIdentical(topic)
	grew(first, "first copy")

	e.eng.Close()
	produce()
	h := e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 4})
	defer h.Remove()
	e.startEngine()
	again := mirrorWidest()
	if hits := h.Hits(); hits != 4 {
		t.Fatalf("NOT_LEADER_FOR_PARTITION answered %d of the restarted engine's fetches, want 4", hits)
	}
	roundTripShown(t, e.eng.Snapshot(), 40*time.Millisecond)
	e.assertIdentical(topic)
	grew(again, "after a restart and failed fetches")

	// The source gone, the last round trip measured is shown no more.
	link.Close()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		m := e.eng.Snapshot().Mirrors[0]
		if !m.SourceReach.Down {
			return false, "the source is not reported unreachable"
		}
		return len(m.SourceRoundTrips) == 0, fmt.Sprintf("the source unreachable, round trips still shown: %+v", m.SourceRoundTrips)
	})
}

// roundTripShown checks that the snapshot shows the round trip measured to
// the source brokers the mirror fetched from, and that none is shorter than
// the link's added round trip.
func roundTripShown(t *testing.T, s engine.Snapshot, added time.Duration) {
	t.Helper()
	if len(s.Mirrors) != 1 {
		t.Fatalf("%d mirrors in the snapshot, want 1", len(s.Mirrors))
	}
	rts := s.Mirrors[0].SourceRoundTrips
	if len(rts) == 0 {
		t.Fatal("the snapshot shows no round trip to any source broker after a copy across the link")
	}
	for _, b := range rts {
		if b.RTT < added {
			t.Errorf("round trip to source broker %d shown as %s, shorter than the link's %s", b.Broker, b.RTT, added)
		}
	}
	t.Logf("round trips shown: %+v", rts)
}

// TestLiveRecordsPassPartitionsCatchingUp: while twelve partitions catch
// up, every Fetch of theirs held by the source, the new records of
// caught-up partitions of the same brokers are copied: the fetch session
// the idle partitions wait in is not held behind the partitions catching
// up. Then the held fetches are answered and the copy is identical.
func TestLiveRecordsPassPartitionsCatchingUp(t *testing.T) {
	e := newEnv(t)
	const (
		busyParts = 12  // 4 a broker, as many as a fetcher's connections
		backlog   = 300 // records a busy partition is behind by, in about 15 batches
	)
	e.src.CreateTopic(t, "busy", busyParts, nil)
	e.src.CreateTopic(t, "live", 3, nil)
	ctx := context.Background()
	topics, err := e.src.Admin(t).ListTopics(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	busyID := topics["busy"].ID
	cl := e.src.Client(t, enginetest.ProducerOpts("none", true)...)
	enginetest.Produce(t, cl, "live", 3, 5, "a")
	// One batch a fetch at first: a busy partition is still behind after
	// the fetch-session answer that brings its first records.
	e.startMirrorWith(func(c *engine.MirrorConfig) { c.PartitionFetchBytes = 1 }, "busy", "live")
	e.waitCaughtUp("busy", "live")

	var (
		holding atomic.Bool
		held    atomic.Int64
	)
	release := make(chan struct{})
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		f := req.(*kmsg.FetchRequest)
		if !holding.Load() || f.MaxWaitMillis != 0 {
			return nil, nil, false // the fetch session's long-polls pass
		}
		for _, rt := range f.Topics {
			if rt.Topic == "busy" || rt.TopicID == busyID {
				held.Add(1)
				e.src.SleepControl(func() {
					select {
					case <-release:
					case <-time.After(time.Minute): // a failed test does not hang
					}
				})
				break
			}
		}
		return nil, nil, false
	})
	holding.Store(true)
	// The backlog in one go, in batches of about 2 KB, then the live
	// records.
	small := e.src.Client(t, append(enginetest.ProducerOpts("none", true), kgo.ProducerBatchMaxBytes(2<<10))...)
	enginetest.Produce(t, small, "busy", busyParts, backlog, "b")
	enginetest.Produce(t, cl, "live", 3, 5, "c")

	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ends, err := enginetest.Ends(ctx, e.dstCl, "live")
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(ends, []int64{10, 10, 10}), fmt.Sprintf("live destination ends %v, want 10 each (%d busy fetches held)", ends, held.Load())
	})
	dstEnds, err := enginetest.Ends(ctx, e.dstCl, "busy")
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range dstEnds {
		if end >= backlog {
			t.Fatalf("busy/%d caught up (destination end %d) while its fetches were held: the test held nothing", p, end)
		}
	}
	if held.Load() == 0 {
		t.Fatal("no fetch of the busy partitions was held")
	}
	t.Logf("live records copied with the busy partitions at %v of %d and %d of their fetches held", dstEnds, backlog, held.Load())
	holding.Store(false)
	close(release)
	e.waitCaughtUp("busy", "live")
	e.assertIdentical("busy", "live")
}
