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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/drill"
	"github.com/kmirror/kmirror/engine/sandbox"
)

// TestDemoDrillScript runs the unattended drill in-process, as
// `kmirror demo --drill-script` does, and checks the report against what
// the test measures itself: the lost records from the producers' acks and
// a full read of B, the duplicates and gaps from the demo consumer.
func TestDemoDrillScript(t *testing.T) {
	ctx := t.Context()
	env, err := startDemo(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	t.Logf("demo started in %s", env.started)
	path := filepath.Join(t.TempDir(), "drill")
	var out bytes.Buffer
	code := runDrillScript(ctx, func() (*drill.Drill, error) {
		return drill.New(drill.Config{Target: drill.SandboxTarget(env.sb), Engine: env.eng, Mirror: demoMirror, ReportPath: path})
	}, &out, &out)
	t.Logf("drill output:\n%s", out.String())
	if code != exitOK {
		t.Fatalf("drill exited %d", code)
	}
	for i, id := range drill.Steps {
		if head := fmt.Sprintf("== %d/%d %s", i+1, len(drill.Steps), id.Title()); !strings.Contains(out.String(), head) {
			t.Errorf("step log lacks %q", head)
		}
	}

	b, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var rep drill.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if md, err := os.ReadFile(path + ".md"); err != nil || !strings.Contains(string(md), "RPO (records)") {
		t.Fatalf("Markdown report missing or without RPO: %v", err)
	}
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
	if !slices.Equal(steps, want) || !rep.Complete {
		t.Fatalf("timeline %v (complete %v), want %v", steps, rep.Complete, want)
	}

	// RPO: every write A acknowledged that B does not hold, found here by a
	// full read_committed read of B (compacted inventory by offset against
	// the stop's LME, since compaction may remove superseded records).
	if !rep.RPO.Known || rep.RPO.Method != drill.RPOAcks || rep.Target != "sandbox" || rep.Group == nil {
		t.Fatalf("sandbox report: RPO %s known %v, target %q, group %v", rep.RPO.Method, rep.RPO.Known, rep.Target, rep.Group)
	}
	lost := independentLost(t, env)
	if rep.RPO.Records != int64(len(lost)) {
		t.Errorf("report RPO %d records, measured %d lost", rep.RPO.Records, len(lost))
	}
	slices.Sort(lost)
	got := slices.Sorted(slices.Values(rep.RPO.LostIDs))
	if only := difference(got, lost); len(only) > 0 {
		t.Errorf("lost only in the report: %v", only)
		for _, a := range env.sb.Ledger().Acks(func(a *sandbox.Ack) bool { return slices.Contains(only, a.ID) }) {
			t.Logf("DEBUG %+v", a)
		}
		t0, _ := os.ReadFile(path + "-t0.json")
		t.Logf("DEBUG t0 %.400s", t0)
	}
	if only := difference(lost, got); len(only) > 0 {
		t.Errorf("lost only by the test's read: %v", only)
	}
	acked, _ := env.sb.Ledger().Count(sandbox.SideA)
	if rep.RPO.AckedByA != acked {
		t.Errorf("report says A acknowledged %d, the ledger %d", rep.RPO.AckedByA, acked)
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
	if len(rep.Failback) == 0 {
		t.Errorf("no failback partitions reported")
	}
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
