package engine

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/engine/store"
)

// Owner statuses of a partition, as --describe shows them.
const (
	OwnerLive     = "live"          // a live instance's heartbeat claims the partition's shard
	OwnerLost     = "instance lost" // its owner's heartbeat is stale or absent
	OwnerStopped  = "stopped"       // its owner closed cleanly; no instance has claimed it since
	OwnerNotOwned = "not owned"     // its recorded owner is alive but no longer (or not yet) claims it
	OwnerNone     = "none"          // never run by any instance, and no live instance claims it
)

// ownership is who runs a partition, judged from the heartbeats in a
// catalog at now.
type ownership struct {
	owner  string
	status string
	age    time.Duration // of the owner's last heartbeat; -1 without one
}

// ownerOf judges the partition of a mirror topic whose record names
// recorded as its owner. The shard's live claimant wins: the group may
// have moved the shard to an instance that has not rewritten a stopped or
// paused partition's record since.
func ownerOf(cat *store.Catalog, mirror, topic, recorded string, now time.Time) ownership {
	if h, ok := cat.ShardOwner(store.TopicShard(mirror, topic), now, HeartbeatMisses); ok {
		return ownership{owner: h.Instance, status: OwnerLive, age: max(0, now.Sub(h.At))}
	}
	if recorded == "" {
		return ownership{status: OwnerNone, age: -1}
	}
	h, ok := cat.Instances[recorded]
	switch {
	case !ok:
		return ownership{owner: recorded, status: OwnerLost, age: -1}
	case h.Stopped:
		return ownership{owner: recorded, status: OwnerStopped, age: max(0, now.Sub(h.At))}
	case h.Live(now, HeartbeatMisses):
		return ownership{owner: recorded, status: OwnerNotOwned, age: max(0, now.Sub(h.At))}
	}
	return ownership{owner: recorded, status: OwnerLost, age: max(0, now.Sub(h.At))}
}

// Unowned returns the topics among topics of the mirror that no live
// instance owns: a command recorded for them runs only once an instance
// starts (or takes their shard over).
func (a *Admin) Unowned(ctx context.Context, mirror string, topics []string) ([]string, error) {
	cat, err := a.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	var out []string
	for _, t := range topics {
		if _, ok := cat.ShardOwner(store.TopicShard(mirror, t), now, HeartbeatMisses); !ok {
			out = append(out, t)
		}
	}
	return out, nil
}
