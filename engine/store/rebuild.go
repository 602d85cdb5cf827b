package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RebuildStep is how far a topic rebuild got. The steps follow each other
// in this order; a rebuild interrupted anywhere is continued from its step
// by the next owner of the topic.
type RebuildStep int8

const (
	RebuildNone        RebuildStep = iota
	RebuildPlanned                 // everything the rebuild needs fetched; the quarantine may be partly copied
	RebuildQuarantined             // every range copied and count-checked; nothing deleted yet
	RebuildDeleted                 // the destination topic deleted, not recreated yet
	RebuildRecreated               // the destination topic recreated (DestTopicID)
	RebuildDone                    // finished; kept so a new owner knows the topic was recreated by kmirror
	RebuildAbandoned               // given up before anything was deleted (Note says why)
)

var rebuildStepNames = [...]string{"", "planned", "quarantined", "deleted", "recreated", "done", "abandoned"}

// String returns the step's persisted name.
func (s RebuildStep) String() string {
	if s >= 0 && int(s) < len(rebuildStepNames) {
		return rebuildStepNames[s]
	}
	return fmt.Sprintf("RebuildStep(%d)", int8(s))
}

// Finished reports whether the rebuild needs no more work.
func (s RebuildStep) Finished() bool { return s == RebuildDone || s == RebuildAbandoned }

// MarshalText encodes the step by name.
func (s RebuildStep) MarshalText() ([]byte, error) {
	if s <= RebuildNone || int(s) >= len(rebuildStepNames) {
		return nil, fmt.Errorf("rebuild step %d has no name", int8(s))
	}
	return []byte(rebuildStepNames[s]), nil
}

// UnmarshalText is the inverse of MarshalText; an unknown name is an error.
func (s *RebuildStep) UnmarshalText(b []byte) error {
	for i, n := range rebuildStepNames {
		if i > 0 && n == string(b) {
			*s = RebuildStep(i)
			return nil
		}
	}
	return fmt.Errorf("unknown rebuild step %q", b)
}

// RebuildRange is one partition's destination-only offsets [From, To) and
// how many of its records the quarantine partition holds.
type RebuildRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	// Copied is the quarantine partition's record count when last
	// checked: transaction markers are not copied, so it can be below
	// To-From. Checked marks the copy complete and count-checked.
	Copied  int64 `json:"copied"`
	Checked bool  `json:"checked,omitempty"`
}

// RebuildRecord is the value of rebuild/<mirror>/<topic>: a rebuild's plan
// and the step it reached. It is written before and after every step, so
// whoever runs the topic next continues it without asking the source:
// the partition count and configs to recreate with are in it.
type RebuildRecord struct {
	Mirror     string      `json:"mirror"`
	Topic      string      `json:"topic"`
	Step       RebuildStep `json:"step"`
	Quarantine string      `json:"quarantine"`
	// Partitions and Configs are what the destination topic is recreated
	// with (the source's partition count, the configs mirroring needs).
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Ranges     []RebuildRange    `json:"ranges,omitempty"`
	// ReplicationFactor is the replaced destination topic's, which the
	// recreated one keeps (0 in records of earlier releases: min(3,
	// brokers)); Configs then hold the replaced topic's own configs too.
	ReplicationFactor int16 `json:"replicationFactor,omitempty"`
	// Retained is the topic that keeps what the replaced destination topic
	// held below each partition's destination-only range (Kept): records
	// the source no longer has (below its log start) and the mirrored
	// records the rebuilt topic gets again from the source. Empty when
	// there was nothing, and in records of earlier releases.
	Retained string         `json:"retained,omitempty"`
	Kept     []RebuildRange `json:"kept,omitempty"`
	// SourceTopicID is the source topic the plan was made for;
	// ReplacedTopicID the destination topic being replaced; DestTopicID
	// the recreated one (from RebuildRecreated on). Kafka's base64 form.
	SourceTopicID   string    `json:"sourceTopicId,omitempty"`
	ReplacedTopicID string    `json:"replacedTopicId,omitempty"`
	DestTopicID     string    `json:"destTopicId,omitempty"`
	Note            string    `json:"note,omitempty"`
	Owner           string    `json:"owner,omitempty"`
	StartedAt       time.Time `json:"startedAt,omitzero"`
	UpdatedAt       time.Time `json:"updatedAt,omitzero"`
}

type rebuildV1 struct {
	V int `json:"v"`
	RebuildRecord
}

// EncodeRebuild encodes a rebuild record.
func EncodeRebuild(r RebuildRecord) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("encode rebuild %s/%s: %w", r.Mirror, r.Topic, err)
	}
	return json.Marshal(rebuildV1{V: Version, RebuildRecord: r})
}

// DecodeRebuild decodes a rebuild record.
func DecodeRebuild(b []byte) (RebuildRecord, error) {
	var env rebuildV1
	if err := decode(KindRebuild, b, &env); err != nil {
		return RebuildRecord{}, err
	}
	r := env.RebuildRecord
	r.Configs, r.Ranges, r.Kept = nilIfEmptyMap(r.Configs), nilIfEmpty(r.Ranges), nilIfEmpty(r.Kept)
	r.StartedAt, r.UpdatedAt = r.StartedAt.UTC(), r.UpdatedAt.UTC()
	if err := r.validate(); err != nil {
		return RebuildRecord{}, fmt.Errorf("%w: rebuild: %w", ErrMalformed, err)
	}
	return r, nil
}

func (r RebuildRecord) validate() error {
	if err := RebuildKey(r.Mirror, r.Topic).Validate(); err != nil {
		return err
	}
	if r.Step <= RebuildNone || r.Step > RebuildAbandoned {
		return fmt.Errorf("rebuild step %d unknown", r.Step)
	}
	if err := ValidateName(r.Quarantine); err != nil {
		return fmt.Errorf("quarantine topic: %w", err)
	}
	if r.Partitions <= 0 {
		return fmt.Errorf("partition count %d to recreate with", r.Partitions)
	}
	if err := validRanges(r.Step, r.Ranges); err != nil {
		return err
	}
	if len(r.Kept) > 0 {
		if err := ValidateName(r.Retained); err != nil {
			return fmt.Errorf("retained topic: %w", err)
		}
	}
	if err := validRanges(r.Step, r.Kept); err != nil {
		return fmt.Errorf("kept: %w", err)
	}
	if r.ReplicationFactor < 0 {
		return fmt.Errorf("replication factor %d", r.ReplicationFactor)
	}
	if err := validTime("startedAt", r.StartedAt); err != nil {
		return err
	}
	return validTime("updatedAt", r.UpdatedAt)
}

// validRanges checks one list of a rebuild's copies.
func validRanges(step RebuildStep, ranges []RebuildRange) error {
	seen := map[int32]bool{}
	for _, rg := range ranges {
		switch {
		case rg.Partition < 0 || seen[rg.Partition]:
			return fmt.Errorf("range of partition %d negative or repeated", rg.Partition)
		case rg.From < 0 || rg.To < rg.From:
			return fmt.Errorf("range [%d, %d) of partition %d", rg.From, rg.To, rg.Partition)
		case rg.Copied < 0 || rg.Copied > rg.To-rg.From:
			return fmt.Errorf("%d records copied of the %d in [%d, %d) of partition %d", rg.Copied, rg.To-rg.From, rg.From, rg.To, rg.Partition)
		}
		seen[rg.Partition] = true
	}
	if step >= RebuildQuarantined && step != RebuildAbandoned {
		for _, rg := range ranges {
			if !rg.Checked {
				return errors.New("quarantined with a range not count-checked")
			}
		}
	}
	return nil
}
