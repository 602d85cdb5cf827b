package explore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The explorer's knobs, all environment variables so a plain `go test`
// runs the short default and a failure prints one line to replay it.
const (
	envRuns   = "KMIRROR_EXPLORE"        // N: run N scenarios (seeds SEED … SEED+N-1)
	envSeed   = "KMIRROR_EXPLORE_SEED"   // the first seed (default: the fixed default set, or the clock with N)
	envSteps  = "KMIRROR_EXPLORE_STEPS"  // replay this step list (comma separated) with SEED
	envKinds  = "KMIRROR_EXPLORE_KINDS"  // "all", or a list of +kind / -kind edits of the default kinds
	envShrink = "KMIRROR_EXPLORE_SHRINK" // re-runs the shrinker may spend on a failure, default 8
	envKnown  = "KMIRROR_EXPLORE_KNOWN"  // "fail": known defects' violations fail the run too
)

// defaultSeeds are the scenarios a plain `go test` runs: fixed, so the
// default run draws the same steps every time (about a minute on two
// cores under -race).
var defaultSeeds = []uint64{1, 2, 3, 4, 5, 6}

// heldBack are the kinds left out of the default draw for defects known
// today and not fixed yet (docs/reliability.md, "Compound-fault explorer",
// has a seed and steps for each); KMIRROR_EXPLORE_KINDS puts them back.
// None now: rebuild, rebuild-stop and txn-timeout were held back until
// the rebuild kept every record and the stop stopped needing the source.
var heldBack = []kind{}

// optIn are kinds drawn only when KMIRROR_EXPLORE_KINDS asks (all, or
// +zombie,+thaw): the 500-scenario run of docs/reliability.md drew
// without them, and a kind added to the default draw changes every seed.
var optIn = []kind{kZombie, kThaw}

// outcome is what one scenario run found.
type outcome struct {
	violations []violation
	known      []violation
	notes      []string
	ran        map[kind]int
	skipped    int
	took       time.Duration
	ledger     string
}

// TestExplore runs random compound-fault scenarios (see the package doc)
// and fails with each failing scenario's seed, its step list shrunk, and
// the line that replays it.
func TestExplore(t *testing.T) {
	enabled, err := kindsFrom(os.Getenv(envKinds))
	if err != nil {
		t.Fatal(err)
	}
	seeds, err := seedsFrom(os.Getenv(envRuns), os.Getenv(envSeed))
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() && os.Getenv(envRuns) == "" {
		seeds = seeds[:1]
	}
	var replay []step
	if v := os.Getenv(envSteps); v != "" {
		if replay, err = parseSteps(v); err != nil {
			t.Fatal(err)
		}
		seeds = seeds[:1]
	}
	shrinkBudget := 8
	if v := os.Getenv(envShrink); v != "" {
		if shrinkBudget, err = strconv.Atoi(v); err != nil {
			t.Fatalf("%s=%q: %v", envShrink, v, err)
		}
	}
	counts := map[kind]int{}
	scenarios, failed, skipped, known := 0, 0, 0, 0
	for _, seed := range seeds {
		steps := replay
		if steps == nil {
			steps = scenarioSteps(seed, enabled)
		}
		out := runScenario(t, fmt.Sprintf("seed=%d", seed), steps)
		scenarios++
		skipped += out.skipped
		for k, n := range out.ran {
			counts[k] += n
		}
		t.Logf("seed %d: %d steps (%d skipped) in %s, %d violations; %s: %s", seed, len(steps), out.skipped, out.took.Round(time.Second), len(out.violations), out.ledger, formatSteps(steps))
		for _, n := range out.notes {
			t.Logf("seed %d note: %s", seed, n)
		}
		for _, v := range out.known {
			t.Logf("seed %d: %s", seed, v)
		}
		known += len(out.known)
		if len(out.violations) == 0 {
			continue
		}
		failed++
		shrunk := shrink(t, seed, steps, out.violations[0].inv, shrinkBudget)
		var b strings.Builder
		for _, v := range out.violations {
			fmt.Fprintf(&b, "\n  %s", v)
		}
		t.Errorf("seed %d: %d violations:%s\nshrunk to %d of %d steps; replay with:\n  %s=%d %s=%q go test -race -run 'TestExplore$' ./engine/explore",
			seed, len(out.violations), b.String(), len(shrunk), len(steps), envSeed, seed, envSteps, formatSteps(shrunk))
	}
	t.Logf("explored seeds %d..%d: %d scenarios, %d failed, %d known defects seen (%s=fail fails them), %d steps skipped; steps run by kind: %s",
		seeds[0], seeds[len(seeds)-1], scenarios, failed, known, envKnown, skipped, formatCounts(counts))
}

// scenarioSteps draws a seed's steps: 10 to 30 of the enabled kinds.
func scenarioSteps(seed uint64, enabled map[kind]bool) []step {
	rng := rand.New(rand.NewPCG(seed, 0x6b6d6972726f72))
	return draw(rng, 10+rng.IntN(21), enabled)
}

