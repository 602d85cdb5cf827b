package explore

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

const (
	// settleTimeout bounds the wait for the instances to act on a step.
	settleTimeout = 60 * time.Second
	// stopTimeout is I4's bound on a stop while the destination is up.
	stopTimeout = 30 * time.Second
)

// settle waits until every partition rests where the last steps leave it
// (caught up, paused, stopped, or failed for a reason that waits for the
// operator), and checks I4 and I6 on the way: a stop that takes longer
// than stopTimeout with the destination up, a partition still FAILED and
// retrying once nothing is held down. A partition that never rests in the
// time allowed is reported too.
func (w *world) settle() {
	if len(w.running()) == 0 {
		return // nothing can move
	}
	start := time.Now()
	var unrest map[pref]string
	ok, _ := w.wait(settleTimeout, func() (bool, string) {
		unrest = w.unrested()
		w.checkStopTime(unrest)
		return len(unrest) == 0, ""
	})
	if ok {
		return
	}
	live := w.live()
	for _, r := range sortedPrefs(unrest) {
		s, owned := live[r]
		switch {
		case w.m.desired[r.topic] == wantStop:
			// checkStopTime has reported it if I4 applies.
		case owned && s.State == partition.Failed && s.Retryable && !w.faultHeld():
			w.orc.report("I6", r.String(), "FAILED and retrying %s after every cluster answers again: %s (attempt %d, cause %s)",
				time.Since(start).Round(time.Second), s.Error, s.Attempt, s.Cause)
		default:
			w.orc.report("settle", r.String(), "not at rest after %s: %s", settleTimeout, unrest[r])
		}
	}
}

// unrested is every partition not yet where the steps leave it, with why.
func (w *world) unrested() map[pref]string {
	live := w.live()
	var srcEnds map[string][]int64
	if !w.m.srcDown {
		srcEnds = w.ends(w.srcCl)
	}
	dstEnds := w.ends(w.dstCl)
	out := map[pref]string{}
	for _, t := range topicNames {
		want := w.m.desired[t]
		for p := range w.m.parts[t] {
			r := pref{t, p}
			s, owned := live[r]
			if !owned {
				// A partition grown on the source after its topic was
				// stopped is never created on the destination, and one
				// grown while the source cannot be read is created once
				// it can (the metadata sync asks the source).
				if (want == wantStop || w.m.srcDown) && int(p) >= len(dstEnds[t]) {
					continue
				}
				out[r] = "no running instance owns it"
				continue
			}
			if why := w.rests(r, want, s, srcEnds[t], dstEnds[t]); why != "" {
				out[r] = why
			}
		}
	}
	return out
}

// rests says why partition r is not at rest, "" when it is.
func (w *world) rests(r pref, want desired, s engine.PartitionSnapshot, srcEnds, dstEnds []int64) string {
	held := w.faultHeld()
	failedWaits := s.State == partition.Failed && (!s.Retryable || held)
	switch want {
	case wantStop:
		if s.State == partition.Stopped {
			return ""
		}
	case wantPause:
		if s.State == partition.Paused || failedWaits {
			return ""
		}
	case wantStart:
		if failedWaits {
			return ""
		}
		if s.State == partition.Mirroring {
			if held {
				return "" // it may not have noticed the fault yet
			}
			if int(r.p) < len(srcEnds) && int(r.p) < len(dstEnds) {
				se, de := srcEnds[r.p], dstEnds[r.p]
				// A foreign record or a destination abort above the
				// source's end is found at the next append only.
				if de == se || de > se && s.DestLogEnd == de {
					return ""
				}
				return fmt.Sprintf("MIRRORING, source end %d, destination end %d (lag %d)", se, de, s.Lag)
			}
			return "MIRRORING, ends unknown"
		}
	}
	why := fmt.Sprintf("%s (want %s)", s.State, want)
	if s.Error != "" {
		why += ": " + s.Error
	}
	return why
}

// checkStopTime is I4: with the destination up and an instance running, a
// stop completes within stopTimeout, counted from the later of the stop,
// the release of a held fault and the start of the first instance.
func (w *world) checkStopTime(unrest map[pref]string) {
	if w.m.dstDown >= 0 {
		return
	}
	var first time.Time
	for _, in := range w.running() {
		if first.IsZero() || in.started.Before(first) {
			first = in.started
		}
	}
	for r, why := range unrest {
		if w.m.desired[r.topic] != wantStop {
			continue
		}
		from := w.orc.stopAt[r.topic]
		for _, t := range []time.Time{w.orc.upAt, first} {
			if t.After(from) {
				from = t
			}
		}
		if d := time.Since(from); d > stopTimeout {
			w.orc.report("I4", r.String(), "not STOPPED %s after the stop (the destination up): %s", d.Round(time.Second), why)
		}
	}
}

func sortedPrefs[V any](m map[pref]V) []pref {
	out := make([]pref, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].p < out[j].p
	})
	return out
}

// describe is every partition's state as the running instances see it,
// for a failure report.
func (w *world) describe() string {
	var b strings.Builder
	live := w.live()
	for _, r := range sortedPrefs(live) {
		s := live[r]
		fmt.Fprintf(&b, "\n  %s %s owner %s lme %d dest end %d source hwm %d retryable %v %q", r, s.State, s.Owner, s.LastOffset, s.DestLogEnd, s.SourceHWM, s.Retryable, s.Error)
	}
	return b.String()
}
