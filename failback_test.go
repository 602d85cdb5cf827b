package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/enginetest/states"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// kmirrorCLI runs one action in process and returns its output.
func kmirrorCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != want {
		t.Fatalf("kmirror %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

// joined starts an in-process instance on a destination cluster.
func joined(t *testing.T, c *enginetest.Cluster, name string) *engine.Engine {
	t.Helper()
	eng, err := engine.New(context.Background(), engine.Config{Destination: c.Addrs(), Instance: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	return eng
}

func addrs(c *enginetest.Cluster) string { return strings.Join(c.Addrs(), ",") }

// waitStates waits until the n partitions of mirror on eng are in want.
func waitStates(t *testing.T, eng *engine.Engine, mirror string, want partition.State, n int) []engine.PartitionSnapshot {
	t.Helper()
	return states.Wait(t, 60*time.Second, eng, states.Select{Mirror: mirror, N: n}, want)
}

// TestPlannedFailoverAndFailback: producers stop on A, the mirror catches up
// and stops, B takes writes, and the reverse mirror b-to-a copies only
// those writes back to A. A mirror back while the forward one still runs is
// refused as a loop.
func TestPlannedFailoverAndFailback(t *testing.T) {
	a, b := enginetest.Pair(t)
	a.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, a.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 200, "before")
	work := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(writeFile(filepath.Join(work, "a.properties"), "bootstrap.servers="+addrs(a)))
	must(writeFile(filepath.Join(work, "b.properties"), "bootstrap.servers="+addrs(b)))
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--create", "--mirror", "a-to-b", "--mirror-config", filepath.Join(work, "a.properties"))
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--start", "--mirror", "a-to-b", "--topics", "orders")
	onB := joined(t, b, "instance-b")
	waitStates(t, onB, "a-to-b", partition.Mirroring, 2)
	enginetest.Wait(t, 60*time.Second, caughtUp(t, a, b, "orders"))

	// The loop check: mirroring orders back while a-to-b runs is refused.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--create", "--mirror", "b-to-a", "--mirror-config", filepath.Join(work, "b.properties"))
	out := kmirrorCLI(t, 1, "--bootstrap-server", addrs(a), "--start", "--mirror", "b-to-a", "--topics", "orders")
	if !strings.Contains(out, "mirror loop") || !strings.Contains(out, "a-to-b") {
		t.Fatalf("start of b-to-a while a-to-b mirrors: %q, want a mirror loop refusal", out)
	}

	// Failover: stop, then B is writable.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--stop", "--mirror", "a-to-b", "--all", "--yes")
	stopped := waitStates(t, onB, "a-to-b", partition.Stopped, 2)
	for _, p := range stopped {
		if p.LastOffset != 199 {
			t.Fatalf("%s/%d stopped with LME %d, want 199", p.Topic, p.Partition, p.LastOffset)
		}
	}
	enginetest.Produce(t, b.Client(t, enginetest.ProducerOpts("lz4", true)...), "orders", 2, 30, "on-b")

	// Failback: only the delta travels.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--start", "--mirror", "b-to-a", "--topics", "orders")
	onA := joined(t, a, "instance-a")
	enginetest.Wait(t, 60*time.Second, caughtUp(t, b, a, "orders"))
	// A's log ends can show the delta before the runners have taken the
	// acknowledgements into their counts.
	var back []engine.PartitionSnapshot
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		back = waitStates(t, onA, "b-to-a", partition.Mirroring, 2)
		for _, p := range back {
			if p.BatchesCopied == 0 {
				return false, fmt.Sprintf("%s/%d has counted no batch yet", p.Topic, p.Partition)
			}
		}
		return true, ""
	})
	for p := range int32(2) {
		if _, err := enginetest.CompareBatches(context.Background(), b.Client(t), a.Client(t), "orders", p); err != nil {
			t.Fatalf("after failback: %v", err)
		}
	}
	for _, p := range back {
		if p.BatchesCopied == 0 || p.BatchesCopied > 3 || p.FillerBatches != 0 {
			t.Fatalf("%s/%d: failback copied %d batches (%d bytes, %d fillers); only the 30-record delta should travel", p.Topic, p.Partition, p.BatchesCopied, p.BytesCopied, p.FillerBatches)
		}
	}
}

// TestUnplannedFailoverDivergence: A holds records the mirror never copied
// when it goes down; the stop completes with A unreachable; when A returns,
// the reverse mirror reports those partitions as diverged, naming how many
// records never reached B.
func TestUnplannedFailoverDivergence(t *testing.T) {
	dir := t.TempDir()
	a := enginetest.NewCluster(t, "kmirror-test-source", kfake.DataDir(dir))
	b := enginetest.NewCluster(t, "kmirror-test-destination")
	a.CreateTopic(t, "orders", 2, nil)
	prod := a.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, prod, "orders", 2, 100, "mirrored")
	work := t.TempDir()
	onB := forwardMirror(t, a, b, work, "orders", "\nmirror.failed.retry.initial.backoff.ms=50")

	// The mirror falls behind (paused), A takes 7 more records on partition
	// 1, then A goes down.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--pause", "--mirror", "a-to-b", "--all")
	waitStates(t, onB, "a-to-b", partition.Paused, 2)
	var recs []*kgo.Record
	for i := range 7 {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ports := loseSource(a)

	start := time.Now()
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--stop", "--mirror", "a-to-b", "--all", "--yes")
	waitStates(t, onB, "a-to-b", partition.Stopped, 2)
	t.Logf("stop with the source down took %s", time.Since(start).Round(time.Millisecond))
	enginetest.Produce(t, b.Client(t, enginetest.ProducerOpts("lz4", true)...), "orders", 2, 10, "on-b")

	a, onA := failBack(t, b, dir, ports, work, "orders")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		var st []string
		for _, m := range onA.Snapshot().Mirrors {
			for _, p := range m.Partitions {
				st = append(st, fmt.Sprintf("%d:%s:%s", p.Partition, p.State, p.Error))
				if p.Partition == 1 && p.State == partition.Failed && strings.Contains(p.Error, "holds 7 records after offset 99") {
					return true, ""
				}
			}
		}
		return false, fmt.Sprint(st)
	})
	// Partition 0 lost nothing: it fails back with the delta.
	aCl, bCl := a.Client(t), b.Client(t)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		be, _ := enginetest.Ends(context.Background(), bCl, "orders")
		ae, _ := enginetest.Ends(context.Background(), aCl, "orders")
		return len(be) == 2 && len(ae) == 2 && be[0] == ae[0], fmt.Sprintf("B %v A %v", be, ae)
	})
	out := kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--describe", "--failed")
	if !regexp.MustCompile(`b-to-a\s+orders\s+1\s+NonRetryable\s+destination diverged`).MatchString(out) {
		t.Fatalf("describe --failed on A:\n%s", out)
	}
	// The text cuts the error to 80 characters; JSON has it whole.
	out = kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--describe", "--failed", "--json")
	if !strings.Contains(out, `"state": "FAILED"`) || !strings.Contains(out, "records never mirrored before the failover") {
		t.Fatalf("describe --failed --json on A:\n%s", out)
	}

	// The operator allows the rebuild: A's 7 unmirrored records go to a
	// quarantine topic, orders is recreated on A and mirrored from B.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--recover", "--rebuild", "--mirror", "b-to-a", "--topics", "orders")
	quarantine := quarantineOf(t, a, "orders")
	enginetest.Wait(t, 60*time.Second, caughtUp(t, b, a, "orders"))
	for p := range int32(2) {
		if _, err := enginetest.CompareBatches(context.Background(), b.Client(t), a.Client(t), "orders", p); err != nil {
			t.Fatalf("after rebuild: %v", err)
		}
	}
	q1, err := enginetest.Consume(context.Background(), a.Client(t), quarantine, 1)
	if err != nil {
		t.Fatal(err)
	}
	q0, err := enginetest.Consume(context.Background(), a.Client(t), quarantine, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(q0) != 0 || len(q1) != 7 {
		t.Fatalf("quarantine holds %d records on partition 0 and %d on 1, want 0 and 7", len(q0), len(q1))
	}
	for i, r := range q1 {
		if r.Value != strconv.Itoa(i) {
			t.Fatalf("quarantined record %d is %q, want %q", i, r.Value, strconv.Itoa(i))
		}
	}
	waitStates(t, onA, "b-to-a", partition.Mirroring, 2)
}

