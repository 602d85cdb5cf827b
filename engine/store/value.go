package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// Version is the value format this package writes. Every value carries it as
// "v"; decoders accept exactly the versions they know, and every past version
// keeps a golden fixture under testdata/.
const Version = 1

// MaxLineage bounds the epoch lineage kept per partition: alignment needs
// only the recent epochs, and a compacted record should stay small.
const MaxLineage = 16

// ErrMalformed matches every decode error except *VersionError: bad JSON, a
// missing version, or fields that break the format's rules.
var ErrMalformed = errors.New("malformed __mirror_state value")

// VersionError reports a value written in a version this build cannot read,
// typically by a newer kmirror sharing the destination cluster.
type VersionError struct {
	Kind    KeyKind
	Version int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%s record version %d is not supported (this kmirror reads version %d; upgrade it)",
		e.Kind, e.Version, Version)
}

// MirrorDef is the value of mirror/<name>: how to reach the source cluster and
// the mirror's settings.
type MirrorDef struct {
	Name            string   `json:"name"`
	SourceBootstrap []string `json:"sourceBootstrap,omitempty"`
	SourceClusterID string   `json:"sourceClusterId,omitempty"` // recorded at create, checked on every sync
	// SourceConfig holds the source client's security settings. Secret
	// values are stored as ${env:VAR} or ${file:path:key} references; the CLI
	// refuses literals unless told otherwise, the codec stores what it gets.
	SourceConfig map[string]string `json:"sourceConfig,omitempty"`
	Config       map[string]string `json:"config,omitempty"` // mirror.* settings
	CreatedAt    time.Time         `json:"createdAt,omitzero"`
	// UpdatedAt is the last --alter; running instances reconfigure the
	// mirror when the definition they run differs from the recorded one.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Patterns are --start patterns that matched no source topic yet:
	// discovery starts the topics they match once they appear (a pattern
	// that matched at --start lives on in its topics' records instead).
	Patterns []StartPattern `json:"patterns,omitempty"`
}

// StartPattern is one recorded --start: the --topics and --exclude values.
type StartPattern struct {
	Topics  string `json:"topics"`
	Exclude string `json:"exclude,omitempty"`
}

// TopicDesired is the value of topic/<mirror>/<topic>: what the operator
// wants for the topic and how it maps between the clusters.
type TopicDesired struct {
	Mirror           string            `json:"mirror"`
	Topic            string            `json:"topic"`
	Desired          partition.Desired `json:"desired"`           // start, pause or stop
	Pattern          string            `json:"pattern,omitempty"` // the include pattern that matched
	Exclude          string            `json:"exclude,omitempty"`
	SourceTopicID    string            `json:"sourceTopicId,omitempty"`
	DestTopicID      string            `json:"destTopicId,omitempty"`
	UpdatedAt        time.Time         `json:"updatedAt,omitzero"`
	RebuildRequested bool              `json:"rebuildRequested,omitempty"`
	// RecoverAt is when an operator last asked to recover the topic's
	// FAILED partitions; the owner applies it to partitions that failed
	// before that instant.
	RecoverAt time.Time `json:"recoverAt,omitzero"`
}

// EpochStart is one entry of a source epoch lineage: the first offset the
// source wrote in Epoch.
type EpochStart struct {
	Epoch int32 `json:"epoch"`
	Start int64 `json:"start"`
}

