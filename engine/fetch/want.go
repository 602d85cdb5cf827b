// Package fetch is the mirror's fetchers: each sends raw Fetch requests
// for the partitions that want data to one source broker, over connections
// of its own, and answers each partition's want once. The partitions' runners
// own their positions; a fetcher keeps no per-partition state beyond the
// pending wants and its fetch session (session.go) of idle partitions.
package fetch

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Receiver is the owner of a partition's wants: the runner that mirrors it.
// A fetcher calls it from its own goroutines. A fetcher is generic in its
// receivers' type (a pointer to the runner) rather than holding them as
// interfaces: every want, and every idle partition's want in a fetch
// session, then takes a word less, and the queue's index is keyed by the
// pointer.
type Receiver interface {
	comparable
	// Topic is the partition's topic.
	Topic() string
	// Deliver hands over the answer to one of the receiver's wants; it
	// must never block (the fetcher serves other partitions too).
	Deliver(Result)
	// Exited reports whether the receiver has stopped for good: its wants
	// still waiting are dropped.
	Exited() bool
	// SetSource publishes the source's high watermark and log start of an
	// answer the receiver is not woken for (nothing new: the want waits in
	// the fetch session).
	SetSource(hwm, logStart int64)
}

// Want asks a fetcher for one partition's records from Offset. The runner
// that owns the partition keeps at most one want outstanding; the fetcher
// answers it exactly once with To.Deliver, which never blocks the fetcher.
//
// A fetcher holds every idle partition's want, some twice (queued and in a
// long-poll's request), so it is kept small: the topic is the receiver's.
type Want[R Receiver] struct {
	TopicID     [16]byte
	To          R // answered with To.Deliver; To.Topic names the topic
	Offset      int64
	Gen         uint64
	Partition   int32
	LeaderEpoch int32 // CurrentLeaderEpoch: the source epoch the runner last saw
	LastEpoch   int32 // LastFetchedEpoch: epoch of the last batch fetched, -1 none
	MaxBytes    int32
	Behind      bool // Offset is below the high watermark last seen: data is waiting
	// MustAnswer: the runner must hear even an empty answer (it is
	// retrying after a fetch error, and an answer ends that), so the
	// want is never parked in the fetch session.
	MustAnswer bool
}

// topic is the topic of the want's partition.
func (w *Want[R]) topic() string { return w.To.Topic() }

// Result is a fetcher's answer to a want.
type Result struct {
	Gen        uint64
	Offset     int64  // the offset that was asked for
	Records    []byte // raw batches, still compressed; owned by the receiver
	HWM        int64
	LogStart   int64
	Divergence *kmsg.FetchResponseTopicPartitionDivergingEpoch // nil unless the broker reported one
	Err        error
	At         time.Duration // when the answer arrived, as Since()
	// RTT is the fetcher's estimate of its round trip to the broker
	// (roundTrips), 0 when it has none yet.
	RTT time.Duration
}

// Empty reports whether the answer holds no records, no error and no
// divergence (an idle long-poll).
func (res *Result) Empty() bool {
	return res.Err == nil && len(res.Records) == 0 && res.Divergence == nil
}

// idleAt reports whether the answer to a want at offset holds nothing a
// runner must see: no records, no error, no divergence, nothing beyond
// the offset.
func (res *Result) idleAt(offset int64) bool {
	return res.Empty() && res.HWM <= offset
}

// clockBase anchors Result.At: a duration on the monotonic clock takes
// eight bytes where a time.Time takes twenty-four, and every runner holds
// a Result in its inbox.
var clockBase = time.Now()

// Since is the time now as a Result.At.
func Since() time.Duration { return time.Since(clockBase) }

// ArrivedAt is the time of a Result.At.
func ArrivedAt(at time.Duration) time.Time { return clockBase.Add(at) }

// wantQueue holds the wants waiting for a connection, one per partition: a
// newer want replaces the older one in place (a runner that realigned posts
// a new want while its previous one may still wait here; the want of a
// runner that has exited is dropped when taken, see dropExited), so one
// request never asks for a partition twice; the answers could not be told
// apart.
type wantQueue[R Receiver] struct {
	wants []Want[R]
	at    map[R]int32 // index in wants of each partition's want
}

func (q *wantQueue[R]) len() int { return len(q.wants) }

func (q *wantQueue[R]) add(w Want[R]) {
	if i, ok := q.at[w.To]; ok {
		q.wants[i] = w
		return
	}
	if q.at == nil {
		q.at = make(map[R]int32)
	}
	q.at[w.To] = int32(len(q.wants))
	q.wants = append(q.wants, w)
}

// takeAll removes and returns every want, in a slice of their exact size:
// the slice lives as long as the long-poll it is sent in, and the room a
// queue grown by appending keeps (up to as much again) would live with it.
func (q *wantQueue[R]) takeAll() []Want[R] {
	out := slices.Clone(q.wants)
	q.wants = nil
	clear(q.at)
	return dropExited(out)
}

// dropExited removes the wants of receivers that have exited. The queue
// knows a partition's want by its receiver, and a topic removed and added
// again (its ownership moved away and back) has a new runner for the same
// partition while the old one's want may still wait: one request must not
// ask for the partition twice.
func dropExited[R Receiver](ws []Want[R]) []Want[R] {
	return slices.DeleteFunc(ws, func(w Want[R]) bool { return w.To.Exited() })
}

// takeBehind removes and returns the wants of partitions known to be
// behind, nil if there are none.
func (q *wantQueue[R]) takeBehind() []Want[R] {
	behind, rest := splitBehind(q.wants)
	if len(behind) == 0 {
		return nil
	}
	q.wants = rest
	clear(q.at)
	for i, w := range rest {
		q.at[w.To] = int32(i)
	}
	return dropExited(behind)
}

// splitBehind separates the wants of partitions known to be behind from the
// others, into new slices.
func splitBehind[R Receiver](pending []Want[R]) (behind, rest []Want[R]) {
	n := 0
	for _, w := range pending {
		if w.Behind {
			n++
		}
	}
	if n == 0 {
		return nil, pending
	}
	behind = make([]Want[R], 0, n)
	rest = make([]Want[R], 0, len(pending)-n)
	for _, w := range pending {
		if w.Behind {
			behind = append(behind, w)
		} else {
			rest = append(rest, w)
		}
	}
	return behind, rest
}
