// Package batch reads and rewrites Kafka v2 record batch headers in place.
// It never decompresses a batch: kmirror copies the compressed payload byte
// for byte and only touches header fields.
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte offsets of the fields of a v2 record batch header.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of a v2 batch header; records follow it.
	HeaderSize = 61
	// lengthPrefix is what the length field does not count (baseOffset and length).
	lengthPrefix = 12
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors a batch can fail with. They are sentinels so callers branch with
// errors.Is; the returned errors wrap them with the batch's offset.
var (
	ErrTruncated = errors.New("truncated record batch")
	ErrMagic     = errors.New("unsupported record batch magic")
	ErrCRC       = errors.New("record batch CRC mismatch")
	ErrLength    = errors.New("invalid record batch length")
)

// Header is a decoded v2 batch header. Records are not decoded.
type Header struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the number of bytes the whole batch occupies.
func (h *Header) Size() int { return int(h.Length) + lengthPrefix }

// LastOffset is the offset of the batch's last offset slot.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *Header) Codec() int8 { return int8(h.Attributes & AttrCodecMask) }

// IsControl reports a transaction marker batch.
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports a batch written inside a transaction.
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// HasGap reports a batch whose record count does not fill its offset range
// (compaction removed records) or that holds no record at all. Such a batch
// cannot be written by a client.
func (h *Header) HasGap() bool {
	return h.RecordCount <= 0 || int64(h.RecordCount) != int64(h.LastOffsetDelta)+1
}

// ParseHeader decodes the header at the start of b. It checks that the
// whole batch is present and that its magic is 2; it does not check the CRC.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		if len(b) >= lengthPrefix+5 && int8(b[offMagic]) != 2 {
			return h, fmt.Errorf("%w %d", ErrMagic, int8(b[offMagic]))
		}
		return h, ErrTruncated
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.Length = int32(binary.BigEndian.Uint32(b[offLength:]))
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.Magic != 2 {
		return h, fmt.Errorf("%w %d at offset %d", ErrMagic, h.Magic, h.BaseOffset)
	}
	if int(h.Length) < HeaderSize-lengthPrefix {
		return h, fmt.Errorf("%w %d at offset %d", ErrLength, h.Length, h.BaseOffset)
	}
	if h.Size() > len(b) {
		return h, fmt.Errorf("%w at offset %d: need %d bytes, have %d", ErrTruncated, h.BaseOffset, h.Size(), len(b))
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: negative last offset delta %d at offset %d", ErrLength, h.LastOffsetDelta, h.BaseOffset)
	}
	return h, nil
}

// Checksum computes the CRC32C a batch's header should carry.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// VerifyCRC checks the stored CRC of the whole batch b (exactly one batch).
func VerifyCRC(b []byte) error {
	if len(b) < HeaderSize {
		return ErrTruncated
	}
	stored := binary.BigEndian.Uint32(b[offCRC:])
	if got := Checksum(b); got != stored {
		base := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
		return fmt.Errorf("%w at offset %d: stored %08x, computed %08x", ErrCRC, base, stored, got)
	}
	return nil
}

// Writer is the producer identity a batch is rewritten to carry.
type Writer struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32 // -1 for a non-idempotent write
}

// Transform rewrites one whole batch in place for a client Produce: base
// offset zero, the writer's producer id, epoch and sequence, the
// LogAppendTime bit cleared, and a fresh CRC. The payload is not touched. The
// caller verifies the source CRC first; Transform does not.
func Transform(b []byte, w Writer) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(w.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(w.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(w.BaseSequence))
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs&^AttrLogAppendTime)
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b))
}

// Split walks a fetch response's record set and calls fn for each complete
// batch, in order, with its parsed header and its bytes (a sub-slice of
// records). A trailing partial batch — which brokers may return when a batch
// straddles the fetch size limit — is not an error; its offset is returned as
// partialAt (-1 when there is none) so the caller can fetch it with a larger
// limit. A malformed batch stops the walk with an error.
func Split(records []byte, fn func(h Header, b []byte) error) (partialAt int64, err error) {
	for len(records) > 0 {
		h, err := ParseHeader(records)
		if errors.Is(err, ErrTruncated) {
			if len(records) >= 8 {
				return int64(binary.BigEndian.Uint64(records)), nil
			}
			return -1, nil
		}
		if err != nil {
			return -1, err
		}
		if err := fn(h, records[:h.Size()]); err != nil {
			return -1, err
		}
		records = records[h.Size():]
	}
	return -1, nil
}
