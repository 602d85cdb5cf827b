package drill

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/sandbox"
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
		RPO: RPO{Records: 3, Seconds: 0.25, ByTopic: map[string]int64{"orders": 3}}, RTO: RTO{Seconds: 1.5, OutageAt: at},
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
}
