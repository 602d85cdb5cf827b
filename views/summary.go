package views

import (
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// Summary aggregates partitions for the header and the mirrors view. It is
// computed once per snapshot, not per frame: with ten thousand partitions the
// difference is visible.
type Summary struct {
	Partitions    int
	Counts        map[partition.State]int
	TotalLag      int64
	WorstLagTime  time.Duration
	WorstAt       string // "mirror/topic/partition" of the worst lag time
	BytesPerSec   float64
	BatchesPerSec float64
	RecordsPerSec float64 // what an observer can tell of the rate

	// Outages are the mirrors whose source does not answer; LagUnknown
	// counts their partitions, whose lag in records is then unknown (the
	// lag in time still grows). A header or card must say so in the error
	// style, never "lag 0".
	Outages    []Outage
	LagUnknown int
	// LossAtLeast and LossAtMost bound, while a source does not answer,
	// the writes a failover now loses, in time: at least the lag at the
	// source's last answer, at most that plus the time since (the
	// source may have taken writes until now). Zero without an outage.
	LossAtLeast, LossAtMost time.Duration

	// Stopped counts the STOPPED partitions (failed over): their lag is
	// history, what matters is what the stop left on the source.
	// NotMirrored sums the source records beyond their last mirrored
	// offsets where the source's end is known; NotMirroredUnknown
	// counts those where it is not (the source was unreachable), whose
	// loss must read "unknown", never 0.
	// NotMirroredAtLeast: the source of a stopped partition does not
	// answer, so its count is only what its last answer showed.
	Stopped            int
	NotMirrored        int64
	NotMirroredUnknown int
	NotMirroredAtLeast bool

	// Work is the long work running, by mirror, topic and kind, in
	// snapshot order.
	Work []WorkSum
}

// Outage is a mirror whose source cluster does not answer.
type Outage struct {
	Mirror  string
	Source  string // the first bootstrap server, or the cluster id
	Since   time.Time
	Error   string
	Waiting int // its partitions that need the source (not paused or stopped)
}

// addMirror counts a mirror's partitions and its source's outage, as of
// taken (the snapshot's time).
func (s *Summary) addMirror(m *engine.MirrorSnapshot, taken time.Time) {
	for j := range m.Partitions {
		s.add(&m.Partitions[j])
	}
	if !m.SourceReach.Down {
		return
	}
	src := m.Source.ID
	if len(m.Source.Bootstrap) > 0 {
		src = m.Source.Bootstrap[0]
	}
	o := Outage{Mirror: m.Name, Source: src, Since: m.SourceReach.DownSince, Error: m.SourceReach.Error}
	contact := m.SourceReach.LastOK
	if contact.IsZero() {
		contact = m.SourceReach.DownSince
	}
	silent := max(taken.Sub(contact), 0)
	for j := range m.Partitions {
		switch p := &m.Partitions[j]; {
		case needsSource(p.State):
			o.Waiting++
			s.LossAtLeast = max(s.LossAtLeast, p.LagAtContact)
			s.LossAtMost = max(s.LossAtMost, p.LagAtContact+silent)
		case p.State == partition.Stopped:
			s.NotMirroredAtLeast = true
		}
	}
	s.Outages = append(s.Outages, o)
}

// needsSource reports a state in which a partition is expected to follow
// its source: its lag is then something the operator must be able to read.
func needsSource(st partition.State) bool {
	switch st {
	case partition.LogAlignment, partition.EpochFencing, partition.Mirroring, partition.Failed, partition.ULERecovery:
		return true
	case partition.Unknown, partition.Paused, partition.Pausing, partition.Stopped, partition.Stopping:
	}
	return false
}

func (s *Summary) add(p *engine.PartitionSnapshot) {
	if s.Counts == nil {
		s.Counts = map[partition.State]int{}
	}
	s.Partitions++
	s.Counts[p.State]++
	if p.SourceHWM < 0 && needsSource(p.State) {
		// The source's end is not known here (an outage, or the first
		// look not answered yet): its lag is unknown, not zero.
		s.LagUnknown++
	}
	if p.State == partition.Stopped {
		s.Stopped++
		switch {
		case p.SourceHWM < 0:
			s.NotMirroredUnknown++
		case p.SourceHWM > p.LastOffset+1:
			s.NotMirrored += p.SourceHWM - (p.LastOffset + 1)
		}
	}
	s.TotalLag += p.Lag
	if p.LagTime > s.WorstLagTime {
		s.WorstLagTime = p.LagTime
		s.WorstAt = p.Mirror + "/" + p.Topic + "/" + itoa32(p.Partition)
	}
	s.BytesPerSec += p.BytesPerSec
	s.BatchesPerSec += p.BatchesPerSec
	s.RecordsPerSec += p.RecordsPerSec
	if p.Progress != nil {
		s.addWork(p)
	}
}

// SummarizeMirror aggregates one mirror of a snapshot taken at taken.
func SummarizeMirror(m *engine.MirrorSnapshot, taken time.Time) Summary {
	var s Summary
	s.addMirror(m, taken)
	return s
}

// Summarize aggregates every mirror of a snapshot.
func Summarize(snap *engine.Snapshot) Summary {
	var s Summary
	for i := range snap.Mirrors {
		s.addMirror(&snap.Mirrors[i], snap.Taken)
	}
	return s
}

// lossWindow renders, while a source does not answer, what a failover
// now loses as the range the console can prove: at least the lag at the
// source's last answer, at most that plus the time since. (The time since
// alone is not a lower bound: a caught-up mirror loses only what the
// source took after it stopped answering, if anything.)
func lossWindow(skin *Skin, sum *Summary) string {
	return skin.Label.Render("RPO ") + skin.Err.Render("between "+duration(sum.LossAtLeast)+" and "+duration(sum.LossAtMost))
}

// stateItems renders the non-zero state counts in display order, each
// label in its state style: ["MIRRORING 12", "PAUSED 3", "FAILED 1"].
func stateItems(skin *Skin, counts map[partition.State]int) []string {
	var items []string
	for _, st := range partition.States {
		if n := counts[st]; n > 0 {
			items = append(items, skin.RenderState(st)+" "+itoa(n))
		}
	}
	return items
}

// notMirrored renders what the stop of every partition of sum left on the
// source, when they are all stopped (ok false otherwise): how many
// partitions failed over and the records not mirrored, their lag and RPO
// no longer moving. A source gone at the stop makes the count unknown for
// its partitions (their last mirrored offsets are known: the records
// beyond them on the source are what is lost), and a source that no longer
// answers makes it a lower bound (its last answer), both in the error
// style.
func notMirrored(skin *Skin, sum *Summary) (string, bool) {
	if sum.Partitions == 0 || sum.Stopped != sum.Partitions {
		return "", false
	}
	what := itoa(sum.Stopped) + " partitions"
	if sum.Stopped == 1 {
		what = "1 partition"
	}
	label := skin.Text.Render(what) + skin.Label.Render(" failed over, not mirrored: ")
	switch {
	case sum.NotMirroredUnknown == sum.Stopped:
		return label + skin.Err.Render("unknown, source gone at the stop"), true
	case sum.NotMirroredUnknown > 0:
		return label + skin.Err.Render("≥ "+groupDigits(sum.NotMirrored)+" records, "+itoa(sum.NotMirroredUnknown)+" partitions unknown"), true
	case sum.NotMirroredAtLeast:
		return label + skin.Err.Render("≥ "+groupDigits(sum.NotMirrored)+" records"), true
	case sum.NotMirrored > 0:
		return label + skin.Warn.Render(groupDigits(sum.NotMirrored)+" records"), true
	}
	return label + skin.Text.Render("0 records"), true
}
