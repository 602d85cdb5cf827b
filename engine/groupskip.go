package engine

// GroupSkip classifies why a group's offsets were not synced in a round,
// for counting (metrics); GroupSnapshot.SkipReason says it in words.
type GroupSkip int8

const (
	SkipNone GroupSkip = iota
	// SkipActive: the group has members on the destination; it consumes
	// there already and its offsets are its own.
	SkipActive
	// SkipNoOffsets: nothing committed (or no share state) on the
	// mirrored topics.
	SkipNoOffsets
	// SkipSourceUnreadable: the source's offsets could not be read.
	SkipSourceUnreadable
	// SkipDestinationUnreadable: the group could not be described on the
	// destination.
	SkipDestinationUnreadable
	// SkipWriteFailed: the destination refused or failed the write.
	SkipWriteFailed
)

// GroupSkips lists every reason, SkipNone included.
var GroupSkips = []GroupSkip{SkipNone, SkipActive, SkipNoOffsets, SkipSourceUnreadable, SkipDestinationUnreadable, SkipWriteFailed}

// String returns the snake_case name used in metric labels.
func (s GroupSkip) String() string {
	switch s {
	case SkipNone:
		return "none"
	case SkipActive:
		return "active_on_destination"
	case SkipNoOffsets:
		return "no_offsets"
	case SkipSourceUnreadable:
		return "source_unreadable"
	case SkipDestinationUnreadable:
		return "destination_unreadable"
	case SkipWriteFailed:
		return "destination_write_failed"
	}
	return "unknown"
}

// skip marks the group as not synced this round, why and in words.
func (gs *GroupSnapshot) skip(why GroupSkip, reason string) {
	gs.Skip, gs.SkipReason = why, reason
}
