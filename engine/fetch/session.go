package fetch

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An idle partition costs its fetcher nothing per long-poll: its want is
// parked in the fetcher's fetch session (KIP-227) instead of being
// answered. The broker keeps the session's partitions and their fetch
// offsets; each session request names only the partitions that joined or
// left it since the previous one, and the answer only the partitions with
// something new (records, an error, a moved high watermark or log start).
// A partition leaves the session when its answer is delivered, and joins
// it again once an answer to it is empty: its runner is woken only when
// there is something to copy.

// sessKey names a partition in a session: its topic by its index in
// the session's topics, so that the key of every idle partition is 8
// bytes, not a name's 16 and a partition's.
type sessKey struct {
	topic     uint32
	partition int32
}

// sessTopic is a topic of a session's members, current or former.
type sessTopic struct {
	name string
	id   [16]byte // the topic id the members' wants named last
}

// member is a partition waiting in a session: what its next request and
// answer need of its want, and no more, since every idle partition keeps
// one (its topic id is the topic's, in topicIDs).
type member[R Receiver] struct {
	To          R
	Offset      int64
	Gen         uint64
	LeaderEpoch int32
	LastEpoch   int32
	MaxBytes    int32
}

// want is the want m was parked from, at partition k.
func (m member[R]) want(k sessKey, topicID [16]byte) Want[R] {
	return Want[R]{
		TopicID: topicID, To: m.To, Offset: m.Offset, Gen: m.Gen, Partition: k.partition,
		LeaderEpoch: m.LeaderEpoch, LastEpoch: m.LastEpoch, MaxBytes: m.MaxBytes,
	}
}

// session is a fetcher's session with its broker. Its requests go one
// at a time (the broker numbers them); the fetcher's run loop sends them,
// its connections answer them.
type session[R Receiver] struct {
	mu      sync.Mutex
	id      int32
	epoch   int32 // 0: the next request opens a new session, listing every member
	members map[sessKey]member[R]
	topics  []sessTopic          // by index (sessKey.topic); a topic keeps its index
	byName  map[string]uint32    // the index of a topic
	ids     map[[16]byte]uint32  // the index of a topic id's topic, for v13+ answers
	changed map[sessKey]struct{} // members to list in the next request: joined, or the broker has not seen them
	forget  map[sessKey][16]byte // former members the broker still holds, with their topic ids
	polling bool                 // a session request is in flight
	polls   int                  // requests answered, for the sweep of exited runners
}

// sweepEvery is how many session answers pass between two sweeps of the
// members whose runner has exited (a topic that moved to another owner).
const sweepEvery = 100

func newSession[R Receiver]() *session[R] {
	return &session[R]{
		members: make(map[sessKey]member[R]), byName: make(map[string]uint32), ids: make(map[[16]byte]uint32),
		changed: make(map[sessKey]struct{}), forget: make(map[sessKey][16]byte),
	}
}

// park makes w a member: its partition is idle at w.Offset.
func (s *session[R]) park(w Want[R]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := w.topic()
	i, ok := s.byName[name]
	if !ok {
		i = uint32(len(s.topics))
		s.topics = append(s.topics, sessTopic{name: name})
		s.byName[name] = i
	}
	s.topics[i].id = w.TopicID
	s.ids[w.TopicID] = i
	k := sessKey{i, w.Partition}
	s.members[k] = member[R]{To: w.To, Offset: w.Offset, Gen: w.Gen, LeaderEpoch: w.LeaderEpoch, LastEpoch: w.LastEpoch, MaxBytes: w.MaxBytes}
	s.changed[k] = struct{}{}
	delete(s.forget, k)
}

// leave removes the member of w's partition, if any: a newer want of the
// partition replaces it. It reports whether there was one.
func (s *session[R]) leave(w Want[R]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byName[w.topic()]
	return ok && s.leaveLocked(sessKey{i, w.Partition})
}

func (s *session[R]) leaveLocked(k sessKey) bool {
	if _, ok := s.members[k]; !ok {
		return false
	}
	delete(s.members, k)
	delete(s.changed, k)
	s.forget[k] = s.topics[k.topic].id
	return true
}

// waiting reports whether a session request is due (see due), without
// marking it in flight.
func (s *session[R]) waiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitingLocked()
}

func (s *session[R]) waitingLocked() bool {
	return !s.polling && (len(s.members) > 0 || len(s.forget) > 0)
}

// due reports whether a session request should go now: none is in
// flight, and there are members to poll or former members to forget.
// It marks the request in flight when it does.
func (s *session[R]) due() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waitingLocked() {
		return false
	}
	s.polling = true
	return true
}

