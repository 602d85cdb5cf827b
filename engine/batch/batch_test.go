package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
	id    int8
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:            fmt.Appendf(nil, "key-%d", i),
			Value:          bytes.Repeat(fmt.Appendf(nil, "value-%d;", i), 20),
			Headers:        []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}},
			TimestampDelta: int64(i),
		}
	}
	return recs
}

// sourceBatch builds a batch as a broker would return it from a fetch: a real
// base offset, a leader epoch, a foreign producer identity.
func sourceBatch(t testing.TB, codec kgo.CompressionCodec, n int, base int64) []byte {
	t.Helper()
	b, err := Build(codec, 1_700_000_000_000, Writer{ProducerID: 4242, ProducerEpoch: 3, BaseSequence: 77}, testRecords(n))
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 9)
	return b
}

// decode parses b with franz-go and returns its records, failing on a bad CRC.
func decode(t *testing.T, b []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("franz-go cannot read batch: %v", err)
	}
	if err := VerifyCRC(b); err != nil {
		t.Fatalf("CRC: %v", err)
	}
	raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
	if err != nil {
		t.Fatalf("decompress: %v", err)
	}
	recs := make([]kmsg.Record, rb.NumRecords)
	for i := range recs {
		if err := recs[i].ReadFrom(raw); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		raw = raw[int(recs[i].Length)+varintLen(int64(recs[i].Length)):]
	}
	if len(raw) != 0 {
		t.Fatalf("%d bytes left after records", len(raw))
	}
	return rb, recs
}

func TestParseHeader(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := sourceBatch(t, c.codec, 10, 500)
			h, err := ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.BaseOffset != 500 || h.LeaderEpoch != 9 || h.Magic != 2 || h.Codec() != c.id ||
				h.LastOffsetDelta != 9 || h.RecordCount != 10 || h.ProducerID != 4242 ||
				h.ProducerEpoch != 3 || h.BaseSequence != 77 || h.BaseTimestamp != 1_700_000_000_000 ||
				h.MaxTimestamp != 1_700_000_000_009 || h.Size() != len(b) || h.NextOffset() != 510 || h.HasGap() {
				t.Fatalf("unexpected header %+v", h)
			}
		})
	}
}

func TestTransformRewritesOnlyHeaderFields(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			src := sourceBatch(t, c.codec, 25, 1234)
			// A LogAppendTime batch from the source: the bit must be cleared.
			binary.BigEndian.PutUint16(src[offAttributes:], binary.BigEndian.Uint16(src[offAttributes:])|AttrLogAppendTime)
			binary.BigEndian.PutUint32(src[offCRC:], Checksum(src))
			orig := append([]byte(nil), src...)

			Transform(src, Writer{ProducerID: 99, ProducerEpoch: 5, BaseSequence: 1000})

			rb, recs := decode(t, src)
			if rb.FirstOffset != 0 {
				t.Errorf("base offset %d, want 0", rb.FirstOffset)
			}
			if rb.ProducerID != 99 || rb.ProducerEpoch != 5 || rb.FirstSequence != 1000 {
				t.Errorf("writer identity %d/%d/%d, want 99/5/1000", rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence)
			}
			if rb.Attributes&AttrLogAppendTime != 0 {
				t.Errorf("LogAppendTime bit still set: %#x", rb.Attributes)
			}
			if int8(rb.Attributes&7) != c.id {
				t.Errorf("codec %d, want %d", rb.Attributes&7, c.id)
			}
			if rb.PartitionLeaderEpoch != 9 || rb.LastOffsetDelta != 24 || rb.NumRecords != 25 ||
				rb.FirstTimestamp != 1_700_000_000_000 || rb.MaxTimestamp != 1_700_000_000_024 {
				t.Errorf("untouched fields changed: %+v", rb)
			}
			if !bytes.Equal(src[HeaderSize:], orig[HeaderSize:]) {
				t.Errorf("payload bytes changed")
			}
			if !bytes.Equal(src[offLength:offCRC], orig[offLength:offCRC]) {
				t.Errorf("length, leader epoch or magic changed")
			}
			want := testRecords(25)
			for i, r := range recs {
				if !bytes.Equal(r.Key, want[i].Key) || !bytes.Equal(r.Value, want[i].Value) ||
					r.OffsetDelta != int32(i) || r.TimestampDelta64 != int64(i) ||
					len(r.Headers) != 1 || r.Headers[0].Value[0] != byte(i) {
					t.Fatalf("record %d differs: %+v", i, r)
				}
			}
		})
	}
}

func TestVerifyCRCDetectsCorruption(t *testing.T) {
	b := sourceBatch(t, kgo.ZstdCompression(), 5, 0)
	if err := VerifyCRC(b); err != nil {
		t.Fatalf("fresh batch: %v", err)
	}
	b[len(b)-1] ^= 0xff
	if err := VerifyCRC(b); !errors.Is(err, ErrCRC) {
		t.Fatalf("corrupted payload: got %v, want ErrCRC", err)
	}
}

func TestSplit(t *testing.T) {
	a := sourceBatch(t, kgo.Lz4Compression(), 3, 10)
	b := sourceBatch(t, kgo.NoCompression(), 4, 13)
	c := sourceBatch(t, kgo.ZstdCompression(), 2, 17)
	set := append(append(append([]byte(nil), a...), b...), c[:len(c)-7]...)

	var bases []int64
	partial, err := Split(set, func(h Header, raw []byte) error {
		if len(raw) != h.Size() {
			t.Fatalf("batch at %d: %d bytes, header says %d", h.BaseOffset, len(raw), h.Size())
		}
		bases = append(bases, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bases) != "[10 13]" || partial != 17 {
		t.Fatalf("bases %v partial %d, want [10 13] and 17", bases, partial)
	}

	bad := append([]byte(nil), a...)
	bad[offMagic] = 1
	if _, err := Split(bad, func(Header, []byte) error { return nil }); !errors.Is(err, ErrMagic) {
		t.Fatalf("magic 1: got %v, want ErrMagic", err)
	}
}

func TestHasGap(t *testing.T) {
	h := Header{LastOffsetDelta: 9, RecordCount: 10}
	if h.HasGap() {
		t.Fatal("full batch reported as gap")
	}
	h.RecordCount = 7
	if !h.HasGap() {
		t.Fatal("compacted batch not reported as gap")
	}
	h.RecordCount = 0
	if !h.HasGap() {
		t.Fatal("empty batch not reported as gap")
	}
}

func FuzzSplit(f *testing.F) {
	f.Add(sourceBatch(f, kgo.ZstdCompression(), 3, 7))
	f.Add(sourceBatch(f, kgo.NoCompression(), 1, 0)[:40])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Split(data, func(h Header, b []byte) error {
			if len(b) != h.Size() || len(b) < HeaderSize {
				t.Fatalf("bad split: %d bytes for header size %d", len(b), h.Size())
			}
			_ = VerifyCRC(b)
			return nil
		})
	})
}

func BenchmarkTransform(b *testing.B) {
	src := sourceBatch(b, kgo.ZstdCompression(), 500, 0)
	buf := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, src)
		if err := VerifyCRC(buf); err != nil {
			b.Fatal(err)
		}
		Transform(buf, Writer{ProducerID: 1, ProducerEpoch: 0, BaseSequence: 0})
	}
}
