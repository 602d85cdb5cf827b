package replica

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The bounds of the work a source batch may cause under
// mirror.gap.policy=fill, the one path where kmirror decompresses and
// rebuilds a batch. A batch is CRC-valid whoever wrote it: a hostile or
// broken source can claim two billion offsets in a header or send a
// decompression bomb, and the work must stay bounded by these, never
// proportional to a header field.
const (
	// MaxGapBatchRecords bounds the offsets one rebuilt batch covers
	// (LastOffsetDelta+1). A batch a producer wrote within the default
	// max.message.bytes (1 MiB) holds far fewer.
	MaxGapBatchRecords = 1 << 20
	// MaxGapBatchBytes bounds a rebuilt batch's records decompressed.
	MaxGapBatchBytes = 64 << 20
)

// errTooLarge: decompressing went past the bound.
var errTooLarge = errors.New("decompressed records exceed the bound")

// decompressBounded decompresses a batch's records (codec as the
// attributes say) and fails once the output would pass limit bytes,
// having produced at most limit+1 of them.
func decompressBounded(codec int8, in []byte, limit int) ([]byte, error) {
	var r io.Reader
	switch codec {
	case 0:
		if len(in) > limit {
			return nil, errTooLarge
		}
		return in, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(in))
		if err != nil {
			return nil, err
		}
		r = zr
	case 2:
		return snappyBounded(in, limit)
	case 3:
		r = lz4.NewReader(bytes.NewReader(in))
	case 4:
		// A frame that says how large it is is refused before any
		// decoding; one that does not is cut off by the limit below.
		var zh zstd.Header
		if zh.Decode(in) == nil && zh.HasFCS && zh.FrameContentSize > uint64(limit) {
			return nil, errTooLarge
		}
		zr, err := zstd.NewReader(bytes.NewReader(in), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1), zstd.WithDecoderMaxWindow(uint64(min(limit, 1<<30))))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, errTooLarge
	}
	return out, nil
}

// xerialMagic starts the framing Kafka's Java clients put around snappy.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyBounded decodes raw or xerial-framed snappy, checking each
// block's declared length before decoding it.
func snappyBounded(in []byte, limit int) ([]byte, error) {
	blocks := [][]byte{in}
	if bytes.HasPrefix(in, xerialMagic) && len(in) >= 16 {
		blocks = blocks[:0]
		for rest := in[16:]; len(rest) > 0; {
			if len(rest) < 4 {
				return nil, errors.New("snappy: truncated xerial chunk")
			}
			n := binary.BigEndian.Uint32(rest)
			if uint64(n) > uint64(len(rest)-4) {
				return nil, errors.New("snappy: truncated xerial chunk")
			}
			blocks = append(blocks, rest[4:4+n])
			rest = rest[4+n:]
		}
	}
	var out []byte
	for _, b := range blocks {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return nil, err
		}
		if n > limit-len(out) {
			return nil, errTooLarge
		}
		dec, err := s2.Decode(nil, b)
		if err != nil {
			return nil, err
		}
		out = append(out, dec...)
	}
	return out, nil
}