// A broker reads every partition of a session for each request on it, to
// find those with something new, so a session polled every
// fetch.wait.max.ms costs the source in proportion to its idle partitions:
// measured on the in-memory brokers, about 2µs a member a request, and
// 100,000 idle partitions polled every 100ms took all of a core. The
// session's long-poll therefore grows with its members, sessionWaitPerMember
// each, up to maxSessionWait. A long-poll ends as soon as any member has
// something new, so the members' records wait no longer for it; what waits
// longer is a partition that has just gone idle, which the broker watches
// from the next session request on.
const (
	sessionWaitPerMember = 20 * time.Microsecond
	maxSessionWait       = time.Second
)

// size is how many members the session has.
func (s *session[R]) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.members)
}

// wait is the long-poll of the next session request, in milliseconds:
// least, or longer for a large session (sessionWaitPerMember).
func (s *session[R]) wait(least int32) int32 {
	w := min(time.Duration(s.size())*sessionWaitPerMember, maxSessionWait)
	return max(least, int32(w/time.Millisecond))
}

// request builds the next session request: every member when the session
// is new, else the members that changed and the former members to forget.
func (s *session[R]) request(maxWait int32, limits Limits) *kmsg.FetchRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := newFetchRequest(maxWait, limits)
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	topics := make(map[uint32]int)
	add := func(k sessKey, m member[R]) {
		i, ok := topics[k.topic]
		if !ok {
			i = len(req.Topics)
			topics[k.topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = s.topics[k.topic].name, s.topics[k.topic].id
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fetchPartition(m.want(k, [16]byte{})))
	}
	if s.epoch == 0 {
		for k, m := range s.members {
			add(k, m)
		}
		clear(s.forget) // a new session holds nothing else
	} else {
		for k := range s.changed {
			add(k, s.members[k])
		}
		forgotten := make(map[uint32]int)
		for k, id := range s.forget {
			i, ok := forgotten[k.topic]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[k.topic] = i
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic, ft.TopicID = s.topics[k.topic].name, id
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, k.partition)
		}
		clear(s.forget)
	}
	clear(s.changed)
	return req
}

// failed ends a session request that got no answer (a lost connection, a
// hung broker): what the broker holds is unknown, so the next request
// opens a new session, and every member leaves with the error, as the
// partitions of a failed sessionless fetch hear of it.
func (s *session[R]) failed(broker int32, err error) (deliver []Want[R], results []Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.epoch, s.polling = 0, 0, false
	return s.dropAllLocked(broker, err, Since())
}

// dropAllLocked makes every member leave with err.
func (s *session[R]) dropAllLocked(broker int32, err error, at time.Duration) (deliver []Want[R], results []Result) {
	for k, m := range s.members {
		t := s.topics[k.topic]
		deliver = append(deliver, m.want(k, t.id))
		s.leaveLocked(k)
		results = append(results, Result{Gen: m.Gen, Offset: m.Offset, At: at, Err: fetchErr(t.name, k.partition, m.Offset, broker, err)})
	}
	return deliver, results
}

// answer takes the answer to a session request: it returns the members
// whose answers go to their runners (they leave the session) with those
// answers; members whose answer holds nothing new stay, their source
// offsets published.
func (s *session[R]) answer(fr *kmsg.FetchResponse, broker int32, at, rtt time.Duration) (deliver []Want[R], results []Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polling = false
	s.polls++
	if s.polls%sweepEvery == 0 {
		for k, m := range s.members {
			if m.To.Exited() {
				s.leaveLocked(k)
			}
		}
	}
	switch err := kerr.ErrorForCode(fr.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.FetchSessionIDNotFound) || errors.Is(err, kerr.InvalidFetchSessionEpoch):
		s.id, s.epoch = 0, 0 // the broker lost or refused the session: open a new one
		return nil, nil
	default:
		// The whole request failed: every member hears of it, as
		// after a sessionless fetch.
		s.id, s.epoch = 0, 0
		return s.dropAllLocked(broker, err, at)
	}
	switch {
	case fr.SessionID == 0:
		s.id, s.epoch = 0, 0 // the broker keeps no session: the next request lists every member again
	case s.epoch == 0:
		s.id, s.epoch = fr.SessionID, 1
	default:
		s.epoch++
		if s.epoch < 0 {
			s.epoch = 1
		}
	}
	for _, t := range fr.Topics {
		ti, ok := s.byName[t.Topic]
		if t.Topic == "" {
			ti, ok = s.ids[t.TopicID]
		}
		if !ok {
			continue // a topic the session never had
		}
		name := s.topics[ti].name
		for i := range t.Partitions {
			p := &t.Partitions[i]
			k := sessKey{ti, p.Partition}
			m, ok := s.members[k]
			if !ok {
				continue // left the session since the request was built
			}
			w := m.want(k, s.topics[ti].id)
			res := resultOf(w, p, name, broker, at, rtt)
			if res.idleAt(w.Offset) {
				w.To.SetSource(res.HWM, res.LogStart)
				continue
			}
			s.leaveLocked(k)
			deliver = append(deliver, w)
			results = append(results, res)
		}
	}
	return deliver, results
}
