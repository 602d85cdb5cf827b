package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/kmirror/kmirror/engine/batch"
)

// Control record key types (the int16 after the key's version).
const (
	controlAbort  = 0
	controlCommit = 1
)

// ParseControl decodes the marker type of one control batch b (exactly one
// whole batch, as a fetch returns it): true for COMMIT, false for ABORT. A
// control batch is never compressed and holds one record whose key is
// (version int16, type int16). Any other shape, a CRC mismatch, or another
// control type (the KRaft types only appear in the metadata log) is an error
// matching ErrBadControl, so a marker is never guessed.
func ParseControl(b []byte) (commit bool, err error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadControl, err)
	}
	if err := batch.VerifyCRC(b[:h.Size()]); err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadControl, err)
	}
	switch {
	case !h.IsControl():
		return false, fmt.Errorf("%w: batch at offset %d is not a control batch", ErrBadControl, h.BaseOffset)
	case h.Codec() != 0:
		return false, fmt.Errorf("%w: control batch at offset %d is compressed (codec %d)", ErrBadControl, h.BaseOffset, h.Codec())
	case h.RecordCount != 1:
		return false, fmt.Errorf("%w: control batch at offset %d holds %d records", ErrBadControl, h.BaseOffset, h.RecordCount)
	}
	key, err := firstRecordKey(b[batch.HeaderSize:h.Size()])
	if err != nil {
		return false, fmt.Errorf("%w at offset %d: %w", ErrBadControl, h.BaseOffset, err)
	}
	if len(key) < 4 {
		return false, fmt.Errorf("%w at offset %d: control key of %d bytes", ErrBadControl, h.BaseOffset, len(key))
	}
	// Kafka reads newer key versions with the same layout, so any
	// non-negative version is accepted; a negative one is corruption.
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return false, fmt.Errorf("%w at offset %d: control key version %d", ErrBadControl, h.BaseOffset, v)
	}
	switch t := int16(binary.BigEndian.Uint16(key[2:])); t {
	case controlAbort:
		return false, nil
	case controlCommit:
		return true, nil
	default:
		return false, fmt.Errorf("%w at offset %d: control type %d is neither commit nor abort", ErrBadControl, h.BaseOffset, t)
	}
}

// firstRecordKey returns the key of the first v2 record in recs:
// length, attributes, timestamp delta, offset delta, key length, key.
func firstRecordKey(recs []byte) ([]byte, error) {
	length, n := binary.Varint(recs)
	if n <= 0 || length < 0 || int64(len(recs)-n) < length {
		return nil, fmt.Errorf("record length unreadable")
	}
	rec := recs[n : n+int(length)]
	if len(rec) < 1 {
		return nil, fmt.Errorf("empty record")
	}
	rec = rec[1:] // attributes
	for _, field := range []string{"timestamp delta", "offset delta"} {
		_, n := binary.Varint(rec)
		if n <= 0 {
			return nil, fmt.Errorf("record %s unreadable", field)
		}
		rec = rec[n:]
	}
	keyLen, n := binary.Varint(rec)
	if n <= 0 || keyLen < 0 || int64(len(rec)-n) < keyLen {
		return nil, fmt.Errorf("record key unreadable")
	}
	return rec[n : n+int(keyLen)], nil
}