// PartitionRecord is the value of partition/<mirror>/<topic>/<p>: the
// partition's state machine status and the data path's durable position.
type PartitionRecord struct {
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`

	State      partition.State   `json:"state"`
	StateEpoch int64             `json:"stateEpoch"`
	Desired    partition.Desired `json:"desired,omitempty"`
	Rebuild    bool              `json:"rebuild,omitempty"`
	PrevState  partition.State   `json:"prevState,omitempty"`
	Attempt    int               `json:"attempt,omitempty"`
	Error      string            `json:"error,omitempty"`
	Cause      partition.Cause   `json:"cause,omitempty"`
	Retryable  bool              `json:"retryable,omitempty"`
	NextRetry  time.Time         `json:"nextRetry,omitzero"`

	LastOffset  int64        `json:"lastOffset"` // last mirrored offset (LME), -1 none
	LastEpoch   int32        `json:"lastEpoch"`  // source epoch of that offset, -1 none
	Lineage     []EpochStart `json:"lineage,omitempty"`
	WriterID    int64        `json:"writerId"` // -1 none
	WriterEpoch int16        `json:"writerEpoch"`
	Owner       string       `json:"owner,omitempty"`
	UpdatedAt   time.Time    `json:"updatedAt,omitzero"`
	// SourceTopicID is the id of the source topic the partition mirrors,
	// recorded when it is first aligned: a source topic deleted and
	// recreated under the same name has another id, and its records are
	// not the ones the destination holds. DestTopicID is the destination
	// topic's id at the last write. Kafka's base64 form; "" unknown (also
	// in records written before these fields existed).
	SourceTopicID string `json:"sourceTopicId,omitempty"`
	DestTopicID   string `json:"destTopicId,omitempty"`
	// Txns are the destination transactional producers mirroring the
	// source's transactions on this partition. An open one must be continued
	// after a restart, never re-initialised (that would abort it and write a
	// marker the source does not have).
	Txns []TxnProducer `json:"txns,omitempty"`
	// StopAborted are the first offsets of the mirrored transactions the
	// stop (failover) aborted on the destination. Their records lie at or
	// below the LME on both clusters, but where the source committed them
	// they are lost: a failback that rebuilds the source quarantines from
	// the lowest of them, not only past the LME.
	StopAborted []int64 `json:"stopAborted,omitempty"`
}

// TxnProducer is one mapped transactional producer of a partition.
type TxnProducer struct {
	SourcePID   int64  `json:"sourcePid"`
	TxnID       string `json:"txnId"`
	PID         int64  `json:"pid"`
	Epoch       int16  `json:"epoch"`
	NextSeq     int32  `json:"nextSeq"`
	Open        bool   `json:"open,omitempty"`
	FirstOffset int64  `json:"firstOffset"`
}

// NewPartitionRecord returns a record with nothing mirrored yet.
func NewPartitionRecord(mirror, topic string, p int32) PartitionRecord {
	return PartitionRecord{Mirror: mirror, Topic: topic, Partition: p,
		LastOffset: -1, LastEpoch: -1, WriterID: -1, WriterEpoch: -1}
}

// Status returns the state machine status the record holds; cfg is the
// mirror's retry configuration, which lives in the mirror definition.
func (r PartitionRecord) Status(cfg partition.Config) partition.Status {
	return partition.Status{State: r.State, StateEpoch: r.StateEpoch, Desired: r.Desired, Rebuild: r.Rebuild,
		PrevState: r.PrevState, Attempt: r.Attempt, Error: r.Error, Cause: r.Cause, Retryable: r.Retryable,
		NextRetry: r.NextRetry, Config: cfg}
}

// SetStatus copies a state machine status into the record.
func (r *PartitionRecord) SetStatus(s partition.Status) {
	r.State, r.StateEpoch, r.Desired, r.Rebuild = s.State, s.StateEpoch, s.Desired, s.Rebuild
	r.PrevState, r.Attempt, r.Error, r.Cause, r.Retryable, r.NextRetry =
		s.PrevState, s.Attempt, s.Error, s.Cause, s.Retryable, s.NextRetry
}

// The envelopes put "v" first and promote the value's fields beside it.
type (
	mirrorV1 struct {
		V int `json:"v"`
		MirrorDef
	}
	topicV1 struct {
		V int `json:"v"`
		TopicDesired
	}
	partitionV1 struct {
		V int `json:"v"`
		PartitionRecord
	}
)

// EncodeMirror encodes a mirror definition.
func EncodeMirror(d MirrorDef) ([]byte, error) {
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("encode mirror %q: %w", d.Name, err)
	}
	return json.Marshal(mirrorV1{V: Version, MirrorDef: d})
}

// DecodeMirror decodes a mirror definition.
func DecodeMirror(b []byte) (MirrorDef, error) {
	var env mirrorV1
	if err := decode(KindMirror, b, &env); err != nil {
		return MirrorDef{}, err
	}
	d := env.MirrorDef
	d.SourceBootstrap = nilIfEmpty(d.SourceBootstrap)
	d.SourceConfig, d.Config = nilIfEmptyMap(d.SourceConfig), nilIfEmptyMap(d.Config)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.Patterns = nilIfEmpty(d.Patterns)
	if err := d.validate(); err != nil {
		return MirrorDef{}, fmt.Errorf("%w: mirror: %w", ErrMalformed, err)
	}
	return d, nil
}

func (d MirrorDef) validate() error {
	if err := ValidateName(d.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if err := validTime("updatedAt", d.UpdatedAt); err != nil {
		return err
	}
	return validTime("createdAt", d.CreatedAt)
}

// EncodeTopic encodes a topic's desired state.
func EncodeTopic(t TopicDesired) ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("encode topic %s/%s: %w", t.Mirror, t.Topic, err)
	}
	return json.Marshal(topicV1{V: Version, TopicDesired: t})
}

// DecodeTopic decodes a topic's desired state.
func DecodeTopic(b []byte) (TopicDesired, error) {
	var env topicV1
	if err := decode(KindTopic, b, &env); err != nil {
		return TopicDesired{}, err
	}
	t := env.TopicDesired
	t.UpdatedAt = t.UpdatedAt.UTC()
	if err := t.validate(); err != nil {
		return TopicDesired{}, fmt.Errorf("%w: topic: %w", ErrMalformed, err)
	}
	return t, nil
}

func (t TopicDesired) validate() error {
	if err := TopicKey(t.Mirror, t.Topic).Validate(); err != nil {
		return err
	}
	if t.Desired == partition.DesiredNone {
		return errors.New("desired state missing (want start, pause or stop)")
	}
	return validTime("updatedAt", t.UpdatedAt)
}

// EncodePartition encodes a partition record. A lineage longer than
// MaxLineage is cut to its newest entries.
func EncodePartition(r PartitionRecord) ([]byte, error) {
	r.Lineage = trimLineage(r.Lineage)
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("encode partition %s/%s/%d: %w", r.Mirror, r.Topic, r.Partition, err)
	}
	return json.Marshal(partitionV1{V: Version, PartitionRecord: r})
}

// DecodePartition decodes a partition record. Offsets, epochs and the writer
// missing from the value read as -1 (none), never as 0.
func DecodePartition(b []byte) (PartitionRecord, error) {
	env := partitionV1{PartitionRecord: NewPartitionRecord("", "", 0)}
	if err := decode(KindPartition, b, &env); err != nil {
		return PartitionRecord{}, err
	}
	r := env.PartitionRecord
	r.Lineage = nilIfEmpty(trimLineage(r.Lineage))
	r.NextRetry, r.UpdatedAt = r.NextRetry.UTC(), r.UpdatedAt.UTC()
	if err := r.validate(); err != nil {
		return PartitionRecord{}, fmt.Errorf("%w: partition: %w", ErrMalformed, err)
	}
	return r, nil
}

func (r PartitionRecord) validate() error {
	if err := PartitionKey(r.Mirror, r.Topic, r.Partition).Validate(); err != nil {
		return err
	}
	switch {
	case r.StateEpoch < 0:
		return fmt.Errorf("negative state epoch %d", r.StateEpoch)
	case r.Attempt < 0:
		return fmt.Errorf("negative attempt %d", r.Attempt)
	case r.LastOffset < -1:
		return fmt.Errorf("last offset %d below -1", r.LastOffset)
	case slices.ContainsFunc(r.StopAborted, func(o int64) bool { return o < 0 }):
		return fmt.Errorf("negative first offset of a transaction aborted at stop in %v", r.StopAborted)
	}
	if err := validTime("nextRetry", r.NextRetry); err != nil {
		return err
	}
	return validTime("updatedAt", r.UpdatedAt)
}

// decode checks the version and unmarshals into env. Unknown fields are
// ignored: a newer kmirror may add fields within a version.
func decode(kind KeyKind, b []byte, env any) error {
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, kind, err)
	}
	if head.V == nil {
		return fmt.Errorf("%w: %s: no version field \"v\"", ErrMalformed, kind)
	}
	if *head.V != Version {
		return &VersionError{Kind: kind, Version: *head.V}
	}
	if err := json.Unmarshal(b, env); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, kind, err)
	}
	return nil
}

// validTime rejects times JSON cannot write back (years outside 0–9999, which
// a far-off zone offset can produce once converted to UTC).
func validTime(field string, t time.Time) error {
	if y := t.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s: year %d out of range", field, y)
	}
	return nil
}

func trimLineage(l []EpochStart) []EpochStart {
	if len(l) > MaxLineage {
		return l[len(l)-MaxLineage:]
	}
	return l
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
