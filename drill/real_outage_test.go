package drill_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/drill"
	"github.com/kmirror/kmirror/drill/drilltest"
	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/enginetest/states"
	"github.com/kmirror/kmirror/engine/partition"
)

// stepWait bounds every drill step and every wait of these tests: with the
// source gone each read of it runs into its own timeout, and the machine
// running the tests may be busy.
const stepWait = 120 * time.Second

// sourceLoss is how the source goes away at the outage: the two ways the
// drill's instruction names.
type sourceLoss string

const (
	// brokersStopped closes the source cluster, listeners and all: nothing
	// answers on its ports. It comes back from its data directory.
	brokersStopped sourceLoss = "brokers stopped"
	// accessBlocked leaves the source running but closes every connection
	// to it as soon as it opens, as a firewall that resets them does.
	accessBlocked sourceLoss = "access blocked"
)

// outage is a real-clusters drill run to the point where the operator has
// moved the clients to B, with the source gone since the outage.
type outage struct {
	t        *testing.T
	src, dst *enginetest.Cluster
	how      sourceLoss
	srcDir   string
	srcPorts []int
	net      *enginetest.Network
	eng      *engine.Engine
	d        *drill.Drill
	path     string
}

// runToSwitch sets up a-to-b for orders (3 partitions) and payments (2),
// with the group billing synced to B, and runs the drill through the
// client switch. Before the outage payments is paused and A takes 10 more
// records per payments partition, which B never gets; with openTxn a
// transaction of 5 records on orders/2 is open on A and mirrored to B.
// Then A goes away as how says and stays away. The failover and the
// switch run without it.
func runToSwitch(t *testing.T, how sourceLoss, openTxn bool) *outage {
	ctx := t.Context()
	o := &outage{t: t, how: how, srcDir: t.TempDir(), net: enginetest.NewNetwork()}
	o.src = enginetest.NewCluster(t, "kmirror-test-source", kfake.DataDir(o.srcDir), kfake.ListenFn(o.net.Listen))
	o.dst = enginetest.NewCluster(t, "kmirror-test-destination")
	for _, a := range o.src.Addrs() {
		_, port, _ := net.SplitHostPort(a)
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		o.srcPorts = append(o.srcPorts, p)
	}
	rd := drilltest.NewReal(t, o.src, o.dst, "drill-outage", stepWait)
	o.eng, o.d, o.path = rd.Engine, rd.Drill, rd.ReportPath
	prodA := rd.Producer

	o.next(drill.StepPreflight, "answers for all 5 partitions")
	o.next(drill.StepSnapshot, "saved ")
	if err := o.d.Next(ctx, ""); !errors.Is(err, drill.ErrNeedsConfirm) {
		t.Fatalf("Next on the outage before it is confirmed: %v", err)
	}

	// The mirror is behind on payments when disaster strikes, then A is
	// gone.
	if err := o.eng.Control(ctx, engine.Command{Kind: engine.CmdPause, Mirror: "a-to-b", Topics: []string{"payments"}}); err != nil {
		t.Fatal(err)
	}
	states.Wait(t, stepWait, o.eng, states.Select{Topic: "payments"}, partition.Paused)
	enginetest.Produce(t, prodA, "payments", 2, 10, "unmirrored")
	if openTxn {
		txp := o.src.Client(t, append(enginetest.ProducerOpts("none", true), kgo.TransactionalID("billing-writer"))...)
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 5 {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: 2, Value: fmt.Appendf(nil, "open-%d", i)})
		}
		if err := txp.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		enginetest.Wait(t, stepWait, func() (bool, string) {
			for _, p := range o.eng.Snapshot().Mirrors[0].Partitions {
				if p.Topic == "orders" && p.Partition == 2 {
					return p.OpenTxns == 1 && p.DestLogEnd == 55, fmt.Sprintf("orders/2: %d open transactions, B ends at %d", p.OpenTxns, p.DestLogEnd)
				}
			}
			return false, "no orders/2"
		})
	}
	switch how {
	case brokersStopped:
		o.src.Close()
	case accessBlocked:
		o.net.Down("")
	}
	o.confirm(drill.StepOutage, "A does not answer: an unplanned failover")

	lines := o.next(drill.StepFailover, "all 5 partitions STOPPED", "RPO unknown, source unreachable")
	for _, k := range []string{"orders/0", "orders/1", "orders/2", "payments/0", "payments/1"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, k+" STOPPED, LME ") }) {
			t.Errorf("failover lines have no STOPPED line for %s:\n%s", k, strings.Join(lines, "\n"))
		}
	}
	states.Wait(t, stepWait, o.eng, states.Select{}, partition.Stopped)

	// The clients move to B: a producer writes orders there and the group
	// commits beyond the synced offset.
	prodB := o.dst.Client(t, enginetest.ProducerOpts("none", true)...)
	enginetest.Produce(t, prodB, "orders", 1, 5, "on-b")
	moved := kadm.Offsets{}
	moved.AddOffset("orders", 0, 45, -1)
	if _, err := o.dst.Admin(t).CommitOffsets(ctx, "billing", moved); err != nil {
		t.Fatal(err)
	}
	o.confirm(drill.StepSwitch, "first write on B after the failover", "first group commit seen on B")
	return o
}

