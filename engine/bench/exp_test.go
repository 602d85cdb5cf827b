package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
)

// Temporary experiment: engine phase variants. Deleted before hand-off.
func TestExpEngine(t *testing.T) {
	spec := os.Getenv("EXP")
	if spec == "" {
		t.Skip()
	}
	o := defaultOptions()
	o.size = 200e6
	o.progress = testWriter{t}
	ctx := context.Background()
	b := &bench{opts: o, codec: codecs[o.codec]}
	var err error
	b.src, _ = startCluster(ctx, "s", 3, os.Stderr)
	defer b.src.close()
	b.dst, _ = startCluster(ctx, "d", 3, os.Stderr)
	defer b.dst.close()
	b.srcCl, _ = newClient(b.src.addrs)
	b.dstCl, _ = newClient(b.dst.addrs)
	b.data, err = produceDataset(ctx, b.srcCl, b.src.addrs, "bench-data", o.partitions, b.codec, o.size, o.recordSize)
	if err != nil {
		t.Fatal(err)
	}
	b.data.wireBytes, b.data.batches, _ = readAll(ctx, b.srcCl, b.data, nil)
	for rep := range 2 {
		for _, v := range strings.Split(spec, ";") {
			f := strings.Fields(v)
			fb, _ := strconv.Atoi(f[0])
			nf, _ := strconv.Atoi(f[1])
			mw, _ := strconv.Atoi(f[2])
			if _, err := createTopic(ctx, b.dstCl, b.data.topic, b.data.partitions, mirrorTopicConfigs); err != nil {
				t.Fatal(err)
			}
			eng, _ := engine.New(ctx, engine.Config{Destination: b.dst.addrs, Instance: "bench"})
			s, err := b.measure(ctx, "x", 2, func(ctx context.Context) error {
				if err := eng.StartMirror(ctx, engine.MirrorConfig{Name: fmt.Sprint("m", rep), SourceBootstrap: b.src.addrs, Topics: []string{b.data.topic},
					PartitionFetchBytes: int32(fb), NumFetchers: nf, FetchMaxWait: time.Duration(mw) * time.Millisecond}); err != nil {
					return err
				}
				return waitMirrored(ctx, eng, b.data.ends, 10*time.Millisecond, time.Minute)
			})
			eng.Close()
			deleteTopics(ctx, b.dstCl, b.data.topic)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("fetchBytes=%d fetchers=%d maxwait=%d: %.1f MB/s cpu %.2f s/GB", fb, nf, mw, s.mbPerS(b.data.wireBytes), s.cpuPerGB(b.data.wireBytes))
		}
	}
}

func TestExpLag(t *testing.T) {
	if os.Getenv("EXPLAG") == "" {
		t.Skip()
	}
	o := defaultOptions()
	o.size = 20e6
	o.lagDuration = 6 * time.Second
	o.lagWarmup = 2 * time.Second
	o.progress = testWriter{t}
	ctx := context.Background()
	b := &bench{opts: o, codec: codecs[o.codec]}
	var err error
	b.src, _ = startCluster(ctx, "s", 3, os.Stderr)
	defer b.src.close()
	b.dst, _ = startCluster(ctx, "d", 3, os.Stderr)
	defer b.dst.close()
	b.srcCl, _ = newClient(b.src.addrs)
	b.dstCl, _ = newClient(b.dst.addrs)
	b.data, err = produceDataset(ctx, b.srcCl, b.src.addrs, "bench-data", o.partitions, b.codec, o.size, o.recordSize)
	if err != nil {
		t.Fatal(err)
	}
	b.data.wireBytes, b.data.batches, _ = readAll(ctx, b.srcCl, b.data, nil)
	f, _ := os.Create("/tmp/lagdump.csv")
	defer f.Close()
	t0 := time.Now()
	lagDump = func(p int32, a sent, dst, src time.Time) {
		fmt.Fprintf(f, "%d,%d,%.3f,%.3f,%.3f\n", p, a.base, ms(a.ackAt.Sub(t0)), ms(dst.Sub(a.ackAt)), ms(src.Sub(a.ackAt)))
	}
	if w := os.Getenv("EXPWAIT"); w != "" {
		b.opts.fetchMaxWait, _ = time.ParseDuration(w)
	}
	l, err := b.measureLag(ctx, "x", 40e6)
	t.Logf("%+v %v", l, err)
}
