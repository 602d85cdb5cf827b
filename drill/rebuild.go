package drill

import (
	"context"
	"fmt"
	"hash"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
	"github.com/kmirror/kmirror/sandbox"
)

// Quarantine is what the failback's rebuild kept on A of the records B
// never got, and how those records square with the loss.
type Quarantine struct {
	Command string            `json:"command"` // the CLI form of what the drill ran
	Topics  []QuarantineTopic `json:"topics"`
	// Records is the quarantine's size as the rebuild counted it; Read is
	// what reading the quarantine topics back found.
	Records int64 `json:"records"`
	Read    int64 `json:"read"`
	// Acknowledged are the quarantined records A had acknowledged: every
	// one must be a lost record, and every lost record must be here.
	// NeverAcknowledged were written to A without an acknowledgement
	// (aborted transactions, writes whose answer the outage cut off).
	Acknowledged      int64 `json:"acknowledged"`
	NeverAcknowledged int64 `json:"neverAcknowledged"`
	// Unexplained are quarantined ids that are neither; Missing are lost
	// ids the quarantine lacks. Both must be empty.
	Unexplained []string `json:"unexplained"`
	Missing     []string `json:"missing"`
}

// QuarantineTopic is one topic's quarantine.
type QuarantineTopic struct {
	Topic      string                   `json:"topic"`
	Name       string                   `json:"quarantineTopic"`
	Records    int64                    `json:"records"`
	Partitions []QuarantinePartition    `json:"partitions"`
	byPart     map[int32]map[string]int // read back: ids per partition (not reported)
}

// QuarantinePartition is one partition's range the rebuild copied.
type QuarantinePartition struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Records   int64 `json:"records"`
}

// Compare is A against B after the failback: every partition's log end
// and records.
type Compare struct {
	Equal       bool     `json:"equal"`
	Partitions  int      `json:"partitions"`
	Records     int64    `json:"records"`
	Differences []string `json:"differences"`
}

// rebuildDiverged walks through the remedy for DIVERGED partitions: the
// reverse mirror refuses to overwrite records B never got, so the operator
// runs --recover --rebuild, which copies them to a quarantine topic on A
// before it recreates A's topic from B. The quarantine is then read back
// and matched against the loss the verify step measured.
func (t *sandboxTarget) rebuildDiverged(ctx context.Context, r *stepRun, plan []FailbackPartition) error {
	d, sb := r.d, t.sb
	var topics []string
	n := 0
	for _, fp := range plan {
		if fp.Expect == "diverged" {
			n++
			if !slices.Contains(topics, fp.Topic) {
				topics = append(topics, fp.Topic)
			}
		}
	}
	r.line("A holds records B never got on %d partitions: %s refuses to overwrite them (DIVERGED) and waits for the operator", n, d.cfg.Reverse)
	q := &Quarantine{Command: fmt.Sprintf("kmirror --bootstrap-server %s --recover --rebuild --mirror %s --topics %s",
		strings.Join(sb.Bootstrap(sandbox.SideA), ","), d.cfg.Reverse, strings.Join(topics, ","))}
	t.quarantine = q
	r.line("%s", q.Command)
	adm, err := engine.NewAdmin(ctx, sb.Bootstrap(sandbox.SideA), nil, 30*time.Second)
	if err != nil {
		return fmt.Errorf("admin on A: %w", err)
	}
	defer adm.Close()
	sel, err := engine.ParseTopics(strings.Join(topics, ","))
	if err != nil {
		return err
	}
	if _, err := adm.Control(ctx, engine.CmdRecover, d.cfg.Reverse, &sel, true); err != nil {
		return fmt.Errorf("recover --rebuild %s: %w", d.cfg.Reverse, err)
	}
	r.line("rebuild recorded: the diverged records go to a quarantine topic on A first, then A's topics are recreated and mirrored from B")

	// Done when every rebuild is finished and every partition of the
	// reverse mirror mirrors again, caught up with B.
	var cat *store.Catalog
	var waiting string
	done := WaitFor(ctx, d.cfg.StepTimeout, 500*time.Millisecond, func() bool {
		c, err := adm.Catalog(ctx)
		if err != nil {
			waiting = "read A's __mirror_state: " + err.Error()
			return false
		}
		cat = c
		for _, tp := range topics {
			rec, ok := c.Rebuilds[store.TopicRef{Mirror: d.cfg.Reverse, Topic: tp}]
			if !ok || rec.Step != store.RebuildDone {
				waiting = fmt.Sprintf("rebuild of %s at step %s", tp, orDash(rec.Step.String()))
				return false
			}
		}
		if w := t.reverseCaughtUp(ctx, d.cfg.Reverse); w != "" {
			waiting = w
			return false
		}
		return true
	})
	if !done {
		return fmt.Errorf("the rebuild of %s did not finish within %s: %s", strings.Join(topics, ", "), d.cfg.StepTimeout, waiting)
	}
	for _, tp := range topics {
		rec := cat.Rebuilds[store.TopicRef{Mirror: d.cfg.Reverse, Topic: tp}]
		qt := QuarantineTopic{Topic: tp, Name: rec.Quarantine}
		var per []string
		for _, rg := range rec.Ranges {
			if rg.To <= rg.From {
				continue
			}
			qt.Partitions = append(qt.Partitions, QuarantinePartition{Partition: rg.Partition, From: rg.From, To: rg.To, Records: rg.Copied})
			qt.Records += rg.Copied
			offs := offsetRanges([]int64{rg.From, rg.To - 1})
			if rg.To-rg.From > 2 {
				offs = fmt.Sprintf("%d-%d", rg.From, rg.To-1)
			}
			per = append(per, fmt.Sprintf("%s offsets %s: %s", ptKey(tp, rg.Partition), offs, plural(rg.Copied, "record")))
		}
		q.Records += qt.Records
		q.Topics = append(q.Topics, qt)
		r.line("%s rebuilt: %s quarantined in %s (%s)", tp, plural(qt.Records, "record"), qt.Name, orDash(strings.Join(per, "; ")))
	}
	if err := t.readQuarantine(ctx, q); err != nil {
		return err
	}
	t.tieQuarantine(q)
	r.line("quarantine: %d records; %d of them A had acknowledged (the %d lost records verify counted), %d never acknowledged (aborted transactions, writes whose answer the outage cut off)",
		q.Read, q.Acknowledged, len(t.lost), q.NeverAcknowledged)
	if bad := quarantineProblems(q, int64(len(t.lost))); len(bad) > 0 {
		d.m.anomaly("the quarantine does not match the loss: %s", strings.Join(bad, "; "))
		return fmt.Errorf("the quarantine does not match the loss: %s", strings.Join(bad, "; "))
	}
	return nil
}

