package tui

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/drill"
	"github.com/kmirror/kmirror/drill/drilltest"
	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/enginetest/states"
	"github.com/kmirror/kmirror/engine/partition"
)

// stepWait bounds a drill step against in-process clusters: alignment,
// the group sync and the stop all take a few polls of the engine.
const stepWait = 90 * time.Second

// TestFlowConsoleDrillOnRealClusters runs `kmirror console --drill` as the
// console runs it: a real engine instance on B and the drill's real-clusters
// target, over two kfake clusters. The operator runs the automatic steps
// with n, ticks the outage and the client switch with x after doing them
// (here: a paused topic keeps records from B, as a mirror behind would, and
// the test writes to B and commits the group there as moved clients do),
// stops the mirror with S, and the report must hold every step and the
// measurements the clusters confirm.
func TestFlowConsoleDrillOnRealClusters(t *testing.T) {
	ctx := t.Context()
	src, dst := enginetest.Pair(t)
	rd := drilltest.NewReal(t, src, dst, "drill-console", stepWait)
	eng, d, path, prodA := rd.Engine, rd.Drill, rd.ReportPath, rd.Producer

	f := newFrames()
	m := newModel(ctx, eng, Options{Drill: d, Tick: MinTick})
	tm := teatest.NewTestModel(t, recorder{m: m, f: f}, teatest.WithInitialTermSize(160, 48))
	t.Cleanup(func() {
		tm.Send(key("ctrl+c"))
		tm.WaitFinished(t, teatest.WithFinalTimeout(waitLimit))
	})
	fl := &flow{t: t, tm: tm, f: f}
	step := func(from int, what string, parts ...string) int {
		t.Helper()
		return fl.f.waitFrom(t, from, stepWait, what, contains(parts...))
	}

	at := fl.wait("the drill panel", contains("DR DRILL  step 1/8", "n run step 1"))
	fl.keys("n")
	at = step(at, "preflight passed", "✓ 1 Preflight", "DR DRILL  step 2/8")
	fl.keys("n")
	at = step(at, "the outage instruction", "✓ 2 Snapshot T0", "[ ] Take A away", "x done: tick step 3")

	// n does not run the operator's step.
	fl.keys("n")
	at = step(at, "n refused on the outage", "this step is yours")

	// The "outage": payments stops reaching B and A takes more records, as
	// when the mirror is behind at the moment of a disaster.
	if err := eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b", Topics: []string{"payments"}}); err != nil {
		t.Fatal(err)
	}
	states.Wait(t, stepWait, eng, states.Select{Topic: "payments"}, partition.Paused)
	enginetest.Produce(t, prodA, "payments", 2, 10, "unmirrored")
	fl.keys("x")
	at = step(at, "the outage confirmed", "✓ 3 Outage", "A still answers", "DR DRILL  step 4/8")

	// The operator fails over with S and the mirror's name; the drill's
	// failover step follows the stop it finds under way.
	fl.keys("S")
	at = step(at, "the typed confirmation", "Type a-to-b and press enter")
	fl.tm.Type("a-to-b")
	fl.keys("enter")
	states.Wait(t, stepWait, eng, states.Select{}, partition.Stopped)
	fl.keys("n")
	at = step(at, "failover passed", "✓ 4 Failover", "[ ] Point your producers", "x done: tick step 5")

	// The clients move to B: a producer writes orders there, and the group
	// commits beyond the synced offset.
	prodB := dst.Client(t, enginetest.ProducerOpts("none", true)...)
	enginetest.Produce(t, prodB, "orders", 1, 5, "on-b")
	moved := kadm.Offsets{}
	moved.AddOffset("orders", 0, 45, -1)
	if _, err := dst.Admin(t).CommitOffsets(ctx, "billing", moved); err != nil {
		t.Fatal(err)
	}
	fl.keys("x")
	at = step(at, "the switch confirmed", "✓ 5 Switch clients", "first write on B", "first group commit seen on B")
	fl.keys("n")
	at = step(at, "verify passed", "✓ 6 Verify")
	fl.keys("n")
	at = step(at, "the failback plan", "✓ 7 Failback rehearsal")
	fl.keys("i")
	fl.tm.Type("planned drill")
	fl.keys("enter", "n")
	step(at, "the report written", "DR DRILL  complete", "report:", "drill complete")
	if got := d.Status().ReportPath; got != path {
		t.Fatalf("report path %q, want %q", got, path)
	}

	b, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var rep drill.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, b)
	}
	var steps []string
	for _, s := range rep.Timeline {
		steps = append(steps, s.Step)
		if s.Result != "passed" {
			t.Errorf("step %s: %s %s", s.Step, s.Result, s.Error)
		}
	}
	var want []string
	for _, id := range drill.Steps {
		want = append(want, id.String())
	}
	if !slices.Equal(steps, want) || !rep.Complete || rep.Target != "real" || rep.Version != drill.ReportVersion {
		t.Fatalf("timeline %v (complete %v, target %q, version %d), want %v", steps, rep.Complete, rep.Target, rep.Version, want)
	}
	for _, i := range []drill.StepID{drill.StepOutage, drill.StepSwitch} {
		if s := rep.Timeline[i]; s.Instruction == "" || s.Confirmed.IsZero() {
			t.Errorf("step %s: instruction %q confirmed %v", s.Step, s.Instruction, s.Confirmed)
		}
	}
	if !slices.Contains(rep.Notes, "report: planned drill") {
		t.Errorf("notes %v", rep.Notes)
	}

	// The loss by offsets is what A holds beyond each partition's last
	// mirrored offset: the 10 records per payments partition paused away.
	if !rep.RPO.Known || rep.RPO.Method != drill.RPOOffsets || rep.RPO.Records != 20 || rep.RPO.ByTopic["payments"] != 20 || rep.RPO.ByTopic["orders"] != 0 {
		t.Errorf("RPO %+v, want 20 offsets, all payments", rep.RPO)
	}
	if len(rep.RPO.Partitions) != 5 {
		t.Errorf("RPO partitions %+v", rep.RPO.Partitions)
	}
	if !rep.BWritable || rep.RTO.Seconds <= 0 || rep.RTO.FirstProduceAt.IsZero() || rep.RTO.FirstConsumeAt.IsZero() {
		t.Errorf("B writable %v, RTO %+v", rep.BWritable, rep.RTO)
	}
	var p0 *drill.GroupPosition
	for i, g := range rep.Groups {
		if g.Group == "billing" && g.Topic == "orders" && g.Partition == 0 {
			p0 = &rep.Groups[i]
		}
	}
	if p0 == nil || p0.Source != 30 || p0.Synced != 30 || p0.OnB != 45 || p0.Reprocessed != 0 {
		t.Errorf("billing orders/0 position %+v, want A 30, synced 30, on B 45", p0)
	}
	plan := map[string]drill.FailbackPartition{}
	for _, fp := range rep.Failback {
		plan[fmt.Sprintf("%s/%d", fp.Topic, fp.Partition)] = fp
	}
	if fp := plan["payments/0"]; fp.Expect != "diverged" || fp.Beyond != 10 || fp.State != "planned" {
		t.Errorf("payments/0 plan %+v, want diverged by 10", fp)
	}
	if fp := plan["orders/0"]; fp.Expect != "delta" || fp.Delta != 6 {
		t.Errorf("orders/0 plan %+v, want a delta of 6 (the stop's fence marker and 5 records)", fp)
	}
	md, err := os.ReadFile(path + ".md")
	if err != nil || !strings.Contains(string(md), "| RPO (records) | 20 offsets on A") || !strings.Contains(string(md), "[x] Take A away") {
		t.Errorf("Markdown report (%v):\n%s", err, md)
	}
}
