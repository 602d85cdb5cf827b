package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Reachability says whether a cluster answered an instance the last time
// it asked.
type Reachability string

const (
	ReachUnknown     Reachability = "unknown" // not asked yet, or nothing to tell
	ReachReachable   Reachability = "reachable"
	ReachUnreachable Reachability = "unreachable"
)

// Reach is what an instance last learned about reaching one cluster.
type Reach struct {
	State Reachability `json:"state"`
	At    time.Time    `json:"at,omitzero"`     // when it last asked
	Error string       `json:"error,omitempty"` // the last failure, when unreachable
}

// InstanceMirror is an instance's view of one mirror it has open.
type InstanceMirror struct {
	Name        string `json:"name"`
	Topics      int    `json:"topics"`
	Partitions  int    `json:"partitions"` // partitions it runs
	Source      Reach  `json:"source"`
	Destination Reach  `json:"destination"`
	// ConfigAt identifies the definition the instance runs (its
	// updatedAt, or createdAt when never altered): --describe-config
	// tells from it whether an --alter is applied. ThrottleRate is the
	// bytes/s limit in effect, 0 unthrottled.
	ConfigAt     time.Time `json:"configAt,omitzero"`
	ThrottleRate int64     `json:"throttleRate,omitempty"`
}

// InstanceHeartbeat is the value of instance/<id>: an instance tells every
// reader that it is alive and what it owns. Partitions are owned through
// their topic's shard (TopicShard), so Shards says who owns what without
// listing thousands of partitions every few seconds.
type InstanceHeartbeat struct {
	Instance  string    `json:"instance"`
	Host      string    `json:"host,omitempty"`
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	At        time.Time `json:"at"` // when this heartbeat was written
	// IntervalMs is how often the instance writes its heartbeat: readers
	// call it lost when it is several intervals old.
	IntervalMs int64            `json:"intervalMs"`
	Stopped    bool             `json:"stopped,omitempty"` // the instance closed cleanly; it owns nothing
	Shards     []int32          `json:"shards,omitempty"`  // __mirror_state partitions owned, sorted
	Mirrors    []InstanceMirror `json:"mirrors,omitempty"` // sorted by name
}

// Live reports whether the heartbeat says the instance is running at now:
// not stopped, and written less than misses intervals ago.
func (h InstanceHeartbeat) Live(now time.Time, misses int) bool {
	return !h.Stopped && now.Sub(h.At) < time.Duration(misses)*h.Interval()
}

// Interval is the heartbeat interval the instance announced (one second if
// it announced none).
func (h InstanceHeartbeat) Interval() time.Duration {
	if h.IntervalMs <= 0 {
		return time.Second
	}
	return time.Duration(h.IntervalMs) * time.Millisecond
}

// Owns reports whether the instance owns a shard.
func (h InstanceHeartbeat) Owns(shard int32) bool {
	_, ok := slices.BinarySearch(h.Shards, shard)
	return ok
}

type instanceV1 struct {
	V int `json:"v"`
	InstanceHeartbeat
}

// EncodeInstance encodes an instance heartbeat; shards and mirrors are
// sorted first.
func EncodeInstance(h InstanceHeartbeat) ([]byte, error) {
	h.Shards = slices.Clone(h.Shards)
	slices.Sort(h.Shards)
	h.Mirrors = slices.Clone(h.Mirrors)
	slices.SortFunc(h.Mirrors, func(a, b InstanceMirror) int { return cmp.Compare(a.Name, b.Name) })
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("encode instance %q: %w", h.Instance, err)
	}
	return json.Marshal(instanceV1{V: Version, InstanceHeartbeat: h})
}

// DecodeInstance decodes an instance heartbeat. A reachability left out
// reads as unknown.
func DecodeInstance(b []byte) (InstanceHeartbeat, error) {
	var env instanceV1
	if err := decode(KindInstance, b, &env); err != nil {
		return InstanceHeartbeat{}, err
	}
	h := env.InstanceHeartbeat
	h.StartedAt, h.At = h.StartedAt.UTC(), h.At.UTC()
	h.Shards, h.Mirrors = nilIfEmpty(h.Shards), nilIfEmpty(h.Mirrors)
	for i := range h.Mirrors {
		m := &h.Mirrors[i]
		m.ConfigAt = m.ConfigAt.UTC()
		for _, r := range []*Reach{&m.Source, &m.Destination} {
			if r.State == "" {
				r.State = ReachUnknown
			}
			r.At = r.At.UTC()
		}
	}
	if err := h.validate(); err != nil {
		return InstanceHeartbeat{}, fmt.Errorf("%w: instance: %w", ErrMalformed, err)
	}
	return h, nil
}

func (h InstanceHeartbeat) validate() error {
	if err := InstanceKey(h.Instance).Validate(); err != nil {
		return err
	}
	if h.IntervalMs < 0 {
		return fmt.Errorf("negative interval %d", h.IntervalMs)
	}
	for i, s := range h.Shards {
		if s < 0 || s >= Partitions {
			return fmt.Errorf("shard %d out of range", s)
		}
		if i > 0 && s <= h.Shards[i-1] {
			return fmt.Errorf("shards not sorted and unique at %d", s)
		}
	}
	for i, m := range h.Mirrors {
		if err := ValidateName(m.Name); err != nil {
			return fmt.Errorf("mirror name: %w", err)
		}
		if i > 0 && m.Name <= h.Mirrors[i-1].Name {
			return fmt.Errorf("mirrors not sorted and unique at %q", m.Name)
		}
		if m.Topics < 0 || m.Partitions < 0 || m.ThrottleRate < 0 {
			return fmt.Errorf("mirror %s: negative count", m.Name)
		}
		if err := validTime("configAt", m.ConfigAt); err != nil {
			return err
		}
		for _, r := range []Reach{m.Source, m.Destination} {
			switch r.State {
			case ReachUnknown, ReachReachable, ReachUnreachable:
			default:
				return fmt.Errorf("mirror %s: unknown reachability %q", m.Name, r.State)
			}
			if err := validTime("at", r.At); err != nil {
				return err
			}
		}
	}
	if err := validTime("startedAt", h.StartedAt); err != nil {
		return err
	}
	return validTime("at", h.At)
}
