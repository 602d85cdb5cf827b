package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/sandbox"
)

// FailbackPartition is one partition of the failback rehearsal.
type FailbackPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	LME       int64  `json:"lastMirroredOffset"` // of the forward mirror, on B
	AEnd      int64  `json:"aLogEnd"`            // A's log end when it came back
	BEnd      int64  `json:"bLogEnd"`            // B's log end at the start of the rehearsal
	Expect    string `json:"expected"`           // "delta" or "diverged"
	Delta     int64  `json:"delta"`              // offsets to copy B → A
	Beyond    int64  `json:"divergedOffsets"`    // offsets A holds beyond the LME
	State     string `json:"state"`              // b-to-a state at the end of the rehearsal
	Error     string `json:"error,omitempty"`
}

// failback brings A back and creates the reverse mirror on it. Where A's
// log ends right after the forward mirror's LME only the delta is copied;
// where A holds writes beyond it (the ones the failover lost) the engine
// must fail the partition as diverged. The rehearsal waits for the first
// kind to catch up and the second to fail.
func (t *sandboxTarget) failback(ctx context.Context, r *stepRun) error {
	d, sb := r.d, t.sb
	if err := sb.RestartA(); err != nil {
		return err
	}
	topics := sandbox.TopicNames()
	var aEnds offsets
	if !WaitFor(ctx, d.cfg.StepTimeout, 250*time.Millisecond, func() bool {
		var err error
		aEnds, err = endOffsets(ctx, t.side(sandbox.SideA), topics)
		return err == nil
	}) {
		return fmt.Errorf("cluster A did not answer within %s of its restart", d.cfg.StepTimeout)
	}
	back := "is back with its data"
	if t.scenario == ScenarioPlanned {
		back = "stayed up through the cutover"
	}
	r.line("cluster A at %s %s", strings.Join(sb.Bootstrap(sandbox.SideA), ","), back)
	aEnds, err := t.settleA(ctx, r)
	if err != nil {
		return err
	}
	bEnds, err := endOffsets(ctx, t.destination(), topics)
	if err != nil {
		return err
	}
	lme, err := t.forwardLME(ctx, d.cfg.Mirror)
	if err != nil {
		return err
	}

	adm, err := engine.NewAdmin(ctx, sb.Bootstrap(sandbox.SideA), nil, 30*time.Second)
	if err != nil {
		return fmt.Errorf("admin on A: %w", err)
	}
	d.onClose(adm.Close)
	cfg := props.FromMap(map[string]string{
		"bootstrap.servers": strings.Join(sb.Bootstrap(sandbox.SideB), ","),
		props.KeyGapPolicy:  "fill",
	})
	if _, err := adm.CreateMirror(ctx, d.cfg.Reverse, cfg, false); err != nil && !errors.Is(err, engine.ErrOperation) {
		return fmt.Errorf("create %s on A: %w", d.cfg.Reverse, err)
	}
	sel, err := engine.ParseTopics(strings.Join(topics, ","))
	if err != nil {
		return err
	}
	if _, err := adm.Start(ctx, d.cfg.Reverse, sel, nil); err != nil {
		return fmt.Errorf("start %s: %w", d.cfg.Reverse, err)
	}
	r.line("%s created on A (source B) and started for %s", d.cfg.Reverse, strings.Join(topics, ", "))
	eng, err := engine.New(ctx, engine.Config{Destination: sb.Bootstrap(sandbox.SideA), Instance: "demo-failback"})
	if err != nil {
		return fmt.Errorf("instance on A: %w", err)
	}
	d.onClose(eng.Close)
	if err := eng.Join(ctx); err != nil {
		return fmt.Errorf("instance on A: %w", err)
	}
	t.failbackEng = eng

	plan := map[string]*FailbackPartition{}
	var order []string
	for _, tp := range topics {
		for p := int32(0); p < int32(len(bEnds[tp])); p++ {
			k := ptKey(tp, p)
			l, ok := lme[k]
			if !ok {
				l = -1
			}
			fp := planPartition(tp, p, l, aEnds[tp][p], bEnds[tp][p])
			plan[k] = fp
			order = append(order, k)
			r.line("%-12s LME %d, A ends %d, B ends %d: %s", k, fp.LME, fp.AEnd, fp.BEnd, expectText(fp))
		}
	}
	settled := func() bool {
		ok := true
		// A's ends once per look, for every caught-up check below; a
		// failed read leaves nothing settled.
		nowA, errA := endOffsets(ctx, t.side(sandbox.SideA), topics)
		for _, m := range eng.Snapshot().Mirrors {
			if m.Name != d.cfg.Reverse {
				continue
			}
			for _, p := range m.Partitions {
				fp := plan[ptKey(p.Topic, p.Partition)]
				if fp == nil {
					continue
				}
				fp.State, fp.Error = p.State.String(), p.Error
			}
		}
		for _, fp := range plan {
			switch fp.Expect {
			case "diverged":
				ok = ok && fp.State == partition.Failed.String()
			default:
				ok = ok && fp.State == partition.Mirroring.String() && errA == nil && nowA[fp.Topic][fp.Partition] >= fp.BEnd
			}
		}
		return ok
	}
	done := WaitFor(ctx, d.cfg.StepTimeout, 500*time.Millisecond, settled)
	d.m.failback = d.m.failback[:0]
	var wrong []string
	for _, k := range order {
		fp := plan[k]
		d.m.failback = append(d.m.failback, *fp)
		r.line("%-12s %s: %s%s", k, orDash(fp.State), expectText(fp), errText(fp.Error))
		good := (fp.Expect == "diverged" && fp.State == partition.Failed.String()) ||
			(fp.Expect == "delta" && fp.State == partition.Mirroring.String())
		if !good {
			wrong = append(wrong, k)
		}
	}
	if !done {
		d.m.anomaly("failback: %d partitions did not reach the expected state within %s: %s", len(wrong), d.cfg.StepTimeout, strings.Join(wrong, ", "))
		return fmt.Errorf("%d partitions of %s did not catch up or fail as diverged within %s: %s",
			len(wrong), d.cfg.Reverse, d.cfg.StepTimeout, strings.Join(wrong, ", "))
	}
	return t.afterPlan(ctx, r)
}

