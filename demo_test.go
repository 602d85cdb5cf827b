package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/drill"
	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/sandbox"
)

// scriptRun is one unattended drill of a scenario, run in-process as
// `kmirror demo --drill-script --scenario S` does.
type scriptRun struct {
	env *demoEnv
	rep drill.Report
	out string
}

// runScript starts the demo (A behind the demo's WAN link) and runs the
// scenario's drill unattended; it fails the test unless the drill exits 0
// with every step in the log and a complete timeline.
func runScript(t *testing.T, sc drill.Scenario) *scriptRun {
	t.Helper()
	ctx := t.Context()
	env, err := startDemo(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), demoOptions(demoLinkRTT, demoLinkBandwidth))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.close)
	t.Logf("demo started in %s", env.started)
	path := filepath.Join(t.TempDir(), "drill")
	run := &scriptRun{env: env}
	var out bytes.Buffer
	// Started at once, as a person pressing n from the first second
	// would: preflight waits for the group's offsets on B by itself.
	code := runDrillScript(ctx, func() (*drill.Drill, error) {
		// Every wait gets the room a loaded CI machine under -race needs;
		// the transactional topic is the slowest to mirror there.
		return drill.New(drill.Config{Target: drill.SandboxTarget(env.sb, sc), Engine: env.eng, Mirror: demoMirror, ReportPath: path, StepTimeout: 3 * time.Minute})
	}, &out, &out)
	run.out = out.String()
	t.Logf("drill output:\n%s", run.out)
	if code != exitOK {
		t.Fatalf("drill exited %d", code)
	}
	for i, id := range drill.Steps {
		if head := fmt.Sprintf("== %d/%d ", i+1, len(drill.Steps)); !strings.Contains(run.out, head) {
			t.Errorf("step log lacks step %d (%s)", i+1, id)
		}
	}
	b, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run.rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if md, err := os.ReadFile(path + ".md"); err != nil || !strings.Contains(string(md), "RPO (records)") || !strings.Contains(string(md), "## What it cost") {
		t.Fatalf("Markdown report missing, or without RPO and cost: %v", err)
	}
	rep := run.rep
	var steps []string
	for _, s := range rep.Timeline {
		steps = append(steps, s.Step)
		if s.Result != "passed" || s.Started.IsZero() || s.Ended.Before(s.Started) {
			t.Errorf("step %s: result %s, %s → %s", s.Step, s.Result, s.Started, s.Ended)
		}
	}
	var want []string
	for _, id := range drill.Steps {
		want = append(want, id.String())
	}
	if !slices.Equal(steps, want) || !rep.Complete || rep.Scenario != sc.String() {
		t.Fatalf("timeline %v (complete %v, scenario %q), want %v of %s", steps, rep.Complete, rep.Scenario, want, sc)
	}
	if !rep.RPO.Known || rep.RPO.Method != drill.RPOAcks || rep.Target != "sandbox" || rep.Group == nil {
		t.Fatalf("sandbox report: RPO %s known %v, target %q, group %v", rep.RPO.Method, rep.RPO.Known, rep.Target, rep.Group)
	}
	for _, c := range rep.Audit {
		if !c.OK {
			t.Errorf("audit: %s: %s", c.Check, c.Detail)
		}
	}
	if len(rep.Audit) == 0 || len(rep.Cost) == 0 {
		t.Errorf("report without audit (%d checks) or cost (%d numbers)", len(rep.Audit), len(rep.Cost))
	}
	if rep.AEqualsB == nil || !rep.AEqualsB.Equal {
		t.Errorf("after the failback A and B differ: %+v", rep.AEqualsB)
	}
	// Preflight passed only with the group's offsets on B, and said how
	// long the sync took.
	if !regexp.MustCompile(`group orders-processor's offsets are on B for its \d+ partitions of orders, at or past its commits on A when preflight began; the group offset sync took \d`).MatchString(run.out) ||
		strings.Contains(run.out, "no group offset sync reached B") {
		t.Errorf("preflight did not wait for the group's offsets on B")
	}
	var consumedOnA int64
	for _, o := range rep.Group.PositionsA {
		consumedOnA += o
	}
	t.Logf("group %s: consumed %d on A before the outage, processed twice %d, gaps %d", rep.Group.Group, consumedOnA, rep.Group.Duplicates, rep.Group.Gaps)
	return run
}

