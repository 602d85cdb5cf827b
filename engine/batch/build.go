package batch

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record to build into a batch.
type Record struct {
	Key, Value     []byte // nil means null
	Headers        []kmsg.Header
	TimestampDelta int64
}

// Build encodes records into one v2 batch with base offset 0 and the given
// codec, producer identity and base timestamp. It is used for the batches
// kmirror writes itself (fillers that keep offsets aligned); mirrored batches
// are never rebuilt.
func Build(codec kgo.CompressionCodec, baseTimestamp int64, w Writer, recs []Record) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("build batch: no records")
	}
	var raw []byte
	var maxDelta int64
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
			Headers:          r.Headers,
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - varintLen(0))
		raw = kr.AppendTo(raw)
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	attrs := int16(0)
	comp, err := kgo.DefaultCompressor(codec)
	if err != nil {
		return nil, fmt.Errorf("build batch: %w", err)
	}
	if comp != nil {
		var buf bytes.Buffer
		out, typ := comp.Compress(&buf, raw)
		if typ != 0 {
			raw = append([]byte(nil), out...)
			attrs = int16(typ)
		}
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       baseTimestamp,
		MaxTimestamp:         baseTimestamp + maxDelta,
		ProducerID:           w.ProducerID,
		ProducerEpoch:        w.ProducerEpoch,
		FirstSequence:        w.BaseSequence,
		NumRecords:           int32(len(recs)),
		Records:              raw,
	}
	b := rb.AppendTo(nil)
	// AppendTo writes Length from the struct; set it from the real size.
	putLength(b)
	Transform(b, w)
	return b, nil
}

// putLength stores the batch length field from the slice's size.
func putLength(b []byte) {
	n := uint32(len(b) - lengthPrefix)
	b[offLength], b[offLength+1], b[offLength+2], b[offLength+3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// varintLen is the size of a zig-zag varint encoding of v.
func varintLen(v int64) int {
	u := uint64((v << 1) ^ (v >> 63))
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