// next runs the current step, which must be id, and checks it passed with
// lines containing each of want; it returns the step's lines.
func (o *outage) next(id drill.StepID, want ...string) []string {
	o.t.Helper()
	return o.run(id, false, want...)
}

// confirm ticks the current step's instruction and runs it.
func (o *outage) confirm(id drill.StepID, want ...string) []string {
	o.t.Helper()
	return o.run(id, true, want...)
}

func (o *outage) run(id drill.StepID, confirm bool, want ...string) []string {
	o.t.Helper()
	if cur := o.d.Status().Current; cur >= len(drill.Steps) || drill.Steps[cur] != id {
		o.t.Fatalf("current step %d, want %s", cur, id)
	}
	run := o.d.Next
	if confirm {
		run = o.d.Confirm
	}
	err := run(o.t.Context(), "")
	rec := o.d.Status().Steps[id]
	text := strings.Join(rec.Lines, "\n")
	if err != nil || rec.State != drill.Passed {
		o.t.Fatalf("step %s: %v (%s)\n%s", id, err, rec.Result, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			o.t.Errorf("step %s: no line contains %q:\n%s", id, w, text)
		}
	}
	o.t.Logf("step %s passed in %s", id, rec.Ended.Sub(rec.Started).Round(time.Millisecond))
	return rec.Lines
}

// restoreSource brings A back: restarted on its ports with the data it
// had, or reachable again.
func (o *outage) restoreSource() {
	o.t.Helper()
	if o.how == accessBlocked {
		o.net.Up()
		return
	}
	back, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID(o.src.ID), kfake.Ports(o.srcPorts...), kfake.DataDir(o.srcDir))
	if err != nil {
		o.t.Fatalf("restart the source on ports %v: %v", o.srcPorts, err)
	}
	o.t.Cleanup(back.Close)
	o.src = &enginetest.Cluster{Cluster: back, ID: o.src.ID}
}

// report reads the JSON report and checks every step is in it, passed.
func (o *outage) report() drill.Report {
	o.t.Helper()
	b, err := os.ReadFile(o.path + ".json")
	if err != nil {
		o.t.Fatal(err)
	}
	var rep drill.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		o.t.Fatalf("report JSON: %v\n%s", err, b)
	}
	var steps, want []string
	for _, s := range rep.Timeline {
		steps = append(steps, s.Step)
		if s.Result != "passed" {
			o.t.Errorf("step %s: %s %s", s.Step, s.Result, s.Error)
		}
	}
	for _, id := range drill.Steps {
		want = append(want, id.String())
	}
	if !slices.Equal(steps, want) || !rep.Complete || rep.Target != "real" || rep.Version != drill.ReportVersion {
		o.t.Fatalf("timeline %v (complete %v, target %q, version %d), want %v", steps, rep.Complete, rep.Target, rep.Version, want)
	}
	if !rep.BWritable || rep.RTO.Seconds <= 0 || rep.RTO.FirstProduceAt.IsZero() || rep.RTO.FirstConsumeAt.IsZero() {
		o.t.Errorf("B writable %v, RTO %+v", rep.BWritable, rep.RTO)
	}
	return rep
}

