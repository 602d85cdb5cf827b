package batch

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Same reports how the destination batch dst differs from the source batch
// src that kmirror would have copied to the same offsets, or nil when dst is
// such a copy. A copy keeps the offsets, record count, attributes (but the
// LogAppendTime bit, which kmirror clears), timestamps and the compressed
// payload byte for byte; its producer identity, leader epoch and CRC are
// the destination's own. A transaction marker is written by each cluster's
// coordinator, so only its offsets and commit/abort type must match; a
// source batch with a gap was rebuilt with tombstones (mirror.gap.policy=
// fill), so only its offsets and count must match.
func Same(src Header, srcB []byte, dst Header, dstB []byte) error {
	const lat = AttrLogAppendTime
	switch {
	case src.BaseOffset != dst.BaseOffset || src.LastOffsetDelta != dst.LastOffsetDelta:
		return fmt.Errorf("the source batch spans offsets %d..%d, the destination's %d..%d", src.BaseOffset, src.LastOffset(), dst.BaseOffset, dst.LastOffset())
	case src.IsControl() != dst.IsControl():
		return fmt.Errorf("a transaction marker on one side only (source control %t, destination control %t)", src.IsControl(), dst.IsControl())
	case src.IsTransactional() != dst.IsTransactional():
		return fmt.Errorf("transactional on one side only (source %t, destination %t)", src.IsTransactional(), dst.IsTransactional())
	case src.IsControl():
		sk, err1 := controlKey(srcB)
		dk, err2 := controlKey(dstB)
		if err1 != nil || err2 != nil || !bytes.Equal(sk, dk) {
			return fmt.Errorf("transaction markers differ (source key %x, destination key %x)", sk, dk)
		}
		return nil
	case src.HasGap():
		if int64(dst.RecordCount) != int64(src.LastOffsetDelta)+1 {
			return fmt.Errorf("the source batch has a gap and the destination's %d records do not fill its %d offsets", dst.RecordCount, src.LastOffsetDelta+1)
		}
		return nil
	case src.RecordCount != dst.RecordCount:
		return fmt.Errorf("%d records on the source, %d on the destination", src.RecordCount, dst.RecordCount)
	case src.Attributes&^lat != dst.Attributes&^lat:
		return fmt.Errorf("attributes differ (source %#x, destination %#x)", src.Attributes, dst.Attributes)
	case src.BaseTimestamp != dst.BaseTimestamp:
		return fmt.Errorf("first timestamps differ (source %d, destination %d)", src.BaseTimestamp, dst.BaseTimestamp)
	case src.MaxTimestamp != dst.MaxTimestamp && (src.Attributes|dst.Attributes)&lat == 0:
		// A LogAppendTime batch's maximum is the broker's clock, which
		// the other cluster replaces with the records' own maximum.
		return fmt.Errorf("last timestamps differ (source %d, destination %d)", src.MaxTimestamp, dst.MaxTimestamp)
	case len(srcB) < HeaderSize || len(dstB) < HeaderSize || !bytes.Equal(srcB[HeaderSize:], dstB[HeaderSize:]):
		return fmt.Errorf("the records' bytes differ")
	}
	return nil
}

// controlKey returns the key (version and commit/abort type) of the one
// record of a control batch.
func controlKey(b []byte) ([]byte, error) {
	if len(b) < HeaderSize {
		return nil, ErrLength
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(b[HeaderSize:]); err != nil {
		return nil, err
	}
	return rec.Key, nil
}
