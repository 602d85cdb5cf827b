package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The topics every scenario mirrors, with their first partition counts.
var topicNames = []string{"t0", "t1"}

const (
	firstPartitions = 2
	maxPartitions   = 4 // grow stops here
	slots           = 3 // engine instances at most
)

// desired is what the operator last asked of a topic.
type desired int8

const (
	wantStart desired = iota
	wantPause
	wantStop
)

func (d desired) String() string {
	switch d {
	case wantStart:
		return "start"
	case wantPause:
		return "pause"
	case wantStop:
		return "stop"
	}
	return fmt.Sprintf("desired(%d)", int8(d))
}

// model is the part of a scenario's state that decides which steps make
// sense: drawing steps uses it alone, and the world keeps one in step with
// what it did, so a replayed or shrunk list skips what no longer fits.
type model struct {
	running [slots]bool
	srcDown bool
	dstDown int32 // the destination broker held down, -1 none
	txnOpen bool
	zombie  bool // a zombie's Produce held in the destination's network
	desired map[string]desired
	parts   map[string]int32
}

func newModel() *model {
	m := &model{dstDown: -1, desired: map[string]desired{}, parts: map[string]int32{}}
	for _, t := range topicNames {
		m.parts[t] = firstPartitions
	}
	m.running[0] = true // every scenario starts with one instance
	return m
}

func (m *model) instances() int {
	n := 0
	for _, r := range m.running {
		if r {
			n++
		}
	}
	return n
}

// live reports whether a topic is still mirrored (not failed over).
func (m *model) live(t string) bool { return m.desired[t] != wantStop }

// anyTopic reports whether pred holds for some topic.
func (m *model) anyTopic(pred func(string) bool) bool { return slices.ContainsFunc(topicNames, pred) }

// everyTopic reports whether pred holds for every topic.
func (m *model) everyTopic(pred func(string) bool) bool {
	return !slices.ContainsFunc(topicNames, func(t string) bool { return !pred(t) })
}

// possible reports whether some step of kind k fits the state.
func (m *model) possible(k kind) bool {
	srcUp, dstUp := !m.srcDown, m.dstDown < 0
	switch k {
	case kProduce, kTxnCommit, kTxnAbort:
		return srcUp
	case kTxnOpen:
		return srcUp && !m.txnOpen
	case kTxnClose:
		return srcUp && m.txnOpen
	case kTxnTimeout:
		return srcUp && dstUp && !m.txnOpen && m.instances() > 0 && m.anyTopic(func(t string) bool { return m.desired[t] == wantStart })
	case kStop, kRebuildStop:
		return dstUp && m.anyTopic(m.live)
	case kPause, kRecover, kRebuild:
		return dstUp && m.anyTopic(m.live)
	case kResume:
		return dstUp && m.anyTopic(func(t string) bool { return m.desired[t] == wantPause })
	case kKill:
		return m.instances() > 0
	case kStart:
		return m.instances() < slots
	case kSrcDown:
		return srcUp
	case kSrcUp:
		return !srcUp
	case kDstDown:
		return dstUp
	case kDstUp:
		return !dstUp
	case kForeign, kMoveDst:
		return dstUp
	case kDelRec:
		return srcUp
	case kGrow:
		return srcUp && m.anyTopic(func(t string) bool { return m.live(t) && m.parts[t] < maxPartitions })
	case kMoveSrc:
		return true
	case kZombie:
		return srcUp && dstUp && !m.zombie && m.instances() == 1 && m.anyTopic(func(t string) bool { return m.desired[t] == wantStart })
	case kThaw:
		return m.zombie && dstUp
	}
	return false
}

