package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestSourceLogStartAboveZero starts a mirror on a source whose log start
// retention moved: inside a batch, on a batch boundary, and to the end of
// the log. The destination's log start and every offset match the source's.
func TestSourceLogStartAboveZero(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "trimmed", 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "trimmed", 3, 100, "old") // batches 0..99
	enginetest.Produce(t, cl, "trimmed", 3, 200, "mid") // batches from 100
	starts := []int64{120, 100, 300}
	for p, off := range starts {
		if err := e.src.DeleteRecords("trimmed", int32(p), off); err != nil {
			t.Fatal(err)
		}
	}
	e.startMirror("trimmed")
	e.waitCaughtUp("trimmed")

	ctx := context.Background()
	for p, want := range starts {
		start, _, err := enginetest.Offsets(ctx, e.dst.Admin(t), "trimmed", int32(p))
		if err != nil {
			t.Fatal(err)
		}
		if start != want {
			t.Fatalf("trimmed/%d: destination log start %d, source %d", p, start, want)
		}
	}
	enginetest.Produce(t, cl, "trimmed", 3, 50, "new")
	e.waitCaughtUp("trimmed")
	e.assertIdentical("trimmed")
	for _, p := range e.partitions() {
		if p.FillerBatches == 0 {
			t.Errorf("%s/%d: no filler batch counted", p.Topic, p.Partition)
		}
	}
}

func otherNode(leader int32) int32 { return (leader + 1) % 3 }

func TestLeaderMovesMidStream(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "moving", 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	enginetest.Produce(t, cl, "moving", 3, 100, "first")
	e.startMirror("moving")
	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "moving")

	e.waitMirroredAtLeast("moving", 3, 200)
	for p := range int32(3) {
		if err := e.src.MoveTopicPartition("moving", p, otherNode(e.src.LeaderFor("moving", p))); err != nil {
			t.Fatal(err)
		}
	}
	e.waitMirroredAtLeast("moving", 3, 400)
	for p := range int32(3) {
		if err := e.dst.MoveTopicPartition("moving", p, otherNode(e.dst.LeaderFor("moving", p))); err != nil {
			t.Fatal(err)
		}
	}
	e.waitMirroredAtLeast("moving", 3, 600)
	close(stop)
	wg.Wait()
	e.waitCaughtUp("moving")
	e.assertIdentical("moving")
	for _, p := range e.partitions() {
		if p.SourceEpoch < 1 {
			t.Errorf("%s/%d: source epoch %d after a leader move", p.Topic, p.Partition, p.SourceEpoch)
		}
	}
}

// waitMirroredAtLeast waits until every partition's destination end reaches n.
func (e *env) waitMirroredAtLeast(topic string, partitions int, n int64) {
	e.t.Helper()
	enginetest.Wait(e.t, 60*time.Second, func() (bool, string) {
		ends, err := enginetest.Ends(context.Background(), e.dstCl, topic)
		if err != nil || len(ends) < partitions {
			return false, fmt.Sprintf("ends %v: %v", ends, err)
		}
		for p, end := range ends {
			if end < n {
				return false, fmt.Sprintf("%s/%d at %d, want %d; %s", topic, p, end, n, e.describe())
			}
		}
		return true, ""
	})
}

func TestDestinationProduceFaults(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "faulty", 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("snappy", true)...)
	enginetest.Produce(t, cl, "faulty", 3, 100, "first")
	e.startMirror("faulty")
	e.waitCaughtUp("faulty")

	for _, fault := range []*kerr.Error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend} {
		h := e.dst.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "faulty", Err: fault, Count: 4})
		enginetest.Produce(t, cl, "faulty", 3, 100, fault.Message)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := h.Wait(ctx, 1); err != nil {
			t.Fatalf("%s fault never hit: %v", fault.Message, err)
		}
		cancel()
		e.waitCaughtUp("faulty")
		h.Remove()
	}
	e.assertIdentical("faulty")
}

func TestRestartMidStreamResumesWithoutDuplicates(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "restart", 3, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("gzip", true)...)
	enginetest.Produce(t, cl, "restart", 3, 100, "first")
	e.startMirror("restart")
	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, cl, 3, 50, stop, "restart")
	e.waitMirroredAtLeast("restart", 3, 150)

	e.eng.Close() // mid-stream: appends may be in flight
	e.startEngine()
	e.startMirror("restart")
	e.waitMirroredAtLeast("restart", 3, 400)
	close(stop)
	wg.Wait()
	e.waitCaughtUp("restart")
	e.assertIdentical("restart")
}

