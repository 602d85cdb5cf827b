package replica

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// ForwardRecord finds, in the source cluster's __mirror_state, the record
// of a mirror that copies this partition from this mirror's destination
// cluster: the mirror this one fails back from.
func ForwardRecord(cat *store.Catalog, destID, topic string, p int32) (store.MirrorDef, store.TopicDesired, *store.PartitionRecord, bool) {
	for _, name := range cat.MirrorNames() {
		def := cat.Mirrors[name]
		if def.SourceClusterID != destID {
			continue
		}
		td, ok := cat.Topics[store.TopicRef{Mirror: name, Topic: topic}]
		if !ok {
			continue
		}
		var rec *store.PartitionRecord
		if r, ok := cat.Partitions[store.PartitionRef{Mirror: name, Topic: topic, Partition: p}]; ok {
			rec = &r
		}
		return def, td, rec, true
	}
	return store.MirrorDef{}, store.TopicDesired{}, nil, false
}

// checkFailback compares the destination log with the forward mirror's last
// mirrored offset (LME), read from the source's own __mirror_state. The
// destination was the forward mirror's source: its log is the truth only up
// to the LME. Records beyond it were never mirrored before the failover —
// the measured data loss — and the partition has diverged. A forward mirror
// still running is a loop.
//
// It returns the forward mirror's LME as an anchor for verification (none
// outside a failback).
func (r *Runner) checkFailback(ctx context.Context, dstEnd int64) (anchor, error) {
	none := anchor{offset: -1, epoch: -1}
	cat, err := r.deps.Peer.Catalog(ctx)
	if err != nil {
		return none, err
	}
	def, td, rec, ok := ForwardRecord(cat, r.deps.DestID, r.topic, r.partition)
	if !ok {
		return none, nil
	}
	if td.Desired != partition.DesiredStop || rec == nil || rec.State != partition.Stopped {
		state := "not STOPPED"
		if rec != nil {
			state = rec.State.String()
		}
		return none, r.Failuref("%w: %s is mirrored from this cluster to the source by mirror %s (%s); stop it before mirroring back",
			ErrMirrorLoop, r.topic, def.Name, state)
	}
	boundary := rec.LastOffset + 1
	// Past the boundary, what this mirror copied itself is the source's.
	if own := r.mirrored + 1; own > boundary {
		boundary = own
	}
	if dstEnd > boundary {
		return none, r.mismatch(boundary, dstEnd, fmt.Errorf("%w: this cluster holds %d records after offset %d, the last one mirror %s copied before it stopped (records never mirrored before the failover)",
			ErrDiverged, dstEnd-boundary, rec.LastOffset, def.Name))
	}
	if r.rare == nil || r.rare.failbackFrom == "" {
		r.rarely().failbackFrom = def.Name
		r.emit(partition.SeverityInfo, fmt.Sprintf("failback from mirror %s: last mirrored offset %d, copying the delta from %d", def.Name, rec.LastOffset, dstEnd))
	}
	return anchor{offset: rec.LastOffset, epoch: rec.LastEpoch}, nil
}