// TestRealDrillSourceGone runs the real-clusters drill through an outage
// in which the source cluster goes away (stopped, or cut off from kmirror)
// and never comes back: the failover
// stops every partition without it and aborts on B the transaction left
// open, the RPO is reported unknown rather than guessed, and the failback
// rehearsal says A is unreachable instead of planning against offsets it
// cannot read.
func TestRealDrillSourceGone(t *testing.T) {
	for _, how := range []sourceLoss{brokersStopped, accessBlocked} {
		t.Run(string(how), func(t *testing.T) { testSourceGone(t, how) })
	}
}

func testSourceGone(t *testing.T, how sourceLoss) {
	o := runToSwitch(t, how, true)
	if l := o.d.Status().Steps[drill.StepFailover].Lines; !slices.Contains(l, "the stop aborted the mirrored transactions open on B: orders/2 (1 open)") {
		t.Errorf("failover lines do not name the aborted transaction:\n%s", strings.Join(l, "\n"))
	}
	// B's orders/2 ends with the open transaction's 5 records, the
	// abort marker the stop wrote for it, and the stop's fence marker (an
	// empty transaction of the writer identity, aborted): a read_committed
	// consumer sees the 50 records before them.
	bs, err := enginetest.ReadBatches(t.Context(), o.dst.Client(t), "orders", 2)
	if err != nil || len(bs) < 3 {
		t.Fatalf("orders/2 on B: %d batches (%v)", len(bs), err)
	}
	var marker, fence kmsg.Record
	last, txn, fenceB := bs[len(bs)-2], bs[len(bs)-3], bs[len(bs)-1]
	if err := marker.ReadFrom(last.Payload); err != nil || !last.Header.IsControl() || len(marker.Key) < 4 || marker.Key[3] != 0 ||
		last.Header.BaseOffset != 55 || !txn.Header.IsTransactional() || txn.Header.RecordCount != 5 {
		t.Errorf("orders/2 on B ends with %+v then %+v (key %x, %v), want 5 transactional records at 50 and an abort marker at 55", txn.Header, last.Header, marker.Key, err)
	}
	if err := fence.ReadFrom(fenceB.Payload); err != nil || !fenceB.Header.IsControl() || len(fence.Key) < 4 || fence.Key[3] != 0 ||
		fenceB.Header.BaseOffset != 56 || fenceB.Header.ProducerID == txn.Header.ProducerID {
		t.Errorf("orders/2 on B: %+v (key %x, %v) after the abort marker, want the stop's fence marker at 56, of the writer identity", fenceB.Header, fence.Key, err)
	}
	committed, err := enginetest.ConsumeCommitted(t.Context(), o.dst.Client(t), "orders", 2)
	if err != nil || len(committed) != 50 {
		t.Errorf("read_committed orders/2 on B: %d records (%v), want the 50 before the transaction", len(committed), err)
	}
	o.next(drill.StepVerify, "5 of 5 partitions STOPPED", "orders +5", "RPO unknown, source unreachable", "group billing: 3 partitions")
	lines := o.next(drill.StepFailback, "A does not answer: no failback plan", "--create --mirror b-to-a")
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "DIVERGED") || strings.Contains(l, "delta") }) {
		t.Errorf("a failback plan without the source:\n%s", strings.Join(lines, "\n"))
	}
	o.next(drill.StepReport, "RPO unknown (source unreachable)")

	rep := o.report()
	if rep.RPO.Known || rep.RPO.Method != drill.RPOOffsets || rep.RPO.Unknown != "source unreachable" || rep.RPO.Records != 0 {
		t.Errorf("RPO %+v, want unknown, source unreachable", rep.RPO)
	}
	if len(rep.RPO.Partitions) != 5 {
		t.Errorf("RPO partitions %+v, want all 5 with an unknown source end", rep.RPO.Partitions)
	}
	for _, p := range rep.RPO.Partitions {
		if p.SourceEnd != -1 || p.Unmirrored != 0 || p.LME < 0 {
			t.Errorf("RPO partition %+v, want source end -1 and the LME", p)
		}
	}
	if len(rep.Failback) != 0 {
		t.Errorf("failback plan %+v without the source", rep.Failback)
	}
	for _, want := range []string{"source was unreachable", "transactions open at the failover, aborted on B: orders/2 (1 open)."} {
		if !slices.ContainsFunc(rep.Anomalies, func(a string) bool { return strings.Contains(a, want) }) {
			t.Errorf("anomalies %q, want %q", rep.Anomalies, want)
		}
	}
	md, err := os.ReadFile(o.path + ".md")
	if err != nil || !strings.Contains(string(md), "| RPO (records) | unknown: source unreachable |") || !strings.Contains(string(md), "| RPO (time) | at least ") {
		t.Errorf("Markdown report (%v):\n%s", err, md)
	}
}

