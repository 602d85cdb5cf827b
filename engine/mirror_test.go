package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// env is a source and destination cluster pair with an engine attached to
// the destination.
type env struct {
	t        *testing.T
	src, dst *enginetest.Cluster
	srcCl    *kgo.Client
	dstCl    *kgo.Client
	eng      *engine.Engine
	engCfg   func(*engine.Config) // edits the engine's configuration, nil: none
}

func newEnv(t *testing.T) *env {
	t.Helper()
	src, dst := enginetest.Pair(t)
	e := envOn(t, src, dst)
	e.startEngine()
	return e
}

// envOn is an env on the clusters src and dst, with a client of each and
// no engine yet.
func envOn(t *testing.T, src, dst *enginetest.Cluster) *env {
	return &env{t: t, src: src, dst: dst, srcCl: src.Client(t), dstCl: dst.Client(t)}
}

func (e *env) startEngine() {
	e.t.Helper()
	cfg := engine.Config{Destination: e.dst.Addrs(), Instance: "test"}
	if e.engCfg != nil {
		e.engCfg(&cfg)
	}
	eng, err := engine.New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.eng = eng
	e.t.Cleanup(eng.Close)
}

func (e *env) startMirror(topics ...string) {
	e.t.Helper()
	e.startMirrorWith(nil, topics...)
}

func (e *env) startMirrorWith(edit func(*engine.MirrorConfig), topics ...string) {
	e.t.Helper()
	cfg := engine.MirrorConfig{
		Name: "a-to-b", SourceBootstrap: e.src.Addrs(), Topics: topics,
		RetryInitial: 20 * time.Millisecond, RetryMax: time.Second, CheckInterval: 200 * time.Millisecond,
	}
	if edit != nil {
		edit(&cfg)
	}
	if err := e.eng.StartMirror(context.Background(), cfg); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) partitions() []engine.PartitionSnapshot {
	s := e.eng.Snapshot()
	if len(s.Mirrors) == 0 {
		return nil
	}
	return s.Mirrors[0].Partitions
}

// waitCaughtUp waits until every mirrored partition is MIRRORING with its
// destination log end equal to the source's.
func (e *env) waitCaughtUp(topics ...string) {
	e.t.Helper()
	ctx := context.Background()
	enginetest.Wait(e.t, 60*time.Second, func() (bool, string) {
		for _, t := range topics {
			srcEnds, err := enginetest.Ends(ctx, e.srcCl, t)
			if err != nil {
				return false, err.Error()
			}
			dstEnds, err := enginetest.Ends(ctx, e.dstCl, t)
			if err != nil {
				return false, err.Error()
			}
			if !slices.Equal(srcEnds, dstEnds) {
				return false, fmt.Sprintf("%s: source ends %v, destination ends %v; %s", t, srcEnds, dstEnds, e.describe())
			}
		}
		for _, p := range e.partitions() {
			if p.State != partition.Mirroring {
				return false, fmt.Sprintf("%s/%d is %s: %s", p.Topic, p.Partition, p.State, p.Error)
			}
		}
		return true, ""
	})
}

// assertIdentical compares every partition of topics batch by batch and
// record by record.
func (e *env) assertIdentical(topics ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	batches, records := 0, 0
	defer func() { e.t.Logf("compared %d batches, %d records", batches, records) }()
	for _, topic := range topics {
		ends, err := enginetest.Ends(ctx, e.srcCl, topic)
		if err != nil {
			e.t.Fatal(err)
		}
		for p, end := range ends {
			p := int32(p)
			n, err := enginetest.CompareBatches(ctx, e.srcCl, e.dstCl, topic, p)
			if err != nil {
				e.t.Fatalf("batches differ: %v", err)
			}
			batches += n
			if end > 0 && n == 0 {
				e.t.Fatalf("%s/%d: no batch compared", topic, p)
			}
			sr, err := enginetest.Consume(ctx, e.srcCl, topic, p)
			if err != nil {
				e.t.Fatal(err)
			}
			dr, err := enginetest.Consume(ctx, e.dstCl, topic, p)
			if err != nil {
				e.t.Fatal(err)
			}
			records += len(sr)
			if !slices.Equal(sr, dr) {
				for i := range min(len(sr), len(dr)) {
					if sr[i] != dr[i] {
						e.t.Fatalf("%s/%d: consumers read different records: source %+v, destination %+v", topic, p, sr[i], dr[i])
					}
				}
				e.t.Fatalf("%s/%d: consumers read different records (%d on source, %d on destination)", topic, p, len(sr), len(dr))
			}
		}
	}
}

func TestMirrorEveryCodecWhileProducing(t *testing.T) {
	e := newEnv(t)
	codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	var topics []string
	for _, c := range codecs {
		topic := "codec-" + c
		topics = append(topics, topic)
		e.src.CreateTopic(t, topic, 3, nil)
	}
	// Data written before the mirror starts, by idempotent producers.
	for _, c := range codecs {
		enginetest.Produce(t, e.src.Client(t, enginetest.ProducerOpts(c, true)...), "codec-"+c, 3, 200, "before")
	}
	e.startMirror(topics...)

	// Data written while the mirror runs, by idempotent and plain producers.
	var wg sync.WaitGroup
	for _, c := range codecs {
		for _, idem := range []bool{true, false} {
			cl := e.src.Client(t, enginetest.ProducerOpts(c, idem)...)
			wg.Go(func() {
				for round := range 5 {
					enginetest.Produce(t, cl, "codec-"+c, 3, 100, fmt.Sprintf("during-%v-%d", idem, round))
				}
			})
		}
	}
	wg.Wait()
	e.waitCaughtUp(topics...)
	e.assertIdentical(topics...)

	for _, p := range e.partitions() {
		if p.Lag != 0 || p.BatchesCopied == 0 || p.SourceHWM != p.DestLogEnd || p.LastOffset != p.DestLogEnd-1 {
			t.Errorf("%s/%d snapshot: lag %d, batches %d, source hwm %d, destination end %d, last mirrored %d",
				p.Topic, p.Partition, p.Lag, p.BatchesCopied, p.SourceHWM, p.DestLogEnd, p.LastOffset)
		}
	}
}

// describe summarises the partitions' states for failure messages.
func (e *env) describe() string {
	var b strings.Builder
	for _, p := range e.partitions() {
		fmt.Fprintf(&b, "[%s/%d %s %q] ", p.Topic, p.Partition, p.State, p.Error)
	}
	return b.String()
}
