package drill

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/sandbox"
)

func TestStepsHaveNamesTitlesAndHelp(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range Steps {
		if id.String() == "unknown" || id.Title() == "Unknown" || id.Explain() == "" || id.LookAt() == "" {
			t.Errorf("step %d lacks a name, title, explanation or pointer", id)
		}
		if seen[id.String()] {
			t.Errorf("step name %s used twice", id)
		}
		seen[id.String()] = true
	}
	for _, st := range []State{Pending, Running, Passed, Failed} {
		if st.String() == "unknown" {
			t.Errorf("state %d has no name", st)
		}
	}
}

func TestLostAcksCountsOnlyWritesBLacks(t *testing.T) {
	t0 := offsets{"orders": {0: 10}, "payments": {0: 10}, "inventory": {0: 10}}
	lme := map[string]int64{"orders/0": 11, "payments/0": 12, "inventory/0": 12}
	acks := []sandbox.Ack{
		{ID: "orders/A/1", Topic: "orders", Offset: 9},        // below T0: on B by offset identity
		{ID: "orders/A/2", Topic: "orders", Offset: 10},       // read on B
		{ID: "orders/A/3", Topic: "orders", Offset: 12},       // beyond the LME, not on B: lost
		{ID: "payments/A/1", Topic: "payments", Offset: 3},    // below T0 but aborted by the stop: lost
		{ID: "payments/A/2", Topic: "payments", Offset: 11},   // read on B
		{ID: "inventory/A/1", Topic: "inventory", Offset: 12}, // compacted away on B, at the LME: mirrored
		{ID: "inventory/A/2", Topic: "inventory", Offset: 13}, // beyond the LME: lost
	}
	onB := map[string]bool{"orders/A/2": true, "payments/A/2": true}
	var got []string
	for _, a := range lostAcks(acks, t0, onB, lme) {
		got = append(got, a.ID)
	}
	want := []string{"orders/A/3", "payments/A/1", "inventory/A/2"}
	if !slices.Equal(got, want) {
		t.Fatalf("lost %v, want %v", got, want)
	}
}

