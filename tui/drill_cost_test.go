package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kmirror/kmirror/drill"
)

// finishedDrill is a fake drill whose every step has passed, with the
// numbers of a drill of scenario sc explained as the drill explains them.
func finishedDrill(sc drill.Scenario) *fakeDrill {
	f := newFakeDrill()
	for i := range f.st.Steps {
		r := &f.st.Steps[i]
		r.State, r.Result, r.Lines = drill.Passed, "passed", []string{"did " + r.Step}
	}
	f.st.Current, f.st.ReportPath = len(f.st.Steps), "/tmp/kmirror-drill-test"
	rep := drill.Report{Scenario: sc.String(),
		RPO: drill.RPO{Method: drill.RPOAcks, Known: true, Records: 918, Seconds: 0.646,
			ByTopic: map[string]int64{"orders": 530, "payments": 388}},
		RTO:        drill.RTO{Seconds: 0.681},
		Group:      &drill.GroupResult{Topic: "orders", Duplicates: 1094, PositionsB: map[int32]int64{0: 1655}},
		Quarantine: &drill.Quarantine{Records: 1106, Read: 1106, Acknowledged: 918, NeverAcknowledged: 188},
	}
	for p := range int32(18) {
		expect := "delta"
		if p < 11 {
			expect = "diverged"
		}
		rep.Failback = append(rep.Failback, drill.FailbackPartition{Topic: "orders", Partition: p, Expect: expect})
	}
	if sc == drill.ScenarioUnclean {
		rep.Election = &drill.ElectionLoss{Topic: "clicks", Partition: 0, Records: 162, OnB: 135, Nowhere: 27}
	}
	f.st.Cost = drill.Costs(rep)
	return f
}

// TestGoldenDrillCost pins the drill's loss explanation: c opens every
// number with the sentence that says what it means for the business and
// what would shrink it, at 80×24 and 160×48; at 160×48 the panel itself
// lists the numbers under "what it cost".
func TestGoldenDrillCost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sc       drill.Scenario
		w, h     int
		keys     []string
		contains []string
	}{
		{"region-loss/80x24", drill.ScenarioRegionLoss, 80, 24, []string{"c"}, []string{"What the failover cost", "RPO: 918 records", "lower lag", "closer to A", "DIVERGED: 11 partitions", "quarantined: 918 acknowledged", "processed twice: 1094 records"}},
		{"region-loss/160x48", drill.ScenarioRegionLoss, 160, 48, []string{"c"}, []string{"What the failover cost", "RPO: 918 records", "RTO: 681ms", "idempotent"}},
		{"unclean/80x24", drill.ScenarioUnclean, 80, 24, []string{"c"}, []string{"unclean election: 162 records", "acks=all", "processed twice: 1094 records"}},
		{"unclean/160x48", drill.ScenarioUnclean, 160, 48, []string{"c"}, []string{"What the failover cost", "unclean election: 162 records", "clicks", "acks=all", "RPO: 918 records", "quarantined: 918 acknowledged"}},
		{"panel/160x48", drill.ScenarioRegionLoss, 160, 48, nil, []string{"what it cost (c explains each number)", "RPO", "918 records", "quarantined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := fixture(t, tc.w, tc.h, Options{Theme: "dark", Drill: finishedDrill(tc.sc)})
			press(t, m, tc.keys...)
			plain := screen(t, m, colorprofile.NoTTY)
			for _, want := range tc.contains {
				if !strings.Contains(strings.Join(strings.Fields(plain), " "), want) {
					t.Errorf("screen lacks %q:\n%s", want, plain)
				}
			}
			golden.RequireEqual(t, screen(t, m, colorprofile.ASCII))
		})
	}
}

// TestDrillCostClosesWithEscAndC: the explanation takes the keys while it
// is open, and esc or c closes it.
func TestDrillCostClosesWithEscAndC(t *testing.T) {
	m, _ := fixture(t, 120, 40, Options{Drill: finishedDrill(drill.ScenarioRegionLoss)})
	for _, closeKey := range []string{"esc", "c"} {
		press(t, m, "c")
		if !m.drill.cost || !strings.Contains(screen(t, m, colorprofile.NoTTY), "What the failover cost") {
			t.Fatalf("c did not open the explanation")
		}
		press(t, m, "tab") // taken by the explanation, not the console
		if m.screen != ScreenPartitions {
			t.Fatalf("tab moved to %s under the explanation", m.screen)
		}
		press(t, m, closeKey)
		if m.drill.cost {
			t.Fatalf("%s did not close the explanation", closeKey)
		}
	}
}

// TestGoldenDrillShortPanel: at 80×24 the panel below the table is too
// short for the step list, the numbers and the last step's output, so it
// shows the step just run with its output's newest lines (the loss, the
// RPO), then the next step with the start of its explanation, the keys
// and the numbers in one line.
func TestGoldenDrillShortPanel(t *testing.T) {
	f := finishedDrill(drill.ScenarioRegionLoss)
	verify := int(drill.StepVerify)
	for i := range f.st.Steps[verify+1:] {
		r := &f.st.Steps[verify+1+i]
		r.State, r.Result, r.Lines = drill.Pending, "pending", nil
	}
	f.st.Current, f.st.ReportPath = verify+1, ""
	f.st.Steps[verify].Lines = []string{
		"producers stopped so the counts below are final",
		"lost: 918 of 82473 records A acknowledged are not on B (orders 530, payments 388)",
		"RPO 918 records, 646ms",
		"group orders-processor: 1094 records processed twice, 0 never processed (of 14305 expected)",
	}
	m, _ := fixture(t, 80, 24, Options{Theme: "dark", Drill: f})
	press(t, m, "d")
	plain := strings.Join(strings.Fields(screen(t, m, colorprofile.NoTTY)), " ")
	for _, want := range []string{"DR DRILL step 7/8", "✓ 6 Verify", "7 Failback rehearsal", "cost (c): RPO 918 records", "RPO 918 records, 646ms", "1094 records processed twice"} {
		if !strings.Contains(plain, want) {
			t.Errorf("short panel lacks %q:\n%s", want, screen(t, m, colorprofile.NoTTY))
		}
	}
	if strings.Contains(plain, "1 Preflight") {
		t.Errorf("short panel still lists every step:\n%s", screen(t, m, colorprofile.NoTTY))
	}
	golden.RequireEqual(t, screen(t, m, colorprofile.ASCII))
}
