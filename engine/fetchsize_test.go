package engine_test

import (
	"context"
	"crypto/rand"
	"sync"
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
// would move 25 MiB/s), and the copy is identical. Then, off the happy
// path: the engine restarts (its fetchers measure anew) behind a new
// backlog while the source fails the first fetches of the topic; the
// fetches grow again and the copy is identical again.
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
	e.assertIdentical(topic)
	grew(first, "first copy")
	roundTripShown(t, e.eng.Snapshot(), 40*time.Millisecond)

	e.eng.Close()
	produce()
	h := e.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 4})
	defer h.Remove()
	e.startEngine()
	again := mirrorWidest()
	if hits := h.Hits(); hits != 4 {
		t.Fatalf("NOT_LEADER_FOR_PARTITION answered %d of the restarted engine's fetches, want 4", hits)
	}
	e.assertIdentical(topic)
	grew(again, "after a restart and failed fetches")
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