// TestForeignWriteFailsPartition writes straight to a destination partition.
// An idle partition notices on the destination log-end check; a busy one on
// the offset its next append is given. Either way the partition stops with
// both offsets in the error and nothing more is appended.
func TestForeignWriteFailsPartition(t *testing.T) {
	for _, tc := range []struct {
		name          string
		checkInterval time.Duration
		endAfter      int64  // destination end of partition 1 once FAILED
		where         string // what the error says showed the offset
		others        int    // more topics, of 3 partitions each, mirrored alongside
	}{
		{"idle partition, log-end check", 100 * time.Millisecond, 51, "(its log end, by the destination check)", 0},
		// A mirror larger than the watcher's budget is checked a topic
		// at a time here: the check still comes round to the write.
		{"idle partition of a mirror checked in rounds", 100 * time.Millisecond, 51, "(its log end, by the destination check)", 4},
		{"busy partition, append offset check", time.Hour, 61, "(the offset a Produce answer gave)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.src.CreateTopic(t, "guarded", 2, nil)
			cl := e.src.Client(t, enginetest.ProducerOpts("none", true)...)
			enginetest.Produce(t, cl, "guarded", 2, 50, "first")
			topics := []string{"guarded"}
			for i := range tc.others {
				name := fmt.Sprintf("other-%d", i)
				e.src.CreateTopic(t, name, 3, nil)
				enginetest.Produce(t, cl, name, 3, 5, "first")
				topics = append(topics, name)
			}
			if tc.others > 0 {
				t.Cleanup(engine.SetWatchBudget(1))
			}
			e.startMirrorWith(func(c *engine.MirrorConfig) { c.CheckInterval = tc.checkInterval }, topics...)
			e.waitCaughtUp(topics...)

			foreign := e.dst.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err := foreign.ProduceSync(context.Background(), &kgo.Record{Topic: "guarded", Partition: 1, Value: []byte("intruder")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if tc.checkInterval == time.Hour {
				enginetest.Produce(t, cl, "guarded", 2, 10, "second")
			}
			failed := e.waitState("guarded", 1, partition.Failed)
			want := "expected offset 50, destination has 51"
			if !strings.Contains(failed.Error, "foreign write") || !strings.Contains(failed.Error, want) || failed.Retryable {
				t.Fatalf("error %q (retryable %v), want a non-retryable foreign write naming %q", failed.Error, failed.Retryable, want)
			}
			if !strings.Contains(failed.Error, tc.where) {
				t.Errorf("error %q does not say what showed the offset: want %q", failed.Error, tc.where)
			}

			// The other partition keeps mirroring; partition 1 gets nothing more.
			enginetest.Produce(t, cl, "guarded", 2, 10, "third")
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				src, _ := enginetest.Ends(context.Background(), e.srcCl, "guarded")
				dst, err := enginetest.Ends(context.Background(), e.dstCl, "guarded")
				return err == nil && len(src) == 2 && dst[0] == src[0], fmt.Sprintf("destination ends %v (%v), source ends %v", dst, err, src)
			})
			e.waitState("guarded", 0, partition.Mirroring)
			_, end, err := enginetest.Offsets(context.Background(), e.dst.Admin(t), "guarded", 1)
			if err != nil || end != tc.endAfter {
				t.Fatalf("destination end of partition 1 = %d (%v), want %d", end, err, tc.endAfter)
			}
		})
	}
}

// waitState waits until a partition of the running mirror is in state.
func (e *env) waitState(topic string, p int32, state partition.State) engine.PartitionSnapshot {
	e.t.Helper()
	var got engine.PartitionSnapshot
	enginetest.Wait(e.t, 30*time.Second, func() (bool, string) {
		for _, ps := range e.partitions() {
			if ps.Topic == topic && ps.Partition == p {
				got = ps
				return ps.State == state, fmt.Sprintf("%s/%d is %s (%s), want %s", topic, p, ps.State, ps.Error, state)
			}
		}
		return false, fmt.Sprintf("%s/%d not in snapshot", topic, p)
	})
	return got
}