// reverseCaughtUp says what the reverse mirror still waits for ("" once
// every partition MIRRORS and A ends where B does).
func (t *sandboxTarget) reverseCaughtUp(ctx context.Context, reverse string) string {
	var parts []engine.PartitionSnapshot
	for _, m := range t.failbackEng.Snapshot().Mirrors {
		if m.Name == reverse {
			parts = m.Partitions
		}
	}
	want := 0
	for _, tp := range sandbox.Topics {
		want += int(tp.Partitions)
	}
	c := countStates(parts)
	if len(parts) < want || c[partition.Mirroring] != len(parts) {
		var failed []string
		for _, p := range parts {
			if p.State == partition.Failed {
				failed = append(failed, ptKey(p.Topic, p.Partition)+errText(p.Error))
			}
		}
		return fmt.Sprintf("%s: %s%s", reverse, orDash(statesLine(c)), strings.Join(append([]string{""}, failed...), "; "))
	}
	topics := sandbox.TopicNames()
	a, errA := endOffsets(ctx, t.side(sandbox.SideA), topics)
	b, errB := endOffsets(ctx, t.destination(), topics)
	if errA != nil || errB != nil {
		return fmt.Sprintf("log ends: %v %v", errA, errB)
	}
	for _, tp := range topics {
		for p, o := range b[tp] {
			if a[tp][p] != o {
				return fmt.Sprintf("%s: A ends at %d, B at %d", ptKey(tp, p), a[tp][p], o)
			}
		}
	}
	return ""
}

// readQuarantine reads every quarantine topic on A back and keeps the
// record ids it holds.
func (t *sandboxTarget) readQuarantine(ctx context.Context, q *Quarantine) error {
	a := t.side(sandbox.SideA)
	for i := range q.Topics {
		qt := &q.Topics[i]
		qt.byPart = map[int32]map[string]int{}
		if qt.Name == "" {
			continue
		}
		ends, err := endOffsets(ctx, a, []string{qt.Name})
		if err != nil {
			return fmt.Errorf("quarantine %s: %w", qt.Name, err)
		}
		from := offsets{qt.Name: {}}
		for p := range ends[qt.Name] {
			from[qt.Name][p] = 0
		}
		err = readRange(ctx, a, from, ends, false, t.sbTimeout(), func(rec *kgo.Record) {
			m := qt.byPart[rec.Partition]
			if m == nil {
				m = map[string]int{}
				qt.byPart[rec.Partition] = m
			}
			m[sandbox.IDOf(rec.Value)]++
			q.Read++
		})
		if err != nil {
			return fmt.Errorf("read quarantine %s: %w", qt.Name, err)
		}
	}
	return nil
}

// sbTimeout bounds one read of the sandbox's clusters.
func (t *sandboxTarget) sbTimeout() time.Duration { return time.Minute }