func caughtUp(t *testing.T, from, to *enginetest.Cluster, topic string) func() (bool, string) {
	// One client per side for all the polls: a client per poll stays open
	// until the test ends, and a long wait polls thousands of times.
	fromCl, toCl := from.Client(t), to.Client(t)
	return func() (bool, string) {
		se, err1 := enginetest.Ends(context.Background(), fromCl, topic)
		de, err2 := enginetest.Ends(context.Background(), toCl, topic)
		return err1 == nil && err2 == nil && fmt.Sprint(se) == fmt.Sprint(de), fmt.Sprintf("%v vs %v (%v %v)", se, de, err1, err2)
	}
}

// TestFailbackQuarantinesTransactionsTheStopAborted: a transaction on A
// is mirrored to B but its commit marker is not when A goes down, so the
// stop aborts it on B. Its records lie at or below the LME on both sides,
// yet A committed them and B did not: the stop records where the
// transaction began, and the failback's rebuild quarantines from there,
// not only what A holds past the LME (the marker).
func TestFailbackQuarantinesTransactionsTheStopAborted(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a := enginetest.NewCluster(t, "kmirror-test-source", kfake.DataDir(dir))
	b := enginetest.NewCluster(t, "kmirror-test-destination")
	a.CreateTopic(t, "payments", 1, nil)
	enginetest.Produce(t, a.Client(t, enginetest.ProducerOpts("zstd", true)...), "payments", 1, 20, "before")
	work := t.TempDir()
	onB := forwardMirror(t, a, b, work, "payments", "")

	txp := a.Client(t, append(enginetest.ProducerOpts("none", true), kgo.TransactionalID("billing"))...)
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "payments", Partition: 0, Value: fmt.Appendf(nil, "txn-%d", i)})
	}
	if err := txp.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		for _, p := range onB.Snapshot().Mirrors[0].Partitions {
			return p.OpenTxns == 1 && p.DestLogEnd == 25, fmt.Sprintf("%d open transactions, B ends at %d", p.OpenTxns, p.DestLogEnd)
		}
		return false, "no partition"
	})
	// The mirror falls behind before the commit marker, A commits, and
	// goes down.
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--pause", "--mirror", "a-to-b", "--all")
	waitStates(t, onB, "a-to-b", partition.Paused, 1)
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	ports := loseSource(a)
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--stop", "--mirror", "a-to-b", "--all", "--yes")
	waitStates(t, onB, "a-to-b", partition.Stopped, 1)
	adm, err := engine.NewAdmin(ctx, b.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := adm.Catalog(ctx)
	adm.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rec := cat.Partitions[store.PartitionRef{Mirror: "a-to-b", Topic: "payments", Partition: 0}]; rec.LastOffset != 24 || !slices.Equal(rec.StopAborted, []int64{20}) {
		t.Fatalf("STOPPED record: LME %d, aborted at stop %v; want 24 and [20]", rec.LastOffset, rec.StopAborted)
	}

	a, onA := failBack(t, b, dir, ports, work, "payments")
	p := waitStates(t, onA, "b-to-a", partition.Failed, 1)[0]
	if !strings.Contains(p.Error, "holds 1 records after offset 24") {
		t.Fatalf("b-to-a payments/0 FAILED with %q, want A's commit marker past the LME named", p.Error)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--recover", "--rebuild", "--mirror", "b-to-a", "--topics", "payments")
	quarantine := quarantineOf(t, a, "payments")
	// MIRRORING again only once the rebuild has recreated the topic.
	waitStates(t, onA, "b-to-a", partition.Mirroring, 1)
	enginetest.Wait(t, 60*time.Second, caughtUp(t, b, a, "payments"))
	q, err := enginetest.Consume(ctx, a.Client(t), quarantine, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range q {
		got = append(got, r.Value)
	}
	if want := []string{"txn-0", "txn-1", "txn-2", "txn-3", "txn-4"}; !slices.Equal(got, want) {
		t.Fatalf("quarantine holds %v, want the committed transaction B aborted, %v", got, want)
	}
	// A is B again: the transaction is aborted there now, and its
	// committed copy is in the quarantine.
	onAcommitted, err := enginetest.ConsumeCommitted(ctx, a.Client(t), "payments", 0)
	if err != nil || len(onAcommitted) != 20 {
		t.Fatalf("A's payments/0 read_committed: %d records (%v), want the 20 before the transaction", len(onAcommitted), err)
	}
}

// forwardMirror records a-to-b on b (source a, settings extra) for topic,
// joins an instance on b and waits until it has caught up.
func forwardMirror(t *testing.T, a, b *enginetest.Cluster, work, topic, extra string) *engine.Engine {
	t.Helper()
	if err := writeFile(filepath.Join(work, "a.properties"), "bootstrap.servers="+addrs(a)+extra); err != nil {
		t.Fatal(err)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--create", "--mirror", "a-to-b", "--mirror-config", filepath.Join(work, "a.properties"))
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(b), "--start", "--mirror", "a-to-b", "--topics", topic)
	onB := joined(t, b, "instance-b")
	enginetest.Wait(t, 60*time.Second, caughtUp(t, a, b, topic))
	return onB
}

// loseSource closes a (the outage) and returns the ports it listened on.
func loseSource(a *enginetest.Cluster) []int {
	var ports []int
	for _, s := range a.Addrs() {
		_, p, _ := strings.Cut(s, ":")
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	a.Close()
	return ports
}

// failBack brings the source back from dir on ports, records b-to-a on it
// (source b) for topic and joins an instance there.
func failBack(t *testing.T, b *enginetest.Cluster, dir string, ports []int, work, topic string) (*enginetest.Cluster, *engine.Engine) {
	t.Helper()
	back, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("kmirror-test-source"), kfake.Ports(ports...), kfake.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Close)
	a := &enginetest.Cluster{Cluster: back, ID: "kmirror-test-source"}
	if err := writeFile(filepath.Join(work, "b.properties"), "bootstrap.servers="+addrs(b)); err != nil {
		t.Fatal(err)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--create", "--mirror", "b-to-a", "--mirror-config", filepath.Join(work, "b.properties"))
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(a), "--start", "--mirror", "b-to-a", "--topics", topic)
	return a, joined(t, a, "instance-a")
}

// quarantineOf waits for the quarantine topic of topic on c and names it.
func quarantineOf(t *testing.T, c *enginetest.Cluster, topic string) string {
	t.Helper()
	var quarantine string
	adm := kadm.NewClient(c.Client(t)) // one client for every poll
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		topics, err := adm.ListTopics(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, topic+".kmirror-quarantine-") {
				quarantine = name
			}
		}
		return quarantine != "", fmt.Sprintf("no quarantine topic among %v", topics.Names())
	})
	return quarantine
}
