package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// ErrMirrorLoop: a topic would be mirrored back to the cluster it is being
// mirrored from.
var ErrMirrorLoop = errors.New("mirror loop")

// peerState is what the source cluster's own __mirror_state says about
// mirrors that copy from this mirror's destination back to the source: the
// forward mirror of a failback. It is read at most every peerMaxAge.
type peerState struct {
	mu  sync.Mutex
	at  time.Time
	cat *store.Catalog
	err error
}

const peerMaxAge = 2 * time.Second

// peerCatalog reads the source cluster's __mirror_state (an empty catalog
// when it has none).
func (m *mirror) peerCatalog(ctx context.Context) (*store.Catalog, error) {
	m.peer.mu.Lock()
	defer m.peer.mu.Unlock()
	if m.peer.cat != nil && m.e.now().Sub(m.peer.at) < peerMaxAge {
		return m.peer.cat, m.peer.err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(m.cfg.SourceBootstrap...), kgo.ClientID(m.e.cfg.Instance + "-peer")}, m.cfg.SourceOpts...)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cat, err := store.ReadAll(rctx, opts, nil)
	if errors.Is(err, store.ErrNoStateTopic) {
		cat, err = store.NewCatalog(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the source cluster's %s: %w", store.Topic, err)
	}
	m.peer.cat, m.peer.err, m.peer.at = cat, nil, m.e.now()
	return cat, nil
}

// forwardRecord finds, in the source cluster's __mirror_state, the record
// of a mirror that copies this partition from this mirror's destination
// cluster: the mirror this one fails back from.
func forwardRecord(cat *store.Catalog, destID, topic string, p int32) (store.MirrorDef, store.TopicDesired, *store.PartitionRecord, bool) {
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
func (r *runner) checkFailback(ctx context.Context, dstEnd int64) (anchor, error) {
	none := anchor{offset: -1, epoch: -1}
	cat, err := r.deps.m.peerCatalog(ctx)
	if err != nil {
		return none, err
	}
	def, td, rec, ok := forwardRecord(cat, r.deps.m.e.destID, r.topic, r.partition)
	if !ok {
		return none, nil
	}
	if td.Desired != partition.DesiredStop || rec == nil || rec.State != partition.Stopped {
		state := "not STOPPED"
		if rec != nil {
			state = rec.State.String()
		}
		return none, r.failuref("%w: %s is mirrored from this cluster to the source by mirror %s (%s); stop it before mirroring back",
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
		r.emit(LevelInfo, fmt.Sprintf("failback from mirror %s: last mirrored offset %d, copying the delta from %d", def.Name, rec.LastOffset, dstEnd))
	}
	return anchor{offset: rec.LastOffset, epoch: rec.LastEpoch}, nil
}

// LoopCheck refuses to start topics that an active mirror copies from the
// destination cluster to the source: mirroring them back would loop.
func loopTopics(cat *store.Catalog, destID string, topics []string) []string {
	var out []string
	for _, name := range cat.MirrorNames() {
		if cat.Mirrors[name].SourceClusterID != destID {
			continue
		}
		for _, t := range topics {
			td, ok := cat.Topics[store.TopicRef{Mirror: name, Topic: t}]
			if !ok {
				continue
			}
			active := td.Desired != partition.DesiredStop
			for _, p := range cat.PartitionsOf(name, t) {
				active = active || p.State != partition.Stopped
			}
			if active && !slices.Contains(out, t) {
				out = append(out, fmt.Sprintf("%s (mirror %s)", t, name))
			}
		}
	}
	return out
}
