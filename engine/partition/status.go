package partition

import (
	"fmt"
	"time"
)

// MarshalText encodes the state by name, so persisted records and --json
// output read "MIRRORING" rather than a number.
func (s State) MarshalText() ([]byte, error) {
	if s < Unknown || s > ULERecovery {
		return nil, fmt.Errorf("partition state %d out of range", int8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText is the inverse of MarshalText; an unknown name is an error.
func (s *State) UnmarshalText(b []byte) error {
	st, ok := ParseState(string(b))
	if !ok {
		return fmt.Errorf("unknown partition state %q", b)
	}
	*s = st
	return nil
}

// Desired is what the operator asked for a topic: the state the machine
// steers towards, and where a FAILED partition goes when it retries.
type Desired int8

const (
	DesiredNone  Desired = iota // nothing asked yet (a partition never started)
	DesiredStart                // mirror
	DesiredPause                // keep progress, stay read-only, fetch nothing
	DesiredStop                 // fail over: make the destination writable
)

// String returns the name used in __mirror_state and by the CLI.
func (d Desired) String() string {
	switch d {
	case DesiredNone:
		return ""
	case DesiredStart:
		return "start"
	case DesiredPause:
		return "pause"
	case DesiredStop:
		return "stop"
	}
	return fmt.Sprintf("Desired(%d)", int8(d))
}

// ParseDesired is the inverse of String for start, pause and stop.
func ParseDesired(name string) (Desired, bool) {
	for _, d := range []Desired{DesiredStart, DesiredPause, DesiredStop} {
		if d.String() == name {
			return d, true
		}
	}
	return DesiredNone, false
}

// MarshalText encodes the desired state by name ("" for DesiredNone).
func (d Desired) MarshalText() ([]byte, error) {
	if d < DesiredNone || d > DesiredStop {
		return nil, fmt.Errorf("desired state %d out of range", int8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText accepts start, pause, stop and "" (DesiredNone).
func (d *Desired) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*d = DesiredNone
		return nil
	}
	v, ok := ParseDesired(string(b))
	if !ok {
		return fmt.Errorf("unknown desired state %q (want start, pause or stop)", b)
	}
	*d = v
	return nil
}

// Cause classifies why a partition failed. Some causes are fatal whatever the
// reporter said: retrying cannot change a destination that diverged or a
// source cluster that is a different cluster, and retrying in a loop would
// only hide the problem from the operator.
type Cause int8

const (
	CauseNone                 Cause = iota
	CauseOther                      // unclassified; retryable as reported
	CauseTransient                  // network, broker not available, timeout
	CauseOffsetMismatch             // destination log end or append offset differs from the source
	CauseForeignWrite               // someone else wrote to the destination partition
	CauseDiverged                   // destination and source logs disagree
	CauseGap                        // offset gap with mirror.gap.policy=fail
	CauseSourceClusterChanged       // source cluster id differs from the one recorded at create
	CauseSourceTopicDeleted         // source topic is gone
	CauseULE                        // unclean leader election on the source, recovery disabled
	CauseTxnAborted                 // destination aborted a mirrored transaction by itself
	CauseSourceUnreachable          // the mirror's source cluster does not answer; retried without end
	CauseSourceTopicRecreated       // source topic has another topic id than the one mirrored
	CauseBadSourceBatch             // a fetched batch is corrupt or passes a bound; never appended
)

// Causes lists every cause.
var Causes = []Cause{CauseNone, CauseOther, CauseTransient, CauseOffsetMismatch, CauseForeignWrite,
	CauseDiverged, CauseGap, CauseSourceClusterChanged, CauseSourceTopicDeleted, CauseULE, CauseTxnAborted,
	CauseSourceUnreachable, CauseSourceTopicRecreated, CauseBadSourceBatch}

// String returns the snake_case name used in records and logs.
func (c Cause) String() string {
	switch c {
	case CauseNone:
		return ""
	case CauseOther:
		return "other"
	case CauseTransient:
		return "transient"
	case CauseOffsetMismatch:
		return "offset_mismatch"
	case CauseForeignWrite:
		return "foreign_write"
	case CauseDiverged:
		return "diverged"
	case CauseGap:
		return "gap"
	case CauseSourceClusterChanged:
		return "source_cluster_changed"
	case CauseSourceTopicDeleted:
		return "source_topic_deleted"
	case CauseULE:
		return "unclean_leader_election"
	case CauseTxnAborted:
		return "transaction_aborted"
	case CauseSourceTopicRecreated:
		return "source_topic_recreated"
	case CauseSourceUnreachable:
		return "source_unreachable"
	case CauseBadSourceBatch:
		return "bad_source_batch"
	}
	return fmt.Sprintf("Cause(%d)", int8(c))
}

// Fatal reports whether a failure of this cause is never retried
// automatically and waits for an operator's recover.
func (c Cause) Fatal() bool {
	switch c {
	case CauseForeignWrite, CauseDiverged, CauseGap, CauseSourceClusterChanged,
		CauseSourceTopicDeleted, CauseULE, CauseTxnAborted, CauseSourceTopicRecreated:
		return true
	case CauseNone, CauseOther, CauseTransient, CauseOffsetMismatch, CauseSourceUnreachable, CauseBadSourceBatch:
		return false
	}
	return false
}

// MarshalText encodes the cause by name.
func (c Cause) MarshalText() ([]byte, error) {
	if c < CauseNone || int(c) >= len(Causes) {
		return nil, fmt.Errorf("failure cause %d out of range", int8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText is the inverse of MarshalText. An unknown name decodes as
// CauseOther so that a record written by a newer kmirror stays readable.
func (c *Cause) UnmarshalText(b []byte) error {
	for _, v := range Causes {
		if v.String() == string(b) {
			*c = v
			return nil
		}
	}
	*c = CauseOther
	return nil
}

// Config holds the per-mirror retry settings of FAILED partitions
// (mirror.failed.retry.*). Zero fields take the defaults.
type Config struct {
	InitialBackoff time.Duration // mirror.failed.retry.initial.backoff.ms
	MaxBackoff     time.Duration // mirror.failed.retry.max.backoff.ms
	MaxAttempts    int           // mirror.failed.retry.max.attempts
}

// Defaults of Config.
const (
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 300 * time.Second
	DefaultMaxAttempts    = 20
)

// NoRetries as MaxAttempts fails a partition for good on its first error
// (mirror.failed.retry.max.attempts=0); zero means the default.
const NoRetries = -1

// WithDefaults returns c with zero or negative fields set to the defaults,
// MaxAttempts NoRetries excepted.
func (c Config) WithDefaults() Config {
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxAttempts == 0 || c.MaxAttempts < NoRetries {
		c.MaxAttempts = DefaultMaxAttempts
	}
	return c
}

// Status is the state machine's whole memory of one partition. It is a plain
// comparable value: Step takes one and returns the next. Everything but
// Config is persisted in the partition's __mirror_state record; Config comes
// from the mirror definition.
type Status struct {
	// StateEpoch increases by one on every transition (including a new owner
	// re-entering the same state). Persisted writes and engine results carry
	// it, so a write or result from an older epoch is recognisably stale.
	StateEpoch int64
	State      State
	Desired    Desired
	// Rebuild is set by Recover{Rebuild: true} and cleared once alignment
	// succeeds: while set, a divergence found by alignment is answered with a
	// Rebuild action instead of FAILED.
	Rebuild bool

	// Failure bookkeeping. PrevState, Error, Cause and Retryable describe the
	// last failure while FAILED and are cleared when the partition leaves
	// FAILED. Attempt is the number of the retry scheduled (or under way); it
	// survives the retry cycle and is reset when MIRRORING is reached. (The
	// one-byte fields sit together: a Status is in every runner.)
	PrevState State
	Cause     Cause
	Retryable bool
	Attempt   int
	Error     string
	NextRetry time.Time // zero unless a retry is scheduled

	Config Config
}