// afterPlan ends the rehearsal once every partition did what its plan
// said: the diverged ones are rebuilt (none may be, in a planned
// failover), and A must then be identical to B.
func (t *sandboxTarget) afterPlan(ctx context.Context, r *stepRun) error {
	d := r.d
	diverged := map[string]bool{}
	for _, fp := range d.m.failback {
		if fp.Expect == "diverged" {
			diverged[ptKey(fp.Topic, fp.Partition)] = true
		}
	}
	for i := range t.lostParts {
		t.lostParts[i].Diverged = diverged[ptKey(t.lostParts[i].Topic, t.lostParts[i].Partition)]
	}
	switch {
	case t.scenario == ScenarioPlanned && len(diverged) > 0:
		return fmt.Errorf("a planned failover left %d partitions of A diverged; the failback should copy only B's delta", len(diverged))
	case len(diverged) > 0:
		if err := t.rebuildDiverged(ctx, r, d.m.failback); err != nil {
			return err
		}
	default:
		r.line("no partition diverged: the failback copies only B's delta")
		if w := t.waitReverse(ctx, d.cfg.Reverse, d.cfg.StepTimeout); w != "" {
			return fmt.Errorf("%s did not catch up within %s: %s", d.cfg.Reverse, d.cfg.StepTimeout, w)
		}
	}
	cmp, err := t.compareAB(ctx)
	if err != nil {
		return err
	}
	t.compare = cmp
	if !cmp.Equal {
		d.m.anomaly("after the failback A differs from B: %s", strings.Join(firstN(cmp.Differences, 5), "; "))
		return fmt.Errorf("after the failback A differs from B on %d partitions: %s", len(cmp.Differences), strings.Join(firstN(cmp.Differences, 5), "; "))
	}
	r.line("A == B: all %d partitions end at the same offsets and hold the same %d records", cmp.Partitions, cmp.Records)
	return nil
}