// tieQuarantine sorts the quarantined records into those A acknowledged
// (which must be exactly the lost ones, each once) and those it never
// acknowledged, and marks each lost partition with what its quarantine
// holds.
func (t *sandboxTarget) tieQuarantine(q *Quarantine) {
	lost := map[string]*sandbox.Ack{}
	for i := range t.lost {
		lost[t.lost[i].ID] = &t.lost[i]
	}
	unacked := map[string]bool{}
	for _, u := range t.sb.Ledger().Unacked(func(u *sandbox.Unacked) bool { return u.Side == sandbox.SideA }) {
		unacked[u.ID] = true
	}
	found := map[string]int{}
	perPart := map[string]int64{}
	q.Acknowledged, q.NeverAcknowledged, q.Unexplained, q.Missing = 0, 0, []string{}, []string{}
	for _, qt := range q.Topics {
		for p, ids := range qt.byPart {
			for id, n := range ids {
				switch a := lost[id]; {
				case a != nil && a.Topic == qt.Topic && a.Partition == p:
					found[id] += n
					q.Acknowledged += int64(n)
					perPart[ptKey(a.Topic, a.Partition)] += int64(n)
				case unacked[id]:
					q.NeverAcknowledged += int64(n)
				default:
					q.Unexplained = append(q.Unexplained, fmt.Sprintf("%s (%s, %d times)", orDash(id), ptKey(qt.Topic, p), n))
				}
			}
		}
	}
	for _, a := range t.lost {
		if found[a.ID] != 1 {
			q.Missing = append(q.Missing, fmt.Sprintf("%s (%s at %d, %d times in the quarantine)", a.ID, ptKey(a.Topic, a.Partition), a.Offset, found[a.ID]))
		}
	}
	slices.Sort(q.Unexplained)
	slices.Sort(q.Missing)
	for i := range t.lostParts {
		t.lostParts[i].Quarantined = perPart[ptKey(t.lostParts[i].Topic, t.lostParts[i].Partition)]
	}
}

// quarantineProblems lists where a quarantine disagrees with a loss of
// lost records.
func quarantineProblems(q *Quarantine, lost int64) []string {
	var bad []string
	if q.Read != q.Records {
		bad = append(bad, fmt.Sprintf("the rebuild counted %d quarantined records, reading them back found %d", q.Records, q.Read))
	}
	if q.Acknowledged != lost {
		bad = append(bad, fmt.Sprintf("%d acknowledged records quarantined, %d lost", q.Acknowledged, lost))
	}
	if q.Acknowledged+q.NeverAcknowledged != q.Read {
		bad = append(bad, fmt.Sprintf("%d quarantined records neither lost nor unacknowledged: %s", q.Read-q.Acknowledged-q.NeverAcknowledged, strings.Join(firstN(q.Unexplained, 5), ", ")))
	}
	if len(q.Missing) > 0 {
		bad = append(bad, fmt.Sprintf("%d lost records not quarantined exactly once: %s", len(q.Missing), strings.Join(firstN(q.Missing, 5), ", ")))
	}
	return bad
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

// compareAB reads every partition of the demo topics on A and on B and
// compares log ends and records (offset, key, value, headers).
func (t *sandboxTarget) compareAB(ctx context.Context) (*Compare, error) {
	topics := sandbox.TopicNames()
	a, b := t.side(sandbox.SideA), t.destination()
	sum := func(c cluster) (offsets, map[string]uint64, map[string]int64, error) {
		ends, err := endOffsets(ctx, c, topics)
		if err != nil {
			return nil, nil, nil, err
		}
		from := offsets{}
		for tp, ps := range ends {
			from[tp] = map[int32]int64{}
			for p := range ps {
				from[tp][p] = 0
			}
		}
		hs, counts := map[string]hash.Hash64{}, map[string]int64{}
		err = readRange(ctx, c, from, ends, false, t.sbTimeout(), func(r *kgo.Record) {
			k := ptKey(r.Topic, r.Partition)
			if hs[k] == nil {
				hs[k] = fnv.New64a()
			}
			fmt.Fprintf(hs[k], "%d|%q|%q|", r.Offset, r.Key, r.Value)
			for _, hd := range r.Headers {
				fmt.Fprintf(hs[k], "%q=%q;", hd.Key, hd.Value)
			}
			counts[k]++
		})
		hashes := map[string]uint64{}
		for k, h := range hs {
			hashes[k] = h.Sum64()
		}
		return ends, hashes, counts, err
	}
	ea, ha, ca, err := sum(a)
	if err != nil {
		return nil, fmt.Errorf("read A: %w", err)
	}
	eb, hb, cb, err := sum(b)
	if err != nil {
		return nil, fmt.Errorf("read B: %w", err)
	}
	cmp := &Compare{Differences: []string{}}
	for _, tp := range topics {
		for _, p := range slices.Sorted(maps.Keys(eb[tp])) {
			k := ptKey(tp, p)
			cmp.Partitions++
			cmp.Records += cb[k]
			switch {
			case ea[tp][p] != eb[tp][p]:
				cmp.Differences = append(cmp.Differences, fmt.Sprintf("%s: A ends at %d, B at %d", k, ea[tp][p], eb[tp][p]))
			case ca[k] != cb[k] || ha[k] != hb[k]:
				cmp.Differences = append(cmp.Differences, fmt.Sprintf("%s: A holds %d records, B %d, and they differ", k, ca[k], cb[k]))
			}
		}
	}
	cmp.Equal = len(cmp.Differences) == 0
	return cmp, nil
}