// args draws the arguments of a step of kind k.
func (m *model) args(rng *rand.Rand, k kind) step {
	s := step{Kind: k}
	for _, a := range argsOf(k) {
		switch a {
		case 't':
			s.Topic = topicNames[rng.IntN(len(topicNames))]
			if (k == kStop || k == kPause || k == kResume || k == kRecover) && rng.IntN(4) == 0 {
				s.Topic = "*"
			}
		case 'p':
			// Ifs, not switches over kind: the exhaustive linter wants
			// every kind at a switch, and most take the default here.
			if k == kKill || k == kStart || k == kDstDown {
				s.P = int32(rng.IntN(slots))
				break
			}
			if k == kZombie {
				for slot := range int32(slots) {
					if m.running[slot] {
						s.P = slot
					}
				}
				break
			}
			s.P = int32(rng.IntN(int(m.parts[s.Topic])))
			if k == kProduce && rng.IntN(2) == 0 {
				s.P = -1
			}
		case 'n':
			if k == kDelRec {
				s.N = 10 + rng.IntN(91) // percent of the way to the end
			} else if k == kForeign {
				s.N = 1 + rng.IntN(3)
			} else {
				s.N = 1 + rng.IntN(20)
			}
		case 'm':
			modes := []string{"plain", "idem"}
			if k == kTxnClose {
				modes = []string{"commit", "abort"}
			}
			s.Mode = modes[rng.IntN(len(modes))]
		}
	}
	return s
}

// applicable reports whether s fits the state; a world skips the steps of
// a replayed or shrunk list that do not.
func (m *model) applicable(s step) bool {
	if !m.possible(s.Kind) {
		return false
	}
	topicOK := func(pred func(string) bool) bool {
		if s.Topic == "*" {
			return m.anyTopic(pred)
		}
		return slices.Contains(topicNames, s.Topic) && pred(s.Topic)
	}
	partOK := s.Topic != "*" && s.P >= -1 && s.P < m.parts[s.Topic]
	switch s.Kind {
	case kProduce:
		return partOK
	case kTxnCommit, kTxnAbort, kTxnOpen, kForeign, kDelRec, kMoveSrc, kMoveDst:
		return partOK && s.P >= 0
	case kTxnTimeout:
		return partOK && s.P >= 0 && m.desired[s.Topic] == wantStart
	case kStop, kRebuildStop:
		return topicOK(m.live)
	case kPause, kRecover, kRebuild, kResume:
		// A command for every topic reaches the STOPPED ones too (a
		// resume of all topics mirrors a failed-over one again): the
		// explorer sends those only while no topic is stopped.
		if s.Topic == "*" && !m.everyTopic(m.live) {
			return false
		}
		if s.Kind == kResume {
			return topicOK(func(t string) bool { return m.desired[t] == wantPause })
		}
		return topicOK(m.live)
	case kGrow:
		return topicOK(func(t string) bool { return m.live(t) && m.parts[t] < maxPartitions })
	case kKill:
		return s.P >= 0 && s.P < slots && m.running[s.P]
	case kStart:
		return s.P >= 0 && s.P < slots && !m.running[s.P]
	case kDstDown:
		return s.P >= 0 && s.P < 3
	case kTxnClose:
		return s.Mode == "commit" || s.Mode == "abort"
	case kZombie:
		return slices.Contains(topicNames, s.Topic) && m.desired[s.Topic] == wantStart && s.P >= 0 && s.P < slots && m.running[s.P]
	case kSrcDown, kSrcUp, kDstUp, kThaw:
		return true
	}
	return false
}

// topicsOf is the topics a command step names.
func topicsOf(s step) []string {
	if s.Topic == "*" {
		return topicNames
	}
	return []string{s.Topic}
}

// apply records what s did.
func (m *model) apply(s step) {
	switch s.Kind {
	case kTxnOpen:
		m.txnOpen = true
	case kTxnClose:
		m.txnOpen = false
	case kStop, kPause, kResume, kRebuildStop:
		want := map[kind]desired{kStop: wantStop, kRebuildStop: wantStop, kPause: wantPause, kResume: wantStart}[s.Kind]
		for _, t := range topicsOf(s) {
			// A stopped topic stays stopped: pause and resume are for
			// topics still mirrored.
			if m.live(t) && (s.Kind != kResume || m.desired[t] == wantPause) {
				m.desired[t] = want
			}
		}
	case kKill:
		m.running[s.P] = false
	case kZombie:
		m.running[s.P], m.zombie = false, true
	case kThaw:
		m.zombie = false
	case kStart:
		m.running[s.P] = true
	case kSrcDown:
		m.srcDown = true
	case kSrcUp:
		m.srcDown = false
	case kDstDown:
		m.dstDown = s.P
	case kDstUp:
		m.dstDown = -1
	case kGrow:
		m.parts[s.Topic]++
	case kProduce, kTxnCommit, kTxnAbort, kTxnTimeout, kRecover, kRebuild, kDelRec, kMoveSrc, kMoveDst, kForeign:
	}
}