// TestDemoDrillScriptRegionLoss runs `--drill-script --scenario
// region-loss` and checks the report against what the test measures
// itself: the records A acknowledged that B lacks, from the producers'
// acks and a full read of B, must be the RPO, sit on partitions the
// failback found DIVERGED, and be exactly the acknowledged records of the
// rebuild's quarantine; afterwards A is batch for batch B. Duplicates and
// gaps come from the demo consumer.
func TestDemoDrillScriptRegionLoss(t *testing.T) {
	run := runScript(t, drill.ScenarioRegionLoss)
	env, rep := run.env, run.rep

	lost := independentLost(t, env)
	if len(lost) == 0 || rep.RPO.Records != int64(len(lost)) {
		t.Fatalf("report RPO %d records, measured %d lost: a region lost behind the link must lose some", rep.RPO.Records, len(lost))
	}
	slices.Sort(lost)
	got := slices.Sorted(slices.Values(rep.RPO.LostIDs))
	if !slices.Equal(got, lost) {
		t.Errorf("lost ids differ: only in the report %v, only by the test's read %v", difference(got, lost), difference(lost, got))
	}
	acked, _ := env.sb.Ledger().Count(sandbox.SideA)
	if rep.RPO.AckedByA != acked {
		t.Errorf("report says A acknowledged %d, the ledger %d", rep.RPO.AckedByA, acked)
	}
	diverged := map[string]bool{}
	for _, fp := range rep.Failback {
		if fp.Expect == "diverged" {
			diverged[fmt.Sprintf("%s/%d", fp.Topic, fp.Partition)] = true
		}
	}
	var perPart int64
	for _, lp := range rep.RPO.Lost {
		perPart += lp.Records
		if k := fmt.Sprintf("%s/%d", lp.Topic, lp.Partition); !diverged[k] || !lp.Diverged || lp.Quarantined != lp.Records {
			t.Errorf("%s lost %d records: diverged %v/%v, %d quarantined", k, lp.Records, diverged[k], lp.Diverged, lp.Quarantined)
		}
	}
	if perPart != rep.RPO.Records {
		t.Errorf("lost partitions add up to %d, RPO %d", perPart, rep.RPO.Records)
	}
	q := rep.Quarantine
	if q == nil || q.Acknowledged != int64(len(lost)) || q.Read != q.Records || q.Acknowledged+q.NeverAcknowledged != q.Read || len(q.Unexplained)+len(q.Missing) > 0 {
		t.Fatalf("quarantine %+v: want exactly the %d lost records acknowledged in it", q, len(lost))
	}
	t.Logf("RPO %d records (%.3fs) = %d acknowledged-but-not-mirrored by the ledger against B = %d acknowledged records in the quarantine (of %d); %d DIVERGED partitions; A == B over %d partitions, %d records",
		rep.RPO.Records, rep.RPO.Seconds, len(lost), q.Acknowledged, q.Read, len(diverged), rep.AEqualsB.Partitions, rep.AEqualsB.Records)
	if !strings.Contains(run.out, "--recover --rebuild --mirror b-to-a --topics ") {
		t.Errorf("the failback did not show the rebuild command")
	}
	// The quarantine read independently: every lost id once.
	inQ := quarantinedIDs(t, env, q)
	for _, id := range lost {
		if inQ[id] != 1 {
			t.Errorf("lost record %s is %d times in the quarantine", id, inQ[id])
		}
	}
	// A == B, batch for batch, as the engine tests compare mirrors.
	ctx := t.Context()
	ca, err := kgo.NewClient(kgo.SeedBrokers(env.sb.Bootstrap(sandbox.SideA)...))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := kgo.NewClient(kgo.SeedBrokers(env.sb.Bootstrap(sandbox.SideB)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	for _, tp := range sandbox.Topics {
		for p := range tp.Partitions {
			if _, err := enginetest.CompareBatches(ctx, cb, ca, tp.Name, p); err != nil {
				t.Errorf("A against B after the failback: %v", err)
			}
		}
	}

	// Duplicates and gaps as the demo consumer saw them (it stopped in verify).
	seen := env.sb.Consumer().Processed()
	var dup, gaps int64
	for _, n := range seen {
		dup += int64(n - 1)
	}
	lostSet := map[string]bool{}
	for _, id := range lost {
		lostSet[id] = true
	}
	for _, a := range env.sb.Ledger().Acks(nil) {
		if a.Topic == sandbox.ProcessedTopic && !lostSet[a.ID] && seen[a.ID] == 0 {
			gaps++
		}
	}
	if rep.Group.Duplicates != dup || rep.Group.Gaps != gaps {
		t.Errorf("report: %d duplicates, %d gaps; consumer: %d, %d", rep.Group.Duplicates, rep.Group.Gaps, dup, gaps)
	}
	if rep.RTO.Seconds <= 0 || rep.RTO.FirstProduceAt.IsZero() || rep.RTO.FirstConsumeAt.IsZero() {
		t.Errorf("RTO %+v: want a positive RTO with both firsts", rep.RTO)
	}
	if !rep.BWritable {
		t.Errorf("B not writable after the failover")
	}
	// Failed over with the group's offsets on B a sync interval old at
	// most: what it reads twice is the records since the last sync, not
	// everything it processed on A.
	var consumedOnA int64
	for _, o := range rep.Group.PositionsA {
		consumedOnA += o
	}
	if consumedOnA == 0 || rep.Group.Duplicates*5 > consumedOnA {
		t.Errorf("processed twice %d of %d consumed on A: want at most a fifth", rep.Group.Duplicates, consumedOnA)
	}
}

// TestDemoDrillScriptPlanned: the producers stop first and the mirror
// catches up, so nothing is lost and the failback copies only B's delta.
func TestDemoDrillScriptPlanned(t *testing.T) {
	run := runScript(t, drill.ScenarioPlanned)
	rep := run.rep
	if lost := independentLost(t, run.env); rep.RPO.Records != 0 || len(lost) != 0 || len(rep.RPO.Lost) != 0 {
		t.Fatalf("planned failover: RPO %d records, test measured %d lost", rep.RPO.Records, len(lost))
	}
	if len(rep.Failback) == 0 || rep.Quarantine != nil {
		t.Fatalf("failback %d partitions, quarantine %+v", len(rep.Failback), rep.Quarantine)
	}
	for _, fp := range rep.Failback {
		if fp.Expect != "delta" || fp.State != "MIRRORING" || fp.Beyond != 0 {
			t.Errorf("%s/%d: %s, %s, %d offsets beyond the LME: want a delta-only failback", fp.Topic, fp.Partition, fp.Expect, fp.State, fp.Beyond)
		}
	}
	if !strings.Contains(run.out, "no partition diverged: the failback copies only B's delta") || !strings.Contains(run.out, "(lag 0)") {
		t.Errorf("the step log does not say lag 0 and delta only")
	}
}

// TestDemoDrillScriptUnclean: an unclean election on A before the outage;
// the drill names the records it lost, and they are the ledger's.
func TestDemoDrillScriptUnclean(t *testing.T) {
	run := runScript(t, drill.ScenarioUnclean)
	el := run.rep.Election
	if el == nil || el.Records == 0 || int64(len(el.IDs)) != el.Records || el.OnB+el.Nowhere != el.Records {
		t.Fatalf("election %+v: want its lost records named", el)
	}
	if !strings.Contains(el.MirrorError, "unclean leader election") {
		t.Errorf("the mirror reported %q, want the unclean election", el.MirrorError)
	}
	acked := map[string]sandbox.Ack{}
	for _, a := range run.env.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA }) {
		acked[a.ID] = a
	}
	for _, id := range el.IDs {
		a, ok := acked[id]
		if !ok || a.Topic != el.Topic || a.Partition != el.Partition || a.Offset < el.EndOffset {
			t.Errorf("named lost record %s: acknowledged %v at %s/%d offset %d, want A's %s/%d from offset %d", id, ok, a.Topic, a.Partition, a.Offset, el.Topic, el.Partition, el.EndOffset)
		}
	}
	if !strings.Contains(run.out, "the election's lost records: "+el.IDs[0]) {
		t.Errorf("the step log does not name the election's lost records")
	}
	if lost := independentLost(t, run.env); run.rep.RPO.Records != int64(len(lost)) || run.rep.Quarantine == nil || run.rep.Quarantine.Acknowledged != int64(len(lost)) {
		t.Errorf("RPO %d, quarantine %+v; test measured %d lost", run.rep.RPO.Records, run.rep.Quarantine, len(lost))
	}
}

