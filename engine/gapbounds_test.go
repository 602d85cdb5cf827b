package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestHostileGapBatchesAreBounded: with mirror.gap.policy=fill a source
// answers the fetch at offset 20 with a CRC-valid crafted batch: one that
// claims two billion offsets, a decompression bomb (256 MiB of zeros in a
// few KiB of zstd), one far beyond the high watermark it reports. Each
// time the partition goes FAILED with cause bad_source_batch naming the
// partition, the offset and the bound, nothing of the batch reaches the
// destination, and the test process allocates far less than the batch
// claims (before: an allocation of the claimed records, 256 MiB of
// decompressed zeros, a million tombstones written to the destination).
func TestHostileGapBatchesAreBounded(t *testing.T) {
	w := batch.Writer{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	reCRC := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:21], batch.Checksum(b))
		return b
	}
	craft := func(codec kgo.CompressionCodec, recs []batch.Record, base int64, lastDelta int32) []byte {
		b, err := batch.Build(codec, time.Now().UnixMilli(), w, recs)
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(b[0:8], uint64(base))
		binary.BigEndian.PutUint32(b[23:27], uint32(lastDelta))
		return reCRC(b)
	}
	two := []batch.Record{{Key: []byte("k"), Value: []byte("a")}, {Key: []byte("k"), Value: []byte("b")}}
	bomb := craft(kgo.ZstdCompression(), []batch.Record{{Key: []byte("k"), Value: make([]byte, 256<<20)}}, 20, 1)
	for _, tc := range []struct {
		name  string
		batch []byte
		hwm   int64
		want  string
	}{
		{"huge LastOffsetDelta", craft(kgo.NoCompression(), two, 20, 1<<31-2), 1 << 31, "claims 2147483647 offsets, more than the 1048576"},
		{"decompression bomb", bomb, 22, fmt.Sprintf("decompresses to more than %d bytes", 64<<20)},
		{"far base offset", craft(kgo.NoCompression(), two, 1_000_000, 1), 22, "beyond the source's high watermark 22"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.src.CreateTopic(t, "hostile", 1, nil)
			enginetest.Produce(t, e.src.Client(t), "hostile", 1, 20, "good")
			e.src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fr := req.(*kmsg.FetchRequest)
				if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].FetchOffset != 20 {
					return nil, nil, false
				}
				e.src.KeepControl() // every retry gets the same batch
				resp := fr.ResponseKind().(*kmsg.FetchResponse)
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = fr.Topics[0].Topic, fr.Topics[0].TopicID
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = tc.hwm, tc.hwm, 0
				rp.RecordBatches = bytes.Clone(tc.batch)
				rt.Partitions = append(rt.Partitions, rp)
				resp.Topics = append(resp.Topics, rt)
				return resp, nil, true
			})
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			e.startMirrorWith(func(c *engine.MirrorConfig) { c.GapFill = true }, "hostile")
			failed := e.waitState("hostile", 0, partition.Failed)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if failed.Cause != partition.CauseBadSourceBatch || !strings.Contains(failed.Error, "hostile/0") || !strings.Contains(failed.Error, tc.want) {
				t.Errorf("FAILED %s %q; want cause bad_source_batch naming hostile/0 and %q", failed.Cause, failed.Error, tc.want)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 128<<20 {
				t.Errorf("the process allocated %d MiB while the partition handled the batch; want under 128", grew>>20)
			}
			enginetest.Wait(t, 30*time.Second, func() (bool, string) {
				_, end, err := enginetest.Offsets(context.Background(), e.dst.Admin(t), "hostile", 0)
				return err == nil && end == 20, fmt.Sprintf("destination end %d (%v), want 20", end, err)
			})
			// Later rounds append nothing either.
			if _, end, err := enginetest.Offsets(context.Background(), e.dst.Admin(t), "hostile", 0); err != nil || end != 20 {
				t.Errorf("destination end %d (%v), want 20", end, err)
			}
		})
	}
}
