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
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
)

// ErrMirrorLoop is replica.ErrMirrorLoop.
var ErrMirrorLoop = replica.ErrMirrorLoop

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