func TestCorruptSourceBatchIsNeverAppended(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "corrupt", 1, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "corrupt", 1, 20, "good")

	// The source answers the first fetch at offset 20 with a batch whose
	// payload was damaged after its CRC was computed.
	// Handling the request drops the control, so it answers exactly once.
	// The runner asks for offset 20 while it still appends the 20 good
	// records; the answer waits until they are on the destination, so
	// the destination's end is settled when the partition shows FAILED.
	dstAdm := e.dst.Admin(t)
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].FetchOffset != 20 {
			return nil, nil, false
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, end, err := enginetest.Offsets(context.Background(), dstAdm, "corrupt", 0)
			if err == nil && end == 20 {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = fmt.Errorf("its end is %d", end)
				}
				return nil, fmt.Errorf("the 20 good records did not reach the destination: %w", err), true
			}
		}
		b, err := batch.Build(kgo.ZstdCompression(), time.Now().UnixMilli(), batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			[]batch.Record{{Value: []byte("a")}, {Value: []byte("b")}})
		if err != nil {
			return nil, err, true
		}
		b[len(b)-1] ^= 0xff
		b[7] = 20 // base offset 20
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = fr.Topics[0].Topic, fr.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 22, 22, 0
		rp.RecordBatches = b
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	e.startMirror("corrupt")

	failed := e.waitState("corrupt", 0, partition.Failed)
	if !strings.Contains(failed.Error, "CRC mismatch at offset 20") {
		t.Fatalf("error %q does not report the CRC mismatch at offset 20", failed.Error)
	}
	_, end, err := enginetest.Offsets(context.Background(), dstAdm, "corrupt", 0)
	if err != nil || end != 20 {
		t.Fatalf("destination end %d (%v), want 20: the corrupt batch must not be appended", end, err)
	}
}

// TestFailedRetryBacksOffThenRecovers injects a persistent fetch error: the
// partition goes FAILED and retries with exponentially growing delays
// (jitter pinned, so the delays are exact), then mirrors again once the
// fault is gone and its retry count is reset.
func TestFailedRetryBacksOffThenRecovers(t *testing.T) {
	src, dst := enginetest.Pair(t)
	eng, err := engine.New(context.Background(), engine.Config{Destination: dst.Addrs(), Jitter: func() float64 { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	src.CreateTopic(t, "flaky", 1, nil)
	cl := src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, cl, "flaky", 1, 10, "first")
	fault := src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "flaky", Err: kerr.NotLeaderForPartition, Count: -1})
	if err := eng.StartMirror(context.Background(), engine.MirrorConfig{
		Name: "a-to-b", SourceBootstrap: src.Addrs(), Topics: []string{"flaky"},
		RetryInitial: 10 * time.Millisecond, RetryMax: 10 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}

	retry := regexp.MustCompile(`\(retry (\d+) of 20 in (\d+)ms\)`)
	var delays []int
	deadline := time.After(60 * time.Second)
	for len(delays) < 4 {
		select {
		case ev := <-eng.Events():
			if m := retry.FindStringSubmatch(ev.Message); m != nil {
				n, _ := strconv.Atoi(m[1])
				d, _ := strconv.Atoi(m[2])
				if n != len(delays)+1 {
					t.Fatalf("retry %d announced after %d retries: %q", n, len(delays), ev.Message)
				}
				delays = append(delays, d)
			}
		case <-deadline:
			t.Fatalf("only %d retries announced: %v", len(delays), delays)
		}
	}
	for i, want := range []int{10, 20, 40, 80} {
		if delays[i] != want {
			t.Fatalf("retry delays %v, want 10 20 40 80 ms (doubling from the initial backoff)", delays)
		}
	}
	fault.Remove()
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ps := eng.Snapshot().Mirrors[0].Partitions[0]
		return ps.State == partition.Mirroring && ps.DestLogEnd == 10 && ps.Attempt == 0,
			fmt.Sprintf("%s at %d, attempt %d: %s", ps.State, ps.DestLogEnd, ps.Attempt, ps.Error)
	})
}

