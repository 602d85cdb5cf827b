package txn

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/engine/batch"
)

// controlBatch builds a control batch whose records carry the given keys,
// the way a broker writes a marker.
func controlBatch(attrs int16, keys ...[]byte) []byte {
	var recs []byte
	for i, key := range keys {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, int64(len(key)))
		rec = append(rec, key...)
		value := []byte{0, 0, 0, 0, 0, 7} // marker version 0, coordinator epoch 7
		rec = binary.AppendVarint(rec, int64(len(value)))
		rec = append(rec, value...)
		rec = binary.AppendVarint(rec, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(rec)))
		recs = append(recs, rec...)
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], 42)
	be.PutUint32(b[8:], uint32(batch.HeaderSize-12+len(recs)))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(len(keys)-1))
	be.PutUint64(b[43:], 1234) // producer id
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], uint32(len(keys)))
	b = append(b, recs...)
	be.PutUint32(b[17:], batch.Checksum(b))
	return b
}

func key(version, typ int16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, uint16(version)), uint16(typ))
}

const markerAttrs = batch.AttrControl | batch.AttrTransactional

func TestParseControl(t *testing.T) {
	badCRC := controlBatch(markerAttrs, key(0, 1))
	badCRC[len(badCRC)-1] ^= 0xff
	for _, tc := range []struct {
		name    string
		b       []byte
		commit  bool
		wantErr bool
	}{
		{"commit", controlBatch(markerAttrs, key(0, 1)), true, false},
		{"abort", controlBatch(markerAttrs, key(0, 0)), false, false},
		{"newer key version", controlBatch(markerAttrs, key(3, 1)), true, false},
		{"trailing bytes after the batch", append(controlBatch(markerAttrs, key(0, 0)), 1, 2, 3), false, false},
		{"negative key version", controlBatch(markerAttrs, key(-1, 1)), false, true},
		{"leader change type", controlBatch(markerAttrs, key(0, 2)), false, true},
		{"short key", controlBatch(markerAttrs, []byte{0, 0, 1}), false, true},
		{"not a control batch", controlBatch(batch.AttrTransactional, key(0, 1)), false, true},
		{"compressed", controlBatch(markerAttrs|1, key(0, 1)), false, true},
		{"two records", controlBatch(markerAttrs, key(0, 1), key(0, 1)), false, true},
		{"bad crc", badCRC, false, true},
		{"truncated", controlBatch(markerAttrs, key(0, 1))[:batch.HeaderSize+3], false, true},
		{"header only", controlBatch(markerAttrs, key(0, 1))[:20], false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit, err := ParseControl(tc.b)
			if tc.wantErr {
				if !errors.Is(err, ErrBadControl) {
					t.Fatalf("err = %v, want ErrBadControl", err)
				}
				return
			}
			if err != nil || commit != tc.commit {
				t.Fatalf("ParseControl = %v, %v; want %v", commit, err, tc.commit)
			}
		})
	}
}

func TestParseControlNeverPanics(t *testing.T) {
	good := controlBatch(markerAttrs, key(0, 1))
	for i := batch.HeaderSize; i < len(good); i++ {
		for _, v := range []byte{0x00, 0x7f, 0x80, 0xff} {
			b := append([]byte(nil), good...)
			b[i] = v
			b = b[:len(b):len(b)]
			binary.BigEndian.PutUint32(b[17:], batch.Checksum(b))
			_, _ = ParseControl(b) // must not panic
		}
	}
}

func TestNextSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ seq, count, want int32 }{
		{0, 1, 1},
		{10, 5, 15},
		{2147483647, 1, 0},
		{2147483640, 10, 2},
	} {
		if got := nextSequence(tc.seq, tc.count); got != tc.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tc.seq, tc.count, got, tc.want)
		}
	}
}

func TestCoordStateNames(t *testing.T) {
	for s := stateNotFound; s <= stateOther; s++ {
		if s == stateNotFound || s == stateOther {
			continue
		}
		if got := parseCoordState(s.String()); got != s {
			t.Errorf("parseCoordState(%q) = %v", s, got)
		}
	}
	if parseCoordState("PrepareEpochFence") != stateOther || !statePrepareAbort.pending() || stateCompleteAbort.pending() {
		t.Error("state classification")
	}
}