// runScenario runs steps in a subtest of their own (whose clusters close
// with it) and returns what the oracle found; the subtest itself fails
// only if the scenario cannot be set up.
func runScenario(t *testing.T, name string, steps []step) outcome {
	out := outcome{ran: map[kind]int{}}
	begun := time.Now()
	t.Run(name, func(t *testing.T) {
		t.Logf("steps: %s", formatSteps(steps))
		w := newWorld(t, slices.ContainsFunc(steps, func(s step) bool { return s.Kind == kTxnTimeout }))
		w.strictKnown = os.Getenv(envKnown) == "fail"
		w.settle()
		w.orc.check()
		for i, s := range steps {
			w.stepNo = i + 1
			if !w.m.applicable(s) {
				out.skipped++
				continue
			}
			out.ran[s.Kind]++
			begun := time.Now()
			if err := w.do(s); err != nil {
				w.orc.report("step", s.String(), "%v", err)
			}
			w.settle()
			w.orc.check()
			t.Logf("step %d %s: %s", w.stepNo, s, time.Since(begun).Round(time.Millisecond))
			// The first violation ends the scenario: what follows would
			// mostly wait out the same broken state again, and the
			// shrinker re-runs the list anyway.
			if len(w.orc.violations) > 0 {
				break
			}
		}
		if len(w.orc.violations) == 0 {
			w.finish()
		}
		out.violations, out.known, out.notes = w.orc.violations, w.orc.known, w.notes
		out.ledger = w.orc.ledgerSummary()
		if len(out.violations) > 0 {
			t.Logf("partitions at the end:%s", w.describe())
			for _, in := range w.running() {
				t.Logf("last events of %s:\n  %s", in.name, strings.Join(in.lastEvents(), "\n  "))
			}
		}
	})
	out.took = time.Since(begun)
	return out
}

// finish releases every fault, ends the open transaction, makes sure an
// instance runs, and checks once more: the scenario's end state must keep
// every invariant with nothing held.
func (w *world) finish() {
	w.final = true
	w.stepNo = -1
	for _, s := range []step{{Kind: kSrcUp}, {Kind: kDstUp}, {Kind: kTxnClose, Mode: "commit"}, {Kind: kThaw}} {
		if w.m.applicable(s) {
			_ = w.do(s)
		}
	}
	if len(w.running()) == 0 {
		if err := w.startInstance(0); err != nil {
			w.orc.report("step", "final start", "%v", err)
		} else {
			w.m.running[0] = true
		}
	}
	w.settle()
	w.orc.check()
}

// shrink drops steps from a failing list while the scenario still fails
// with the same invariant, within budget re-runs: halves first, then
// smaller chunks down to single steps.
func shrink(t *testing.T, seed uint64, steps []step, inv string, budget int) []step {
	cur := steps
	for chunk := len(cur) / 2; chunk >= 1 && budget > 0; chunk /= 2 {
		for i := 0; i < len(cur) && budget > 0; {
			cand := slices.Concat(cur[:i], cur[min(len(cur), i+chunk):])
			budget--
			out := runScenario(t, fmt.Sprintf("seed=%d/shrink-%d-steps", seed, len(cand)), cand)
			if slices.ContainsFunc(out.violations, func(v violation) bool { return v.inv == inv }) {
				cur = cand
				t.Logf("seed %d: still %s with %d steps: %s", seed, inv, len(cur), formatSteps(cur))
				continue
			}
			i += chunk
		}
	}
	return cur
}

// seedsFrom reads KMIRROR_EXPLORE and KMIRROR_EXPLORE_SEED.
func seedsFrom(runs, first string) ([]uint64, error) {
	if runs == "" && first == "" {
		return defaultSeeds, nil
	}
	n := 1
	if runs != "" {
		var err error
		if n, err = strconv.Atoi(runs); err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: want a positive number", envRuns, runs)
		}
	}
	base := uint64(time.Now().UnixNano() % 1_000_000)
	if first != "" {
		var err error
		if base, err = strconv.ParseUint(first, 10, 64); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", envSeed, first, err)
		}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out, nil
}

// kindsFrom reads KMIRROR_EXPLORE_KINDS: "" is the default kinds, "all"
// every kind; otherwise each +kind or -kind edits the default.
func kindsFrom(v string) (map[kind]bool, error) {
	out := map[kind]bool{}
	for _, k := range allKinds {
		out[k] = !slices.Contains(heldBack, k) && !slices.Contains(optIn, k)
	}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "all":
			for _, k := range allKinds {
				out[k] = true
			}
		case (f[0] == '+' || f[0] == '-') && slices.Contains(allKinds, kind(f[1:])):
			out[kind(f[1:])] = f[0] == '+'
		default:
			return nil, fmt.Errorf("%s: %q is not all, +kind or -kind (kinds: %v)", envKinds, f, allKinds)
		}
	}
	// Without a way to start an instance or release a fault, a scenario
	// draws nothing after the first kill or outage.
	for _, k := range []kind{kStart, kSrcUp, kDstUp, kTxnClose} {
		out[k] = true
	}
	return out, nil
}

func formatCounts(counts map[kind]int) string {
	var parts []string
	for _, k := range allKinds {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	return strings.Join(parts, ", ")
}