// TestLogAppendTimeSourceBatch: a source topic with
// message.timestamp.type=LogAppendTime hands out batches flagged
// LogAppendTime whose max timestamp is the broker's append time. A client
// cannot write such a batch to a CreateTime topic (Kafka clears the flag;
// kfake corrupts the CRC), so kmirror clears the flag: the destination keeps
// the producer's record timestamps (base + delta), the batch's max
// timestamp and the payload bytes. (kfake does not apply the topic setting,
// so the source's answer is injected.)
func TestLogAppendTimeSourceBatch(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "lat", 1, nil)
	const createTs, appendTs = int64(1_700_000_000_000), int64(1_700_000_555_000)
	b, err := batch.Build(kgo.Lz4Compression(), createTs, batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]batch.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2"), TimestampDelta: 7}})
	if err != nil {
		t.Fatal(err)
	}
	b[22] |= batch.AttrLogAppendTime
	binary.BigEndian.PutUint64(b[35:], uint64(appendTs))
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b))
	payload := append([]byte(nil), b[batch.HeaderSize:]...)
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].FetchOffset != 0 {
			return nil, nil, false
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = fr.Topics[0].Topic, fr.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 2, 2, 0
		rp.RecordBatches = append([]byte(nil), b...)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	e.startMirror("lat")
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		ends, err := enginetest.Ends(context.Background(), e.dstCl, "lat")
		return err == nil && ends[0] == 2, fmt.Sprintf("destination ends %v %v", ends, err)
	})
	got, err := enginetest.ReadBatches(context.Background(), e.dstCl, "lat", 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("destination batches %v, %v", got, err)
	}
	h := got[0].Header
	if h.Attributes&batch.AttrLogAppendTime != 0 || h.BaseTimestamp != createTs || h.MaxTimestamp != appendTs || !bytes.Equal(got[0].Payload, payload) {
		t.Fatalf("destination batch attributes %#x, base ts %d, max ts %d, payload equal %v", h.Attributes, h.BaseTimestamp, h.MaxTimestamp, bytes.Equal(got[0].Payload, payload))
	}
	recs, err := enginetest.Consume(context.Background(), e.dstCl, "lat", 0)
	if err != nil || len(recs) != 2 || recs[0].Timestamp != createTs || recs[1].Timestamp != createTs+7 {
		t.Fatalf("destination records %+v (%v): want the producer's timestamps", recs, err)
	}
}

// TestFetchNamesEpochOfLastFetchedBatch: every Fetch names as its
// LastFetchedEpoch the source epoch of the batch just before its offset,
// also the fetch the engine sends ahead while it still appends the
// previous answer. A broker checks that epoch (KIP-320/595): naming an
// older one after a leader change would make a real broker report a
// divergence that is not there, and the partition would fail as an
// unclean election.
func TestFetchNamesEpochOfLastFetchedBatch(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "epochs", 1, nil)
	cl := e.src.Client(t, enginetest.ProducerOpts("lz4", true)...)
	enginetest.Produce(t, cl, "epochs", 1, 30, "e0")
	e.startMirror("epochs")
	e.waitCaughtUp("epochs")

	type fetched struct {
		offset int64
		epoch  int32
	}
	var mu sync.Mutex
	var seen []fetched
	watching := true // until the test's own consumer reads the source
	e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.src.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !watching {
			return nil, nil, false
		}
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.FetchOffset > 0 {
					seen = append(seen, fetched{rp.FetchOffset, rp.LastFetchedEpoch})
				}
			}
		}
		return nil, nil, false
	})
	for round := range 3 {
		if err := e.src.MoveTopicPartition("epochs", 0, otherNode(e.src.LeaderFor("epochs", 0))); err != nil {
			t.Fatal(err)
		}
		enginetest.Produce(t, cl, "epochs", 1, 30, fmt.Sprintf("e%d", round+1))
		e.waitCaughtUp("epochs")
	}

	mu.Lock()
	watching = false
	mu.Unlock()

	// The source epoch of every offset, from a consumer.
	ctx := context.Background()
	cons := e.src.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"epochs": {0: kgo.NewOffset().AtStart()}}))
	epochOf := map[int64]int32{}
	for len(epochOf) < 120 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { epochOf[r.Offset] = r.LeaderEpoch })
	}
	if epochOf[119] < 3 {
		t.Fatalf("the last record has epoch %d: the leader moves did not bump the epoch", epochOf[119])
	}
	checked := 0
	for _, f := range seen {
		want, ok := epochOf[f.offset-1]
		if !ok {
			continue
		}
		checked++
		if f.epoch != want {
			t.Errorf("Fetch at %d named LastFetchedEpoch %d; the batch before it has epoch %d", f.offset, f.epoch, want)
		}
	}
	if checked == 0 {
		t.Fatal("no Fetch inside the log was seen")
	}
}