// quarantinedIDs reads the quarantine topics on A and counts each record id.
func quarantinedIDs(t *testing.T, env *demoEnv, q *drill.Quarantine) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.sb.Bootstrap(sandbox.SideA)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]int{}
	for _, qt := range q.Topics {
		for _, qp := range qt.Partitions {
			recs, err := enginetest.Consume(t.Context(), cl, qt.Name, qp.Partition)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				out[sandbox.IDOf([]byte(r.Value))]++
			}
		}
	}
	return out
}

// independentLost returns the ids of A's acknowledged writes that B lacks.
func independentLost(t *testing.T, env *demoEnv) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm, err := engine.NewAdmin(ctx, env.sb.Bootstrap(sandbox.SideB), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	rows, err := adm.Describe(ctx, demoMirror)
	if err != nil {
		t.Fatal(err)
	}
	lme := map[string]int64{}
	for _, r := range rows {
		lme[fmt.Sprintf("%s/%d", r.Topic, r.Partition)] = r.LastMirrorOffset
	}
	// Read every partition of B from its start to its log end; control
	// records are kept only to see that a tail of markers has been passed.
	bcl, err := kgo.NewClient(kgo.SeedBrokers(env.sb.Bootstrap(sandbox.SideB)...))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(bcl).ListEndOffsets(ctx, sandbox.TopicNames()...)
	bcl.Close()
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left++
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.sb.Bootstrap(sandbox.SideB)...),
		kgo.ConsumeTopics(sandbox.TopicNames()...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	onB := map[string]bool{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("B not read to its end within a minute (%d partitions left)", left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				onB[sandbox.IDOf(r.Value)] = true
			}
			if end, _ := ends.Lookup(r.Topic, r.Partition); r.Offset+1 == end.Offset {
				left--
			}
		})
	}
	compacted := map[string]bool{}
	for _, tp := range sandbox.Topics {
		compacted[tp.Name] = tp.Compacted
	}
	var lost []string
	for _, a := range env.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return a.Side == sandbox.SideA }) {
		if compacted[a.Topic] {
			if a.Offset > lme[fmt.Sprintf("%s/%d", a.Topic, a.Partition)] {
				lost = append(lost, a.ID)
			}
			continue
		}
		if !onB[a.ID] {
			lost = append(lost, a.ID)
		}
	}
	return lost
}

// difference returns the ids in a that b lacks.
func difference(a, b []string) []string {
	var out []string
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// TestDemoRefusesABadScenario: an unknown scenario or a negative link is a
// one-line usage error, before anything starts.
func TestDemoRefusesABadScenario(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--drill-script", "--scenario", "meteor"}, `kmirror demo: --scenario: unknown scenario "meteor": want planned, region-loss, unclean`},
		{[]string{"demo", "--link-rtt", "-1s"}, "kmirror demo: --link-rtt and --link-bandwidth cannot be negative"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != exitUsage || strings.TrimSpace(errb.String()) != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), exitUsage, tc.want)
		}
	}
}