// waitReverse waits until the reverse mirror has caught up; it returns
// what it still waited for when it gave up ("" when caught up).
func (t *sandboxTarget) waitReverse(ctx context.Context, reverse string, timeout time.Duration) string {
	var w string
	WaitFor(ctx, timeout, 250*time.Millisecond, func() bool {
		w = t.reverseCaughtUp(ctx, reverse)
		return w == ""
	})
	return w
}

// forwardLME reads the forward mirror's last mirrored offsets from B's
// __mirror_state; the stop recorded them there.
func (t *sandboxTarget) forwardLME(ctx context.Context, mirror string) (map[string]int64, error) {
	adm, err := engine.NewAdmin(ctx, t.sb.Bootstrap(sandbox.SideB), nil, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("admin on B: %w", err)
	}
	defer adm.Close()
	rows, err := adm.Describe(ctx, mirror)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", mirror, err)
	}
	out := map[string]int64{}
	for _, row := range rows {
		out[ptKey(row.Topic, row.Partition)] = row.LastMirrorOffset
	}
	return out, nil
}

// planPartition says what failback would do to one partition: where A's
// log ends right after the forward mirror's LME only B's delta is copied;
// where A holds offsets beyond it (writes the failover lost) the reverse
// mirror fails the partition as diverged.
func planPartition(topic string, p int32, lme, aEnd, bEnd int64) *FailbackPartition {
	fp := &FailbackPartition{Topic: topic, Partition: p, LME: lme, AEnd: aEnd, BEnd: bEnd}
	next := fp.LME + 1
	switch {
	case fp.AEnd > next:
		fp.Expect, fp.Beyond = "diverged", fp.AEnd-next
	default:
		fp.Expect, fp.Delta = "delta", fp.BEnd-fp.AEnd
	}
	return fp
}

func expectText(fp *FailbackPartition) string {
	if fp.Expect == "diverged" {
		return fmt.Sprintf("DIVERGED, A holds %d offsets beyond the LME", fp.Beyond)
	}
	return fmt.Sprintf("delta %d offsets", fp.Delta)
}

func errText(e string) string {
	if e == "" {
		return ""
	}
	if len(e) > 120 {
		e = e[:120] + "…"
	}
	return " (" + e + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// settleA ends the transactions A's producers left open when A went down:
// their clients are gone, and each would hold its partitions' last stable
// offset until A's coordinator timed it out and wrote its abort marker,
// which a rebuild would then find in the recreated topic. It returns A's
// log ends once nothing is open.
func (t *sandboxTarget) settleA(ctx context.Context, r *stepRun) (offsets, error) {
	d, topics := r.d, sandbox.TopicNames()
	ids, err := t.sb.FenceTransactions(ctx, sandbox.SideA)
	if err != nil {
		return nil, err
	}
	var ends offsets
	var open []string
	settled := WaitFor(ctx, d.cfg.StepTimeout, 250*time.Millisecond, func() bool {
		cl, adm, err := admin(t.side(sandbox.SideA))
		if err != nil {
			return false
		}
		defer cl.Close()
		hwm, err1 := adm.ListEndOffsets(ctx, topics...)
		lso, err2 := adm.ListCommittedOffsets(ctx, topics...)
		if err1 != nil || err2 != nil {
			return false
		}
		ends, open = offsets{}, open[:0]
		hwm.Each(func(o kadm.ListedOffset) {
			if ends[o.Topic] == nil {
				ends[o.Topic] = map[int32]int64{}
			}
			ends[o.Topic][o.Partition] = o.Offset
			if c, ok := lso.Lookup(o.Topic, o.Partition); !ok || c.Offset != o.Offset {
				open = append(open, ptKey(o.Topic, o.Partition))
			}
		})
		return len(open) == 0
	})
	if !settled {
		return nil, fmt.Errorf("transactions still open on A after fencing %s: %s", strings.Join(ids, ", "), strings.Join(open, ", "))
	}
	r.line("fenced %s on A: what A's producers left open is aborted, no transaction holds A's partitions", strings.Join(ids, ", "))
	return ends, nil
}
