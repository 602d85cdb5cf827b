package drill

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/sandbox"
)

// AuditCheck is one number of the report held against the producers' own
// ledger, recomputed independently of how the steps measured it.
type AuditCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// auditFailures lists the checks that failed.
func auditFailures(cs []AuditCheck) []string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Check+": "+c.Detail)
		}
	}
	return out
}

// ledgerTruth is what the audit holds a report against: the producers'
// acknowledgements on A and the ids of the records A acknowledged that a
// full read of B does not find, sorted.
type ledgerTruth struct {
	scenario Scenario
	acksA    []sandbox.Ack
	lost     []string
}

// audit recomputes the loss from scratch, by reading all of B (not from
// T0, as verify does) against every acknowledgement A gave, and holds each
// number of rep against it and against the ledger. lme is the forward
// mirror's last mirrored offsets at the stop.
func (t *sandboxTarget) audit(ctx context.Context, rep *Report, lme map[string]int64) []AuditCheck {
	truth, err := t.ledgerTruth(ctx, lme)
	if err != nil {
		return []AuditCheck{{Check: "read B", Detail: err.Error()}}
	}
	return checkReport(truth, rep)
}

func (t *sandboxTarget) ledgerTruth(ctx context.Context, lme map[string]int64) (ledgerTruth, error) {
	truth := ledgerTruth{scenario: t.scenario}
	topics := sandbox.TopicNames()
	b := t.destination()
	ends, err := endOffsets(ctx, b, topics)
	if err != nil {
		return truth, err
	}
	from := offsets{}
	for tp, ps := range ends {
		from[tp] = map[int32]int64{}
		for p := range ps {
			from[tp][p] = 0
		}
	}
	onB, err := committedIDs(ctx, b, from, ends, t.sbTimeout())
	if err != nil {
		return truth, err
	}
	compacted := map[string]bool{}
	for _, tp := range sandbox.Topics {
		compacted[tp.Name] = tp.Compacted
	}
	truth.acksA = t.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA })
	for _, a := range truth.acksA {
		if onB[a.ID] {
			continue
		}
		// A compacted topic keeps one record per key: a record B no
		// longer holds is mirrored if it lies at or below the LME.
		if l, ok := lme[ptKey(a.Topic, a.Partition)]; ok && compacted[a.Topic] && a.Offset <= l {
			continue
		}
		truth.lost = append(truth.lost, a.ID)
	}
	slices.Sort(truth.lost)
	return truth, nil
}

// checkReport holds each number of rep against the truth.
func checkReport(truth ledgerTruth, rep *Report) []AuditCheck {
	var out []AuditCheck
	check := func(name string, ok bool, format string, args ...any) {
		out = append(out, AuditCheck{Check: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	lost, acksA := truth.lost, truth.acksA
	reported := slices.Sorted(slices.Values(rep.RPO.LostIDs))
	check("RPO records = acknowledged by A, not on B", rep.RPO.Records == int64(len(lost)) && slices.Equal(reported, lost),
		"report %d records, the ledger against a full read of B %d (%s)", rep.RPO.Records, len(lost), idDiff(reported, lost))
	check("A's acknowledgements", rep.RPO.AckedByA == int64(len(acksA)), "report %d, ledger %d", rep.RPO.AckedByA, len(acksA))
	var sum int64
	for _, lp := range rep.RPO.Lost {
		sum += lp.Records
	}
	check("lost partitions add up to the RPO", sum == rep.RPO.Records, "%d records over %d partitions, RPO %d", sum, len(rep.RPO.Lost), rep.RPO.Records)

	switch truth.scenario {
	case ScenarioPlanned:
		check("planned: nothing lost", rep.RPO.Records == 0, "RPO %d records", rep.RPO.Records)
		var diverged []string
		for _, fp := range rep.Failback {
			if fp.Expect != "delta" {
				diverged = append(diverged, ptKey(fp.Topic, fp.Partition))
			}
		}
		check("planned: the failback copies only the delta", len(diverged) == 0 && len(rep.Failback) > 0, "%d partitions, diverged: %s", len(rep.Failback), orDash(strings.Join(diverged, ", ")))
	case ScenarioRegionLoss, ScenarioUnclean:
		check("region lost: RPO above 0", rep.RPO.Records > 0, "RPO %d records", rep.RPO.Records)
		diverged := map[string]bool{}
		for _, fp := range rep.Failback {
			if fp.Expect == "diverged" {
				diverged[ptKey(fp.Topic, fp.Partition)] = true
			}
		}
		var notDiverged []string
		for _, lp := range rep.RPO.Lost {
			if !diverged[ptKey(lp.Topic, lp.Partition)] {
				notDiverged = append(notDiverged, ptKey(lp.Topic, lp.Partition))
			}
		}
		check("every partition with a loss was DIVERGED at failback", len(notDiverged) == 0, "not diverged: %s", orDash(strings.Join(notDiverged, ", ")))
		q := rep.Quarantine
		switch {
		case q == nil && rep.RPO.Records > 0:
			check("quarantine = RPO", false, "no rebuild ran")
		case q != nil:
			bad := quarantineProblems(q, int64(len(lost)))
			check("quarantine = RPO", len(bad) == 0, "%d acknowledged records quarantined (%d in all), %d lost; %s",
				q.Acknowledged, q.Read, len(lost), orDash(strings.Join(bad, "; ")))
		}
	}
	if el := rep.Election; el != nil {
		acked := map[string]bool{}
		for _, a := range acksA {
			if a.Topic == el.Topic && a.Partition == el.Partition && a.Offset >= el.EndOffset {
				acked[a.ID] = true
			}
		}
		var bad []string
		for _, id := range el.IDs {
			if !acked[id] {
				bad = append(bad, id)
			}
		}
		check("the election's lost records are acknowledgements from its end offset on", len(bad) == 0 && int64(len(el.IDs)) == el.Records && el.Records > 0,
			"%d named, %d not acknowledged by A at or past offset %d: %s", len(el.IDs), len(bad), el.EndOffset, orDash(strings.Join(firstN(bad, 5), ", ")))
	}
	switch c := rep.AEqualsB; {
	case c == nil:
		check("A == B after the failback", false, "not compared")
	default:
		check("A == B after the failback", c.Equal, "%d partitions, %d records; %s", c.Partitions, c.Records, orDash(strings.Join(firstN(c.Differences, 5), "; ")))
	}
	return out
}

// idDiff says which ids only one side has.
func idDiff(report, ledger []string) string {
	var onlyR, onlyL []string
	for _, id := range report {
		if _, ok := slices.BinarySearch(ledger, id); !ok {
			onlyR = append(onlyR, id)
		}
	}
	for _, id := range ledger {
		if _, ok := slices.BinarySearch(report, id); !ok {
			onlyL = append(onlyL, id)
		}
	}
	if len(onlyR)+len(onlyL) == 0 {
		return "the same ids"
	}
	return fmt.Sprintf("only in the report: %s; only by the ledger: %s", orDash(strings.Join(firstN(onlyR, 5), ", ")), orDash(strings.Join(firstN(onlyL, 5), ", ")))
}
