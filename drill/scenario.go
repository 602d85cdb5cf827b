package drill

import (
	"fmt"
	"strings"
)

// Scenario is the kind of failover the demo's drill rehearses.
type Scenario int8

const (
	// ScenarioRegionLoss: A's region goes away mid-stream while the mirror
	// runs a few hundred milliseconds behind across the WAN link. What A
	// acknowledged in those milliseconds is lost, A is found DIVERGED on
	// failback, and the rebuild quarantines exactly those records.
	ScenarioRegionLoss Scenario = iota
	// ScenarioPlanned: the producers stop first and the mirror catches up,
	// so nothing is lost and the failback copies only B's delta.
	ScenarioPlanned
	// ScenarioUnclean: an unclean leader election on A loses the newest
	// records of one partition shortly before the region goes away.
	ScenarioUnclean
)

// Scenarios lists every scenario, in the order the help names them.
var Scenarios = []Scenario{ScenarioPlanned, ScenarioRegionLoss, ScenarioUnclean}

// String is the scenario's name, as --scenario takes it.
func (s Scenario) String() string {
	switch s {
	case ScenarioRegionLoss:
		return "region-loss"
	case ScenarioPlanned:
		return "planned"
	case ScenarioUnclean:
		return "unclean"
	}
	return "unknown"
}

// Summary says in one line what the scenario rehearses.
func (s Scenario) Summary() string {
	switch s {
	case ScenarioRegionLoss:
		return "A's region is lost mid-stream while the mirror runs behind across the WAN: the records in flight are lost, A diverges, the rebuild quarantines them"
	case ScenarioPlanned:
		return "the producers stop first and the mirror catches up: nothing is lost, the failback copies only B's delta"
	case ScenarioUnclean:
		return "an unclean leader election on A loses a partition's newest records, then the region is lost"
	}
	return ""
}

// ParseScenario reads a scenario's name.
func ParseScenario(name string) (Scenario, error) {
	var names []string
	for _, s := range Scenarios {
		if s.String() == name {
			return s, nil
		}
		names = append(names, s.String())
	}
	return 0, fmt.Errorf("unknown scenario %q: want %s", name, strings.Join(names, ", "))
}

// stepText is how a step presents itself in the panel and the report.
type stepText struct {
	title, explain, lookAt string
}

// sandboxText is what the demo's steps say in a scenario: the common
// wording, with the steps the scenario changes.
func sandboxText(sc Scenario, id StepID) stepText {
	t := stepText{title: id.Title(), explain: id.Explain(), lookAt: id.LookAt()}
	switch {
	case sc == ScenarioPlanned && id == StepOutage:
		t.title = "Cutover: stop the producers"
		t.explain = "A planned failover: the producers on A stop, A stays up, and the mirror catches up until B holds every record A acknowledged."
		t.lookAt = "partitions view: LAG falls to 0; this panel: how long the mirror took to catch up"
	case sc == ScenarioUnclean && id == StepOutage:
		t.title = "Election, then outage"
		t.explain = "A partition's leader on A fails and a replica that was behind takes over (an unclean election): A's newest records there are gone. Then A's region goes down."
		t.lookAt = "partitions view: the partition goes FAILED (source unclean leader election); this panel: the records the election lost"
	case sc == ScenarioPlanned && id == StepFailback:
		t.explain = "A is still up: mirror B back to A; every partition gets only what B took since the cutover (the delta), and A ends identical to B."
		t.lookAt = "this panel: per-partition LME and delta (b-to-a runs in a second instance, on A)"
	case id == StepFailback:
		t.explain = "Bring A back and mirror B to A: partitions where A holds the lost writes are DIVERGED; --recover --rebuild quarantines those writes on A and makes A identical to B."
		t.lookAt = "this panel: DIVERGED partitions, the quarantine count against the loss, A == B (b-to-a runs in a second instance, on A)"
	}
	return t
}
