// Package partition holds the mirror partition state machine: the states a
// mirrored partition moves through and the pure transition function that
// decides how it moves.
package partition

// State is the lifecycle state of one mirrored partition, as persisted in
// __mirror_state and shown by --describe and the console.
type State int8

const (
	Unknown State = iota // nothing cached yet
	LogAlignment
	EpochFencing
	Mirroring
	Pausing
	Paused
	Stopping
	Stopped
	Failed
	ULERecovery
)

// States lists every state in display order.
var States = []State{Unknown, LogAlignment, EpochFencing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed, ULERecovery}

// String returns the state's name as kafka-cluster-mirrors.sh prints it.
func (s State) String() string {
	switch s {
	case Unknown:
		return "UNKNOWN"
	case LogAlignment:
		return "LOG_ALIGNMENT"
	case EpochFencing:
		return "EPOCH_FENCING"
	case Mirroring:
		return "MIRRORING"
	case Pausing:
		return "PAUSING"
	case Paused:
		return "PAUSED"
	case Stopping:
		return "STOPPING"
	case Stopped:
		return "STOPPED"
	case Failed:
		return "FAILED"
	case ULERecovery:
		return "ULE_RECOVERY"
	}
	return "UNKNOWN"
}

// ParseState is the inverse of String; ok is false for an unknown name.
func ParseState(name string) (State, bool) {
	for _, s := range States {
		if s.String() == name {
			return s, true
		}
	}
	return Unknown, false
}
