package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// kind is what one step of a scenario does.
type kind string

// The step kinds, most valuable first. A step's arguments are in its
// fields (see argsOf); which ones a kind uses is fixed, so a step list
// prints and parses back as it was drawn.
const (
	kProduce    kind = "produce"     // Topic, P (-1: every partition), N records, Mode plain|idem
	kTxnCommit  kind = "txn-commit"  // Topic, P, N: a source transaction, committed
	kTxnAbort   kind = "txn-abort"   // Topic, P, N: a source transaction, aborted
	kTxnOpen    kind = "txn-open"    // Topic, P, N: a source transaction left open
	kTxnClose   kind = "txn-close"   // Mode commit|abort: ends the open transaction
	kStop       kind = "stop"        // Topic ("*": every topic): failover
	kPause      kind = "pause"       // Topic
	kResume     kind = "resume"      // Topic
	kRecover    kind = "recover"     // Topic
	kRebuild    kind = "rebuild"     // Topic: recover with rebuild
	kKill       kind = "kill"        // P: the instance slot
	kStart      kind = "start"       // P: the instance slot
	kSrcDown    kind = "src-down"    // every source broker unreachable
	kSrcUp      kind = "src-up"      //
	kDstDown    kind = "dst-down"    // P: one destination broker unreachable
	kDstUp      kind = "dst-up"      //
	kForeign    kind = "foreign"     // Topic, P, N: records written straight to the destination
	kDelRec     kind = "delrec"      // Topic, P, N: DeleteRecords on the source, N% of the way to its end
	kGrow       kind = "grow"        // Topic: one more source partition
	kMoveSrc    kind = "move-src"    // Topic, P: the source leader to the next broker
	kMoveDst    kind = "move-dst"    // Topic, P: the destination leader to the next broker
	kTxnTimeout kind = "txn-timeout" // Topic, P, N: a mirrored transaction the destination times out
	// kRebuildStop is a recover with rebuild and a stop right after it,
	// with no wait between: a stop that lands while the rebuild runs.
	kRebuildStop kind = "rebuild-stop" // Topic
	// kZombie holds the next Produce of a topic in the destination's
	// network (enginetest.EpochBroker, which fences as a real broker
	// does: an epoch is learnt at the first write with it) and kills the
	// only running instance, whose request it was: a zombie write on its
	// way. kThaw delivers it, as the real broker would.
	kZombie kind = "zombie" // Topic, P: the instance slot
	kThaw   kind = "thaw"   //
)

// allKinds is every kind in the order the report lists them.
var allKinds = []kind{kProduce, kTxnCommit, kTxnAbort, kTxnOpen, kTxnClose, kStop, kPause, kResume,
	kRecover, kRebuild, kKill, kStart, kSrcDown, kSrcUp, kDstDown, kDstUp, kForeign, kDelRec, kGrow,
	kMoveSrc, kMoveDst, kTxnTimeout, kRebuildStop, kZombie, kThaw}

// argsOf names the fields each kind uses, in the order they print.
func argsOf(k kind) string {
	switch k {
	case kProduce:
		return "tpnm"
	case kTxnCommit, kTxnAbort, kTxnOpen, kForeign, kDelRec, kTxnTimeout:
		return "tpn"
	case kTxnClose:
		return "m"
	case kStop, kPause, kResume, kRecover, kRebuild, kGrow, kRebuildStop:
		return "t"
	case kKill, kStart, kDstDown:
		return "p"
	case kMoveSrc, kMoveDst, kZombie:
		return "tp"
	case kSrcDown, kSrcUp, kDstUp, kThaw:
		return ""
	}
	return ""
}

// step is one action of a scenario.
type step struct {
	Kind  kind
	Topic string
	P     int32
	N     int
	Mode  string
}

func (s step) String() string {
	parts := []string{string(s.Kind)}
	for _, a := range argsOf(s.Kind) {
		switch a {
		case 't':
			parts = append(parts, s.Topic)
		case 'p':
			parts = append(parts, strconv.Itoa(int(s.P)))
		case 'n':
			parts = append(parts, strconv.Itoa(s.N))
		case 'm':
			parts = append(parts, s.Mode)
		}
	}
	return strings.Join(parts, ":")
}

// parseStep is the inverse of step.String.
func parseStep(text string) (step, error) {
	parts := strings.Split(strings.TrimSpace(text), ":")
	s := step{Kind: kind(parts[0])}
	if !slices.Contains(allKinds, s.Kind) {
		return s, fmt.Errorf("step %q: unknown kind %q", text, parts[0])
	}
	args := argsOf(s.Kind)
	if len(parts)-1 != len(args) {
		return s, fmt.Errorf("step %q: %s takes %d arguments (%s)", text, s.Kind, len(args), args)
	}
	for i, a := range args {
		v := parts[i+1]
		switch a {
		case 't':
			s.Topic = v
		case 'm':
			s.Mode = v
		case 'p', 'n':
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("step %q: argument %d: %w", text, i+1, err)
			}
			if a == 'p' {
				s.P = int32(n)
			} else {
				s.N = n
			}
		}
	}
	return s, nil
}

// formatSteps joins steps the way KMIRROR_EXPLORE_STEPS takes them.
func formatSteps(steps []step) string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return strings.Join(out, ",")
}

// parseSteps reads a KMIRROR_EXPLORE_STEPS list.
func parseSteps(text string) ([]step, error) {
	var out []step
	for _, f := range strings.Split(text, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		s, err := parseStep(f)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// weight is how often a kind is drawn relative to the others.
var weight = map[kind]float64{
	kProduce: 6, kTxnCommit: 2, kTxnAbort: 1.5, kTxnOpen: 1, kTxnClose: 2,
	kStop: 0.6, kPause: 1.2, kResume: 2, kRecover: 1, kRebuild: 0.8,
	kKill: 1, kStart: 1.5, kSrcDown: 0.8, kSrcUp: 2, kDstDown: 0.6, kDstUp: 2,
	kForeign: 1, kDelRec: 0.6, kGrow: 0.5, kMoveSrc: 0.8, kMoveDst: 0.8, kTxnTimeout: 0.6, kRebuildStop: 0.5,
	kZombie: 0.5, kThaw: 1.5,
}

// draw picks steps for a scenario: n of them, each one that makes sense
// in the state the ones before it leave (m tracks that state as the world
// will, without clusters).
func draw(rng *rand.Rand, n int, enabled map[kind]bool) []step {
	m := newModel()
	var out []step
	for len(out) < n {
		var cands []kind
		var total float64
		for _, k := range allKinds {
			if enabled[k] && m.possible(k) {
				cands = append(cands, k)
				total += weight[k]
			}
		}
		x := rng.Float64() * total
		k := cands[len(cands)-1]
		for _, c := range cands {
			if x -= weight[c]; x < 0 {
				k = c
				break
			}
		}
		s := m.args(rng, k)
		if !m.applicable(s) {
			continue // arguments that do not fit (a stopped topic): draw again
		}
		m.apply(s)
		out = append(out, s)
	}
	return out
}