func TestReportJSONRoundTripsAndMarkdownNamesEveryStep(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := Report{Version: ReportVersion, Mirror: "a-to-b", Started: at, Finished: at.Add(time.Minute), Complete: true,
		RPO: RPO{Method: RPOAcks, Known: true, Records: 3, Seconds: 0.25, ByTopic: map[string]int64{"orders": 3}}, RTO: RTO{Seconds: 1.5, OutageAt: at},
		Anomalies: []string{"3 acknowledged records lost"}, Notes: []string{"outage: at peak"}}
	for _, id := range Steps {
		rep.Timeline = append(rep.Timeline, StepRecord{ID: id, Step: id.String(), Title: id.Title(), Result: "passed", Started: at, Ended: at, Lines: []string{"ok"}})
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.RPO.Records != 3 || back.RTO.Seconds != 1.5 || len(back.Timeline) != len(Steps) || back.Timeline[2].Step != "outage" {
		t.Fatalf("round trip lost data: %+v", back)
	}
	md := Markdown(rep)
	for _, id := range Steps {
		if !strings.Contains(md, id.Title()) {
			t.Errorf("Markdown lacks step %q", id.Title())
		}
	}
	for _, want := range []string{"| RPO (records) | 3", "| RTO | 1.500 s", "- 3 acknowledged records lost", "- outage: at peak"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	rep.RPO = RPO{Method: RPOOffsets, Unknown: "source unreachable"}
	rep.Timeline[StepOutage].Instruction, rep.Timeline[StepOutage].Confirmed = "Stop A.", at
	rep.Groups = []GroupPosition{{Group: "billing", Topic: "orders", Partition: 1, Source: 40, Synced: 35, OnB: -1, Reprocessed: 5}}
	md = Markdown(rep)
	for _, want := range []string{"| RPO (records) | unknown: source unreachable |", "- [x] Stop A. (confirmed 03:04:05.000)",
		"| billing | orders/1 | 40 | 35 | none | 5 |", "| read again after the switch | 5 records"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestRPOFromRowsIsKnownOnlyWhenTheSourceAnswers(t *testing.T) {
	at := time.Unix(100, 0)
	rows := []engine.DescribeRow{
		{Topic: "orders", Partition: 0, SourceOffset: 50, LastMirrorOffset: 49},   // caught up
		{Topic: "orders", Partition: 1, SourceOffset: 50, LastMirrorOffset: 39},   // 10 behind
		{Topic: "payments", Partition: 0, SourceOffset: 7, LastMirrorOffset: -1},  // nothing mirrored yet
		{Topic: "payments", Partition: 1, SourceOffset: 20, LastMirrorOffset: 25}, // source truncated below the LME
	}
	rpo := rpoFromRows(rows, at)
	if !rpo.Known || rpo.Records != 17 || rpo.ByTopic["orders"] != 10 || rpo.ByTopic["payments"] != 7 || !rpo.MeasuredAt.Equal(at) {
		t.Fatalf("answered: %+v", rpo)
	}
	rows[1].SourceOffset = -1
	if rpo := rpoFromRows(rows, at); rpo.Known || rpo.Records != 0 || !strings.Contains(rpo.Unknown, "1 of 4 partitions") {
		t.Fatalf("one partition unanswered: %+v", rpo)
	}
	for i := range rows {
		rows[i].SourceOffset = -1
	}
	if rpo := rpoFromRows(rows, at); rpo.Known || rpo.Unknown != "source unreachable" || rpoLine(rpo) != "unknown, source unreachable" {
		t.Fatalf("source down: %+v", rpo)
	}
}

func TestReverseName(t *testing.T) {
	for in, want := range map[string]string{"a-to-b": "b-to-a", "prod-to-dr": "dr-to-prod", "mirror1": "mirror1-failback", "a-to-b-to-c": "a-to-b-to-c-failback"} {
		if got := reverseName(in); got != want {
			t.Errorf("reverseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeEngine is a mirror whose partitions are all MIRRORING.
type fakeEngine struct{}

func (fakeEngine) Snapshot() engine.Snapshot {
	return engine.Snapshot{Mirrors: []engine.MirrorSnapshot{{Name: "a-to-b", Partitions: []engine.PartitionSnapshot{
		{Mirror: "a-to-b", Topic: "orders", State: partition.Mirroring},
	}}}}
}

func (fakeEngine) Control(context.Context, engine.Command) error { return nil }

// manualTarget makes the preflight the operator's and measures nothing.
type manualTarget struct {
	sandboxTarget
	ran int
}

func (m *manualTarget) Instruction(id StepID) string {
	if id == StepPreflight {
		return "Check the runbook."
	}
	return ""
}
func (m *manualTarget) wantTopics() []string                      { return nil }
func (m *manualTarget) preflight(context.Context, *stepRun) error { m.ran++; return nil }

func TestNextWaitsForTheOperatorsConfirmation(t *testing.T) {
	now := time.Unix(1000, 0)
	tgt := &manualTarget{}
	d, err := New(Config{Target: tgt, Engine: fakeEngine{}, StepTimeout: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Status(); !st.Steps[0].NeedsConfirm() || st.Steps[0].Instruction != "Check the runbook." || st.Steps[1].NeedsConfirm() {
		t.Fatalf("steps %+v", st.Steps[:2])
	}
	if err := d.Next(t.Context(), ""); !errors.Is(err, ErrNeedsConfirm) || tgt.ran != 0 {
		t.Fatalf("Next on an unconfirmed step: %v (ran %d)", err, tgt.ran)
	}
	if err := d.Confirm(t.Context(), "done by hand"); err != nil || tgt.ran != 1 {
		t.Fatalf("Confirm: %v (ran %d)", err, tgt.ran)
	}
	st := d.Status()
	if st.Current != 1 || !st.Steps[0].Confirmed.Equal(now) || st.Steps[0].Note != "done by hand" || st.Steps[0].State != Passed {
		t.Fatalf("after Confirm: %+v", st.Steps[0])
	}
	if err := d.Confirm(t.Context(), ""); !errors.Is(err, ErrNothingToConfirm) {
		t.Fatalf("Confirm on a step without instruction: %v", err)
	}
}

// consistentLoss is a region-loss report and the ledger's truth that agree:
// two records lost on orders/1, both quarantined, A == B.
func consistentLoss() (ledgerTruth, Report) {
	acks := []sandbox.Ack{
		{ID: "orders/A/1", Topic: "orders", Partition: 1, Offset: 10, Side: sandbox.SideA},
		{ID: "orders/A/2", Topic: "orders", Partition: 1, Offset: 11, Side: sandbox.SideA},
		{ID: "orders/A/3", Topic: "orders", Partition: 1, Offset: 12, Side: sandbox.SideA},
	}
	truth := ledgerTruth{scenario: ScenarioRegionLoss, acksA: acks, lost: []string{"orders/A/2", "orders/A/3"}}
	rep := Report{
		RPO: RPO{Method: RPOAcks, Known: true, Records: 2, AckedByA: 3, LostIDs: []string{"orders/A/3", "orders/A/2"},
			Lost: []LostPartition{{Topic: "orders", Partition: 1, Records: 2, Offsets: "11-12", LME: 10, Diverged: true, Quarantined: 2}}},
		Failback:   []FailbackPartition{{Topic: "orders", Partition: 1, Expect: "diverged"}, {Topic: "orders", Partition: 0, Expect: "delta"}},
		Quarantine: &Quarantine{Records: 3, Read: 3, Acknowledged: 2, NeverAcknowledged: 1, Unexplained: []string{}, Missing: []string{}},
		AEqualsB:   &Compare{Equal: true, Partitions: 2, Records: 40},
	}
	return truth, rep
}

// TestCheckReportFindsNumbersThatDisagreeWithTheLedger: every check of
// the audit agrees on a consistent report, and each tampered number fails
// the check that names it (the report step then fails, and
// --drill-script exits 1).
func TestCheckReportFindsNumbersThatDisagreeWithTheLedger(t *testing.T) {
	truth, rep := consistentLoss()
	if bad := auditFailures(checkReport(truth, &rep)); len(bad) > 0 {
		t.Fatalf("a consistent report fails: %v", bad)
	}
	for _, tc := range []struct {
		name   string
		tamper func(*Report)
		check  string
	}{
		{"one record more", func(r *Report) { r.RPO.Records++ }, "RPO records = acknowledged by A, not on B"},
		{"another id", func(r *Report) { r.RPO.LostIDs = []string{"orders/A/1", "orders/A/3"} }, "RPO records = acknowledged by A, not on B"},
		{"acks miscounted", func(r *Report) { r.RPO.AckedByA = 4 }, "A's acknowledgements"},
		{"partitions do not add up", func(r *Report) { r.RPO.Lost[0].Records = 1 }, "lost partitions add up to the RPO"},
		{"loss on a delta partition", func(r *Report) { r.Failback[0].Expect = "delta" }, "every partition with a loss was DIVERGED at failback"},
		{"quarantine short", func(r *Report) { r.Quarantine.Acknowledged = 1; r.Quarantine.NeverAcknowledged = 2 }, "quarantine = RPO"},
		{"quarantine read back short", func(r *Report) { r.Quarantine.Read = 2 }, "quarantine = RPO"},
		{"no rebuild", func(r *Report) { r.Quarantine = nil }, "quarantine = RPO"},
		{"A differs", func(r *Report) { r.AEqualsB = &Compare{Differences: []string{"orders/1: A ends at 13, B at 12"}} }, "A == B after the failback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			truth, rep := consistentLoss()
			tc.tamper(&rep)
			var failed []string
			for _, c := range checkReport(truth, &rep) {
				if !c.OK {
					failed = append(failed, c.Check)
				}
			}
			if !slices.Contains(failed, tc.check) {
				t.Fatalf("check %q did not fail (failed: %v)", tc.check, failed)
			}
		})
	}

	// Planned: a loss, or a diverged partition, disagrees with the scenario.
	truth.scenario = ScenarioPlanned
	var failed []string
	for _, c := range checkReport(truth, &rep) {
		if !c.OK {
			failed = append(failed, c.Check)
		}
	}
	for _, want := range []string{"planned: nothing lost", "planned: the failback copies only the delta"} {
		if !slices.Contains(failed, want) {
			t.Errorf("planned check %q did not fail on a loss (failed: %v)", want, failed)
		}
	}
}

func TestOffsetRangesAndLostByPartition(t *testing.T) {
	if got := offsetRanges([]int64{12, 10, 11, 15, 17, 16, 20}); got != "10-12, 15-17, 20" {
		t.Fatalf("offsetRanges = %q", got)
	}
	at := time.Unix(100, 0)
	lost := []sandbox.Ack{
		{ID: "clicks/A/1", Topic: "clicks", Partition: 2, Offset: 7, At: at.Add(time.Second)},
		{ID: "orders/A/1", Topic: "orders", Partition: 1, Offset: 11, At: at.Add(time.Second)},
		{ID: "orders/A/2", Topic: "orders", Partition: 1, Offset: 12, At: at},
	}
	got := lostByPartition(lost, map[string]int64{"orders/1": 10, "clicks/2": 6})
	want := []LostPartition{
		{Topic: "orders", Partition: 1, Records: 2, Offsets: "11-12", LME: 10, OldestAck: at},
		{Topic: "clicks", Partition: 2, Records: 1, Offsets: "7", LME: 6, OldestAck: at.Add(time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("lostByPartition = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("partition %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestScenariosParseAndExplain(t *testing.T) {
	for _, sc := range Scenarios {
		back, err := ParseScenario(sc.String())
		if err != nil || back != sc || sc.Summary() == "" {
			t.Errorf("scenario %s: parsed %v, %v; summary %q", sc, back, err, sc.Summary())
		}
	}
	if _, err := ParseScenario("meteor"); err == nil || !strings.Contains(err.Error(), "planned, region-loss, unclean") {
		t.Errorf("unknown scenario: %v", err)
	}
	if txt := sandboxText(ScenarioPlanned, StepOutage); txt.title == StepOutage.Title() {
		t.Errorf("the planned cutover keeps the outage's title %q", txt.title)
	}
}

// TestCostsExplainEachNumber: every number the report has gets one
// sentence, and a loss names what would shrink it.
func TestCostsExplainEachNumber(t *testing.T) {
	_, rep := consistentLoss()
	rep.RPO.Seconds = 0.42
	rep.RTO.Seconds = 1.2
	rep.Group = &GroupResult{Topic: "orders", Duplicates: 7, PositionsB: map[int32]int64{1: 10}}
	rep.Election = &ElectionLoss{Topic: "clicks", Partition: 0, Records: 5, OnB: 3, Nowhere: 2}
	rep.RPO.ByTopic = map[string]int64{"orders": 2, "payments": 0}
	labels := map[string]string{}
	for _, c := range Costs(rep) {
		if strings.Count(strings.TrimSuffix(c.Meaning, "."), ". ") > 0 || !strings.HasSuffix(c.Meaning, ".") {
			t.Errorf("%s: not one sentence: %q", c.Label, c.Meaning)
		}
		labels[c.Label] = c.Value + ": " + c.Meaning
	}
	for label, want := range map[string]string{
		"RPO": "saved (orders) are not on B, gone for everyone now on B; lower lag", "RPO (time)": "closer to A", "unclean election": "acks=all",
		"DIVERGED": "1 partition:", "quarantined": "2 acknowledged", "RTO": "1.2s", "processed twice": "7 records",
	} {
		if !strings.Contains(labels[label], want) {
			t.Errorf("cost %q = %q, want it to say %q", label, labels[label], want)
		}
	}
}

// TestInFlightAtOutageExplainsTheDifference: records beyond B's log end
// when A went down that are not lost are explained as in flight; with
// none in flight there is no line.
func TestInFlightAtOutageExplainsTheDifference(t *testing.T) {
	if got := inFlightAtOutage(160, 149); !strings.HasPrefix(got, "11 of the 160 acknowledged records beyond B's log end when A went down reached B afterwards") {
		t.Errorf("160 at the outage, 149 lost: %q", got)
	}
	for _, tc := range [][2]int64{{149, 149}, {0, 0}, {5, 7}} {
		if got := inFlightAtOutage(tc[0], tc[1]); got != "" {
			t.Errorf("%d at the outage, %d lost: %q, want no line", tc[0], tc[1], got)
		}
	}
}

// TestCostsOfAPlannedCutover: with nothing lost the RPO says so, and the
// RTO counts from the cutover, since A never went down.
func TestCostsOfAPlannedCutover(t *testing.T) {
	rep := Report{Scenario: ScenarioPlanned.String(), RPO: RPO{Method: RPOAcks, Known: true}, RTO: RTO{Seconds: 0.4},
		Failback: []FailbackPartition{{Topic: "orders", Partition: 0, Expect: "delta"}}}
	got := map[string]string{}
	for _, c := range Costs(rep) {
		got[c.Label] = c.Meaning
	}
	for label, want := range map[string]string{"RPO": "the producers stopped", "failback": "only what B received", "RTO": "after the cutover began"} {
		if !strings.Contains(got[label], want) {
			t.Errorf("cost %q = %q, want it to say %q", label, got[label], want)
		}
	}
	if strings.Contains(got["RTO"], "A went down") {
		t.Errorf("a planned cutover's RTO says A went down: %q", got["RTO"])
	}
}

// TestCostsOfAGroupWithNoOffsetsOnB: a group that found no synced offsets
// on B started from the earliest offset, and the explanation says so
// instead of blaming offsets synced before the outage.
func TestCostsOfAGroupWithNoOffsetsOnB(t *testing.T) {
	_, rep := consistentLoss()
	rep.Group = &GroupResult{Topic: "orders", Duplicates: 2866, PositionsB: map[int32]int64{}}
	for _, c := range Costs(rep) {
		if c.Label != "processed twice" {
			continue
		}
		if !strings.Contains(c.Meaning, "started on B from the earliest offset and processed 2866 orders records again") || strings.Contains(c.Meaning, "synced before the outage") {
			t.Errorf("processed twice with no offsets on B: %q", c.Meaning)
		}
		return
	}
	t.Errorf("no processed twice cost in %v", Costs(rep))
}
