package replica

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDecompressBounded: every codec's output stops at the bound (a bomb of
// 8 MiB of zeros against a 1 MiB limit fails errTooLarge) and what fits
// comes back whole.
func TestDecompressBounded(t *testing.T) {
	small := bytes.Repeat([]byte("kmirror "), 1000)
	bomb := make([]byte, 8<<20)
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		enc := func(in []byte) ([]byte, int8) {
			if comp == nil {
				return in, 0
			}
			var buf bytes.Buffer
			out, typ := comp.Compress(&buf, in)
			return bytes.Clone(out), int8(typ)
		}
		in, typ := enc(small)
		got, err := decompressBounded(typ, in, 1<<20)
		if err != nil || !bytes.Equal(got, small) {
			t.Errorf("codec %d: %d bytes, %v; want the %d bytes back", typ, len(got), err, len(small))
		}
		in, typ = enc(bomb)
		if _, err := decompressBounded(typ, in, 1<<20); !errors.Is(err, errTooLarge) {
			t.Errorf("codec %d: 8 MiB against a 1 MiB bound: %v, want errTooLarge", typ, err)
		}
	}
}
