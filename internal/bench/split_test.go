package bench

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/batch"
)

// fetchResponse builds the record set of one realistic fetch answer: zstd
// batches of recordsPerBatch data-set records filling a 1 MiB partition
// limit, ending with a partial batch as a broker returns when the next batch
// straddles the limit.
func fetchResponse(tb testing.TB, recordsPerBatch int) []byte {
	tb.Helper()
	values := recordValues(1024, 3)
	const limit = 1 << 20
	var out []byte
	base := int64(0)
	for i := 0; ; i++ {
		recs := make([]batch.Record, recordsPerBatch)
		for j := range recs {
			recs[j] = batch.Record{Key: fmt.Appendf(nil, "user-%06d", j), Value: values[(i*recordsPerBatch+j)%len(values)], TimestampDelta: int64(j)}
		}
		b, err := batch.Build(codecs["zstd"], time.Now().UnixMilli(), batch.Writer{ProducerID: 7, ProducerEpoch: 1, BaseSequence: int32(base)}, recs)
		if err != nil {
			tb.Fatal(err)
		}
		// A fetched batch carries its log position and leader epoch.
		binary.BigEndian.PutUint64(b[0:], uint64(base))
		base += int64(recordsPerBatch)
		if len(out)+len(b) > limit {
			return append(out, b[:len(b)/2]...)
		}
		out = append(out, b...)
	}
}

// BenchmarkSplit measures walking a fetch answer's batches, the first step
// of every copied byte. "headers" only walks; "collect" keeps each batch's
// header and bytes the way the engine's runner does before appending;
// "verify+transform" adds the two CRC32C passes every batch costs (checking
// the source's CRC, then writing the rewritten header's).
func BenchmarkSplit(b *testing.B) {
	for _, shape := range []struct {
		name    string
		records int
	}{{"batch=1000rec", 1000}, {"batch=100rec", 100}, {"batch=10rec", 10}} {
		resp := fetchResponse(b, shape.records)
		b.Run(shape.name+"/headers", func(b *testing.B) {
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := batch.Split(resp, func(h batch.Header, _ []byte) error {
					n += int(h.RecordCount)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatal("no batch split")
			}
		})
		b.Run(shape.name+"/collect", func(b *testing.B) {
			type item struct {
				h batch.Header
				b []byte
			}
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			for b.Loop() {
				var items []item
				if _, err := batch.Split(resp, func(h batch.Header, bb []byte) error {
					items = append(items, item{h, bb})
					return nil
				}); err != nil || len(items) == 0 {
					b.Fatal(err, len(items))
				}
			}
		})
		b.Run(shape.name+"/verify+transform", func(b *testing.B) {
			buf := make([]byte, len(resp))
			w := batch.Writer{ProducerID: 42, ProducerEpoch: 3}
			b.SetBytes(int64(len(resp)))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, resp) // Transform rewrites in place; every round starts from the source bytes
				if _, err := batch.Split(buf, func(_ batch.Header, bb []byte) error {
					if err := batch.VerifyCRC(bb); err != nil {
						return err
					}
					batch.Transform(bb, w)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestFetchResponseShape(t *testing.T) {
	resp := fetchResponse(t, 100)
	batches := 0
	partialAt, err := batch.Split(resp, func(h batch.Header, b []byte) error {
		batches++
		return batch.VerifyCRC(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	if batches < 2 || partialAt < 0 {
		t.Fatalf("%d batches, partial at %d: want several whole batches and a partial one", batches, partialAt)
	}
}
