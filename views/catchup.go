package views

import (
	"cmp"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// The catch-up estimate answers "when will this be in sync?" from what the
// console already sees: each snapshot's lag and destination log end. The
// engine publishes no such figure, and one snapshot cannot give it (a rate
// of copying says nothing about whether the source writes faster), so the
// console keeps a few recent samples per partition and compares the oldest
// with the newest.

// Catch-up history bounds: enough samples to smooth one slow poll, recent
// enough that a burst a minute ago does not decide the estimate.
const (
	etaSamples = 8
	etaWindow  = 30 * time.Second
)

// ETAKind is what the samples say about a lag.
type ETAKind int8

const (
	ETAUnknown  ETAKind = iota // one sample, offsets unknown, or not copying (paused, stopped)
	ETASynced                  // no lag
	ETACatching                // lag shrinks: In is the estimate
	ETAGrowing                 // the destination moves, but not faster than the source
	ETAStalled                 // lag and a destination that does not move
)

// String names the kind.
func (k ETAKind) String() string {
	switch k {
	case ETAUnknown:
		return "unknown"
	case ETASynced:
		return "synced"
	case ETACatching:
		return "catching-up"
	case ETAGrowing:
		return "growing"
	case ETAStalled:
		return "stalled"
	}
	return "unknown"
}

// ETA is a catch-up estimate: of one partition, or of a topic or mirror,
// which is in sync when its slowest partition is.
type ETA struct {
	Kind ETAKind
	In   time.Duration // with ETACatching
	// Stalled and Growing count the partitions behind an aggregate's
	// stalled or growing verdict (1 or 0 for a partition).
	Stalled, Growing int
}

// Text renders the estimate for a table cell: "—" when there is nothing to
// wait for or nothing to tell, "∞" when the lag grows.
func (e ETA) Text() string {
	switch e.Kind {
	case ETAUnknown, ETASynced:
		return "—"
	case ETACatching:
		return duration(e.In)
	case ETAGrowing:
		return "∞"
	case ETAStalled:
		return "stalled"
	}
	return "—"
}

// rank orders estimates from nothing to wait for to never: sorting by ETA
// and aggregating both use it. Unknown ranks above in sync, so a topic
// with a paused or just-seen partition never reads as in sync; a stall
// ranks above a growing lag because nothing at all is copied.
func (e ETA) rank() int {
	switch e.Kind {
	case ETASynced:
		return 0
	case ETAUnknown:
		return 1
	case ETACatching:
		return 2
	case ETAGrowing:
		return 3
	case ETAStalled:
		return 4
	}
	return 0
}

// compareETA orders a before b when a is sooner.
func compareETA(a, b ETA) int {
	return cmp.Or(cmp.Compare(a.rank(), b.rank()), cmp.Compare(a.In, b.In))
}

// worse folds e into an aggregate: the worst estimate wins and the stalled
// and growing partitions add up.
func (e ETA) worse(o ETA) ETA {
	out := e
	if compareETA(o, e) > 0 {
		out = o
	}
	out.Stalled, out.Growing = e.Stalled+o.Stalled, e.Growing+o.Growing
	return out
}

// etaSample is one look at a partition; at is the snapshot's Unix time in
// nanoseconds (a time.Time costs more to compare, 80,000 times a tick).
type etaSample struct {
	at        int64
	dest, lag int64
}

// etaTrack is a partition's recent samples, a ring, and the estimate of
// the newest.
type etaTrack struct {
	s    [etaSamples]etaSample
	n    int // samples held
	next int // where the next one goes
	seen uint64
	eta  ETA
	key  PartKey
}

func (t *etaTrack) add(s etaSample) {
	t.s[t.next] = s
	t.next = (t.next + 1) % etaSamples
	t.n = min(t.n+1, etaSamples)
}

func (t *etaTrack) newest() etaSample { return t.s[(t.next-1+etaSamples)%etaSamples] }

// oldest returns the oldest sample within etaWindow of the newest.
func (t *etaTrack) oldest() etaSample {
	last := t.newest()
	for i := t.n - 1; i > 0; i-- {
		s := t.s[(t.next-1-i+2*etaSamples)%etaSamples]
		if time.Duration(last.at-s.at) <= etaWindow {
			return s
		}
	}
	return last
}

// estimate is the pure rule: from the oldest and newest recent samples,
// lag ÷ the rate it shrinks at. The rate is the destination's growth minus
// the source's, which is the lag's fall.
func estimate(old, cur etaSample) ETA {
	switch {
	case cur.lag <= 0:
		return ETA{Kind: ETASynced}
	case cur.at <= old.at:
		return ETA{Kind: ETAUnknown}
	case cur.dest <= old.dest:
		return ETA{Kind: ETAStalled, Stalled: 1}
	case cur.lag >= old.lag:
		return ETA{Kind: ETAGrowing, Growing: 1}
	}
	dt := time.Duration(cur.at - old.at)
	rate := float64(old.lag-cur.lag) / dt.Seconds()
	return ETA{Kind: ETACatching, In: time.Duration(float64(cur.lag) / rate * float64(time.Second))}
}

// copying reports whether a partition in st is expected to close its lag:
// paused and stopped ones are not, and saying "stalled" for them would
// cry wolf.
func copying(st partition.State) bool {
	switch st {
	case partition.Pausing, partition.Paused, partition.Stopping, partition.Stopped, partition.Unknown:
		return false
	case partition.LogAlignment, partition.EpochFencing, partition.Mirroring, partition.Failed, partition.ULERecovery:
		return true
	}
	return false
}

// TopicKey identifies one mirrored topic.
type TopicKey struct{ Mirror, Topic string }

// ETAs are one snapshot's estimates, valid until the next Observe (the
// partitions' are read from the history itself: copying 10,000 of them
// into a map per snapshot was most of the cost of a tick). A nil *ETAs
// answers ETAUnknown.
type ETAs struct {
	part   map[PartKey]*etaTrack
	topic  map[TopicKey]ETA
	mirror map[string]ETA
}

// Partition returns the estimate for one partition.
func (e *ETAs) Partition(k PartKey) ETA {
	if e == nil {
		return ETA{}
	}
	if t := e.part[k]; t != nil {
		return t.eta
	}
	return ETA{}
}

// Topic returns the estimate for a topic: its slowest partition's.
func (e *ETAs) Topic(mirror, topic string) ETA {
	if e == nil {
		return ETA{}
	}
	return e.topic[TopicKey{mirror, topic}]
}

// Mirror returns the estimate for a whole mirror.
func (e *ETAs) Mirror(name string) ETA {
	if e == nil {
		return ETA{}
	}
	return e.mirror[name]
}

// Catchup keeps the recent samples of every partition. The root model owns
// one and feeds it each snapshot once; it reads no clock (the snapshot's
// Taken is the sample time), so tests drive it with fixed snapshots.
type Catchup struct {
	tracks map[PartKey]*etaTrack
	// order is each mirror's tracks in the last snapshot's partition order.
	// Snapshots list partitions in the same order tick after tick, so the
	// track at the same index is almost always the one: comparing its key
	// costs less than hashing two strings for each of 10,000 partitions.
	order map[string][]*etaTrack
	gen   uint64
}

// NewCatchup returns an empty history.
func NewCatchup() *Catchup {
	return &Catchup{tracks: map[PartKey]*etaTrack{}, order: map[string][]*etaTrack{}}
}

// Observe records snap and returns its estimates. A snapshot polled twice
// (same Taken) adds no sample; partitions gone from snap are forgotten.
func (c *Catchup) Observe(snap *engine.Snapshot) *ETAs {
	c.gen++
	at := snap.Taken.UnixNano()
	out := &ETAs{part: c.tracks, topic: map[TopicKey]ETA{}, mirror: map[string]ETA{}}
	for i := range snap.Mirrors {
		m := &snap.Mirrors[i]
		var mirrorETA, topicETA ETA
		last := c.order[m.Name]
		order := make([]*etaTrack, len(m.Partitions))
		// Partitions come sorted by topic: a topic is a run.
		for j := range m.Partitions {
			p := &m.Partitions[j]
			k := keyOf(p)
			var t *etaTrack
			if j < len(last) && last[j].key == k {
				t = last[j]
				t.seen = c.gen
			} else {
				t = c.track(k)
			}
			order[j] = t
			t.eta = t.estimate(p, at)
			e := t.eta
			switch {
			case j == 0:
				mirrorETA, topicETA = e, e
			case p.Topic != m.Partitions[j-1].Topic:
				putTopic(out, m.Name, m.Partitions[j-1].Topic, topicETA)
				mirrorETA, topicETA = mirrorETA.worse(e), e
			default:
				mirrorETA, topicETA = mirrorETA.worse(e), topicETA.worse(e)
			}
		}
		if n := len(m.Partitions); n > 0 {
			putTopic(out, m.Name, m.Partitions[n-1].Topic, topicETA)
		}
		out.mirror[m.Name] = mirrorETA
		c.order[m.Name] = order
	}
	for name := range c.order {
		if findMirror(snap, name) == nil {
			delete(c.order, name)
		}
	}
	for k, t := range c.tracks {
		if t.seen != c.gen {
			delete(c.tracks, k)
		}
	}
	return out
}

// putTopic records a topic's estimate, folding it with one already there
// (a snapshot that is not sorted would split a topic into runs).
func putTopic(out *ETAs, mirror, topic string, e ETA) {
	k := TopicKey{mirror, topic}
	if prev, ok := out.topic[k]; ok {
		e = prev.worse(e)
	}
	out.topic[k] = e
}

func (c *Catchup) track(k PartKey) *etaTrack {
	t := c.tracks[k]
	if t == nil {
		t = &etaTrack{key: k}
		c.tracks[k] = t
	}
	t.seen = c.gen
	return t
}

// estimate adds p's sample and estimates from the recent ones.
func (t *etaTrack) estimate(p *engine.PartitionSnapshot, at int64) ETA {
	if p.SourceHWM < 0 || p.DestLogEnd < 0 {
		t.n = 0 // a gap in what is known is no rate
		return ETA{}
	}
	s := etaSample{at: at, dest: p.DestLogEnd, lag: p.Lag}
	switch {
	case t.n > 0 && s.dest < t.newest().dest:
		t.n = 0 // the destination was truncated or rebuilt: old samples say nothing
		t.add(s)
	case t.n == 0 || at > t.newest().at:
		t.add(s)
	}
	if !copying(p.State) {
		if p.Lag <= 0 {
			return ETA{Kind: ETASynced}
		}
		return ETA{}
	}
	return estimate(t.oldest(), t.newest())
}