// TestRealDrillSourceBackBeforeVerify runs the same outage, then brings A
// back with its data after the clients moved (restarted on its ports, or
// reachable again): verify reads
// the loss the failover could not (A's 10 unmirrored offsets per payments
// partition) and the failback plan is made against A's real log ends.
func TestRealDrillSourceBackBeforeVerify(t *testing.T) {
	for _, how := range []sourceLoss{brokersStopped, accessBlocked} {
		t.Run(string(how), func(t *testing.T) { testSourceBack(t, how) })
	}
}

func testSourceBack(t *testing.T, how sourceLoss) {
	o := runToSwitch(t, how, false)
	o.restoreSource()
	// The verify step reads the source's ends through --describe, as an
	// operator would: wait until that view answers for every partition
	// (the instance notices A again within its reachability checks), not
	// only until a client of the test's own can reach A.
	adm, err := engine.NewAdmin(t.Context(), o.dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// A's brokers come back one by one: wait until it has answered every
	// poll for two seconds, so the steps that read it see it answer.
	answering := func() {
		t.Helper()
		var since time.Time
		enginetest.Wait(t, stepWait, func() (bool, string) {
			rows, err := adm.Describe(t.Context(), "a-to-b")
			answered := 0
			for _, r := range rows {
				if r.SourceOffset >= 0 {
					answered++
				}
			}
			if err != nil || len(rows) != 5 || answered != len(rows) {
				since = time.Time{}
				return false, fmt.Sprintf("A after its restart: %d of %d partitions answered (%v)", answered, len(rows), err)
			}
			if since.IsZero() {
				since = time.Now()
			}
			return time.Since(since) >= 2*time.Second, "A answering for " + time.Since(since).String()
		})
	}
	answering()
	o.next(drill.StepVerify, "A answers again: RPO 20 offsets", "payments 20")
	answering()
	// The delta counts offsets: the 5 records written on B and the
	// stop's fence marker before them.
	o.next(drill.StepFailback, "DIVERGED, A holds 10 offsets beyond the LME", "delta 6 offsets")
	o.next(drill.StepReport)

	rep := o.report()
	if !rep.RPO.Known || rep.RPO.Records != 20 || rep.RPO.ByTopic["payments"] != 20 || rep.RPO.ByTopic["orders"] != 0 {
		t.Errorf("RPO %+v, want 20 offsets, all payments", rep.RPO)
	}
	plan := map[string]drill.FailbackPartition{}
	for _, fp := range rep.Failback {
		plan[fmt.Sprintf("%s/%d", fp.Topic, fp.Partition)] = fp
	}
	for _, k := range []string{"payments/0", "payments/1"} {
		if fp := plan[k]; fp.Expect != "diverged" || fp.Beyond != 10 {
			t.Errorf("%s plan %+v, want diverged by 10", k, fp)
		}
	}
	if fp := plan["orders/0"]; fp.Expect != "delta" || fp.Delta != 6 {
		t.Errorf("orders/0 plan %+v, want a delta of 6 (the stop's fence marker and 5 records)", fp)
	}
	if !slices.ContainsFunc(rep.Anomalies, func(a string) bool { return strings.Contains(a, "lost in the failover: 20 offsets") }) {
		t.Errorf("anomalies %q, want the loss", rep.Anomalies)
	}
}
