package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// chaosRunsEnv raises the number of SIGKILLs of TestChaosKillRestart.
const chaosRunsEnv = "KMIRROR_CHAOS_RUNS"

// runProc is one `kmirror run` subprocess; its stdout and stderr go to
// files so tests can read its log and the metrics address it prints.
type runProc struct {
	cmd            *exec.Cmd
	stdout, stderr string
}

// startRun starts `kmirror run` against dst with extra flags. The process is
// killed when the test ends if it still runs.
func startRun(t *testing.T, dst *enginetest.Cluster, name, dir string, extra ...string) *runProc {
	t.Helper()
	p := &runProc{stdout: filepath.Join(dir, name+".out"), stderr: filepath.Join(dir, name+".log")}
	out, err := os.OpenFile(p.stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.OpenFile(p.stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	args := append([]string{"run", "--bootstrap-server", addrs(dst), "--instance", name}, extra...)
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), asMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = out, errf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start kmirror run: %v", err)
	}
	t.Cleanup(func() { p.kill() })
	return p
}

// kill SIGKILLs the process (no shutdown path runs) and reaps it.
func (p *runProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// metricsURL waits for the address the instance prints for --metrics-addr.
func (p *runProc) metricsURL(t *testing.T) string {
	t.Helper()
	re := regexp.MustCompile(`kmirror metrics at (http://\S+/metrics)`)
	var url string
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(p.stdout)
		if m := re.FindSubmatch(b); m != nil {
			url = string(m[1])
			return true, ""
		}
		return false, fmt.Sprintf("no metrics address printed; stdout %q", b)
	})
	return url
}

// describeRow is what the tests read of one --describe --json row.
type describeRow struct {
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	State             string `json:"state"`
	ErrorMessage      string `json:"errorMessage"`
	Owner             string `json:"owner"`
	DestinationOffset int64  `json:"destinationOffset"`
	LastMirrorOffset  int64  `json:"lastMirrorOffset"`
}

// checkpointed reports whether every row's persisted last mirrored offset
// is the one below its destination log end.
func checkpointed(rows []describeRow) (bool, string) {
	for _, r := range rows {
		if r.DestinationOffset <= 0 || r.LastMirrorOffset != r.DestinationOffset-1 {
			return false, fmt.Sprintf("%s/%d: lastMirrorOffset %d, destinationOffset %d", r.Topic, r.Partition, r.LastMirrorOffset, r.DestinationOffset)
		}
	}
	return len(rows) > 0, "no rows"
}

// describeRows runs --describe --json in process.
func describeRows(t *testing.T, dst *enginetest.Cluster) []describeRow {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"--bootstrap-server", addrs(dst), "--describe", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--describe --json: exit %d: %s", code, errb.String())
	}
	var rows []describeRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("--describe --json: %v\n%s", err, out.String())
	}
	return rows
}

// waitTimer waits d, or fails the test when it ends first.
func waitTimer(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.Context().Done():
		t.Fatal("test ended while waiting")
	}
}

// chaosWorkload writes to the source until stopped: an idempotent zstd
// producer, a plain (non-idempotent) lz4 producer, an uncompressed one and
// a transactional producer that commits some transactions and aborts
// others. Every producer finishes what it started, so no source transaction
// stays open when the workload ends.
type chaosWorkload struct {
	records, commits, aborts atomic.Int64
	stop                     chan struct{}
	once                     sync.Once
	wg                       sync.WaitGroup
}

func startChaosWorkload(t *testing.T, src *enginetest.Cluster, parts map[string]int32, seed uint64) *chaosWorkload {
	w := &chaosWorkload{stop: make(chan struct{})}
	topics := slices.Sorted(func(yield func(string) bool) {
		for tp := range parts {
			if !yield(tp) {
				return
			}
		}
	})
	plain := func(name string, opts []kgo.Opt) {
		cl := src.Client(t, opts...)
		w.wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for round := 0; ; round++ {
				var recs []*kgo.Record
				for _, tp := range topics {
					for p := range parts[tp] {
						for i := range 5 {
							recs = append(recs, chaosRecord(tp, p, name, round, i))
						}
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := cl.ProduceSync(ctx, recs...).FirstErr()
				cancel()
				if err != nil {
					t.Errorf("workload %s round %d: %v", name, round, err)
					return
				}
				w.records.Add(int64(len(recs)))
				select {
				case <-w.stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	plain("zstd-idempotent", enginetest.ProducerOpts("zstd", true))
	plain("lz4-plain", enginetest.ProducerOpts("lz4", false))
	plain("uncompressed", enginetest.ProducerOpts("none", true))

	txn := src.Client(t, kgo.TransactionalID("kmirror-chaos-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.TransactionTimeout(60*time.Second))
	rng := rand.New(rand.NewPCG(seed, 7))
	w.wg.Go(func() {
		// At most 200 transactions a second: unpaced, the rate is the
		// machine's speed, and a fast machine writes millions of records
		// the test then has to hold in memory and compare.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for round := 0; ; round++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := w.transaction(ctx, txn, rng, topics, parts, round)
			cancel()
			if err != nil {
				t.Errorf("workload transactional round %d: %v", round, err)
				return
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	})
	// A test that fails early must still stop its producers before it
	// ends (they report through t), and before their clients close:
	// cleanups run last-registered first.
	t.Cleanup(w.finish)
	return w
}

// transaction writes to two or three random partitions and commits two
// transactions out of three.
func (w *chaosWorkload) transaction(ctx context.Context, cl *kgo.Client, rng *rand.Rand, topics []string, parts map[string]int32, round int) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var recs []*kgo.Record
	for range 2 + rng.IntN(2) {
		tp := topics[rng.IntN(len(topics))]
		p := rng.Int32N(parts[tp])
		for i := range 1 + rng.IntN(8) {
			recs = append(recs, chaosRecord(tp, p, "txn", round, i))
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	commit := rng.IntN(3) != 0
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return fmt.Errorf("end (commit %v): %w", commit, err)
	}
	w.records.Add(int64(len(recs)))
	if commit {
		w.commits.Add(1)
	} else {
		w.aborts.Add(1)
	}
	return nil
}

func (w *chaosWorkload) finish() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

func chaosRecord(topic string, p int32, producer string, round, i int) *kgo.Record {
	return &kgo.Record{
		Topic: topic, Partition: p,
		Key:     fmt.Appendf(nil, "%s-%d", producer, i%13),
		Value:   fmt.Appendf(nil, `{"producer":%q,"round":%d,"i":%d,"pad":%q}`, producer, round, i, strings.Repeat("c", (round+i)%40)),
		Headers: []kgo.RecordHeader{{Key: "producer", Value: []byte(producer)}},
	}
}

// within polls cond until it holds or timeout passes; unlike
// enginetest.Wait it returns, so the caller can explain a failure first.
func within(ctx context.Context, timeout time.Duration, cond func() (bool, string)) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return "", true
		}
		select {
		case <-deadline.C:
			return msg, false
		case <-ctx.Done():
			return msg, false
		case <-tick.C:
		}
	}
}

// untilStalled polls cond until it holds, or until progress() has not grown
// for stall.
func untilStalled(ctx context.Context, stall time.Duration, progress func() int64, cond func() (bool, string)) (string, bool) {
	for {
		before := progress()
		msg, ok := within(ctx, stall, cond)
		if ok {
			return "", true
		}
		if ctx.Err() != nil || progress() <= before {
			return msg + " (no progress for " + stall.String() + ")", false
		}
	}
}

// dumpInstance logs what explains a stuck instance: the partitions' states
// and the end of its log.
func dumpInstance(t *testing.T, dst *enginetest.Cluster, p *runProc) {
	t.Helper()
	for _, r := range describeRows(t, dst) {
		t.Logf("%s/%d %s owner %q: %s", r.Topic, r.Partition, r.State, r.Owner, r.ErrorMessage)
	}
	b, _ := os.ReadFile(p.stderr)
	lines := strings.Split(string(b), "\n")
	// The first warnings and errors tell how it started; a retry loop
	// repeats one line to the end of the log.
	var first []string
	for _, l := range lines {
		if len(first) < 30 && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
			first = append(first, l)
		}
	}
	t.Logf("first warnings of %s:\n%s", p.stderr, strings.Join(first, "\n"))
	t.Logf("last lines of %s:\n%s", p.stderr, strings.Join(lines[max(0, len(lines)-30):], "\n"))
}

// dumpFailed logs dumpDivergence for every FAILED partition.
func dumpFailed(t *testing.T, src, dst *enginetest.Cluster) {
	t.Helper()
	for _, r := range describeRows(t, dst) {
		if r.State == "FAILED" {
			dumpDivergence(t, src, dst, r.Topic, r.Partition)
		}
	}
}

// dumpDivergence logs the batch headers of source and destination around
// the first batch where a partition's two logs differ: who wrote what at
// the offsets a FAILED partition names.
func dumpDivergence(t *testing.T, src, dst *enginetest.Cluster, topic string, p int32) {
	t.Helper()
	ctx := t.Context()
	sb, serr := enginetest.ReadBatches(ctx, src.Client(t), topic, p)
	db, derr := enginetest.ReadBatches(ctx, dst.Client(t), topic, p)
	if serr != nil || derr != nil {
		t.Logf("%s/%d: batches unreadable: source %v, destination %v", topic, p, serr, derr)
		return
	}
	at := 0
	// kmirror appends under its own writer ids: the logs agree where
	// their batches cover the same offsets.
	for at < len(sb) && at < len(db) && sb[at].Header.BaseOffset == db[at].Header.BaseOffset &&
		sb[at].Header.LastOffsetDelta == db[at].Header.LastOffsetDelta {
		at++
	}
	line := func(side string, bs []enginetest.RawBatch) {
		var b strings.Builder
		for _, x := range bs[max(0, at-6):min(len(bs), at+6)] {
			h := x.Header
			fmt.Fprintf(&b, "\n  %s [%d..%d] pid %d epoch %d seq %d attrs %#x", side, h.BaseOffset, h.LastOffset(), h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.Attributes)
		}
		t.Logf("%s/%d %s batches around the first difference (batch %d of %d):%s", topic, p, side, at, len(bs), b.String())
	}
	line("source", sb)
	line("destination", db)
}

// destTotal sums the destination log ends of topics (-1 when unreadable).
func destTotal(ctx context.Context, cl *kgo.Client, topics []string) int64 {
	var n int64
	for _, tp := range topics {
		ends, err := enginetest.Ends(ctx, cl, tp)
		if err != nil {
			return -1
		}
		for _, e := range ends {
			n += e
		}
	}
	return n
}

// TestChaosKillRestart SIGKILLs a `kmirror run` instance at random moments
// while a mixed workload (idempotent zstd, plain lz4, uncompressed,
// transactions committed and aborted) writes to two source topics, restarts
// it each time, and then requires every partition to be identical on both
// sides — batches, offsets, and what READ_UNCOMMITTED and READ_COMMITTED
// consumers see — with no partition FAILED. KMIRROR_CHAOS_RUNS=N sets the
// number of kills (default 3).
func TestChaosKillRestart(t *testing.T) {
	kills := 3
	if v := os.Getenv(chaosRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", chaosRunsEnv, v)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 1))

	// The destination behaves like a replicating broker at times: before
	// each kill one partition's next Produce answer is lost with the batch
	// in its log above a held-back high watermark (enginetest.HWMHold), so
	// kills land while an append's outcome is unknown. The hold is released
	// before the next instance starts, as followers catch up meanwhile.
	hold := enginetest.NewHWMHold()
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(hold.Listen))
	parts := map[string]int32{"chaos-a": 3, "chaos-b": 2}
	topics := []string{"chaos-a", "chaos-b"}
	for _, tp := range topics {
		src.CreateTopic(t, tp, parts[tp], nil)
	}
	work := os.Getenv("KMIRROR_CHAOS_LOGDIR") // keep the instances' logs for a post-mortem
	if work == "" {
		work = t.TempDir()
	}
	cfg := filepath.Join(work, "m.properties")
	if err := writeFile(cfg, "bootstrap.servers="+addrs(src)+"\nmirror.failed.retry.initial.backoff.ms=50\nmirror.failed.retry.max.backoff.ms=2000\nmirror.state.checkpoint.interval.ms=1000"); err != nil {
		t.Fatal(err)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--create", "--mirror", "a-to-b", "--mirror-config", cfg)
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--start", "--mirror", "a-to-b", "--topics", "chaos-.*")

	w := startChaosWorkload(t, src, parts, seed)
	dstCl := dst.Client(t)
	ctx := t.Context()
	var proc *runProc
	for k := 0; k <= kills; k++ {
		hold.Release()
		proc = startRun(t, dst, fmt.Sprintf("chaos-%d", k), work)
		if k == kills {
			break // the last instance stays up to finish the mirror
		}
		// Kill only once this incarnation has mirrored something, so every
		// kill lands in the middle of copying, then at a random moment.
		before := destTotal(ctx, dstCl, topics)
		progress := func() (bool, string) {
			now := destTotal(ctx, dstCl, topics)
			return now > before, fmt.Sprintf("destination total %d", now)
		}
		if msg, ok := within(ctx, 90*time.Second, progress); !ok {
			dumpInstance(t, dst, proc)
			t.Fatalf("kill %d: instance %s made no progress in 90s: %s", k+1, proc.cmd.Args[5], msg)
		}
		tp := topics[rng.IntN(len(topics))]
		if ti := dst.TopicInfo(tp); ti != nil {
			hold.Arm(tp, ti.TopicID, rng.Int32N(parts[tp]), 1)
		}
		waitTimer(t, time.Duration(rng.Int64N(int64(3*time.Second))))
		proc.kill()
		t.Logf("kill %d: destination total %d after %d source records", k+1, destTotal(ctx, dstCl, topics), w.records.Load())
	}
	w.finish()
	if t.Failed() {
		t.FailNow()
	}
	// The backlog after many kills can be large: wait as long as the
	// mirror keeps moving, and fail once it stalls for a minute.
	progressCl := dst.Client(t)
	for _, tp := range topics {
		if msg, ok := untilStalled(ctx, time.Minute, func() int64 { return destTotal(ctx, progressCl, topics) }, caughtUp(t, src, dst, tp)); !ok {
			dumpInstance(t, dst, proc)
			dumpFailed(t, src, dst)
			t.Fatalf("%s never caught up after the workload stopped: %s", tp, msg)
		}
	}

	for _, r := range describeRows(t, dst) {
		if r.State != "MIRRORING" {
			t.Errorf("%s/%d is %s after the chaos: %s", r.Topic, r.Partition, r.State, r.ErrorMessage)
		}
	}
	if t.Failed() {
		dumpFailed(t, src, dst)
	}
	// The last mirrored offsets reach __mirror_state while MIRRORING
	// (checkpoints), and a SIGKILL leaves them there for describe with no
	// instance running and for the next owner.
	if msg, ok := within(ctx, 30*time.Second, func() (bool, string) { return checkpointed(describeRows(t, dst)) }); !ok {
		t.Errorf("persisted last mirrored offsets after the last restart: %s", msg)
	}
	proc.kill()
	if ok, msg := checkpointed(describeRows(t, dst)); !ok {
		t.Errorf("describe with no instance after a SIGKILL: %s", msg)
	}
	srcCl := src.Client(t)
	mismatches, batches := 0, 0
	var uncommitted, committed int
	for _, tp := range topics {
		for p := range parts[tp] {
			n, err := enginetest.CompareBatches(ctx, srcCl, dstCl, tp, p)
			batches += n
			if err != nil {
				mismatches++
				t.Errorf("batches: %v", err)
				continue
			}
			u, err := sameRecords(ctx, srcCl, dstCl, tp, p, false)
			uncommitted += u
			if err != nil {
				mismatches++
				t.Errorf("READ_UNCOMMITTED: %v", err)
			}
			c, err := sameRecords(ctx, srcCl, dstCl, tp, p, true)
			committed += c
			if err != nil {
				mismatches++
				t.Errorf("READ_COMMITTED: %v", err)
			}
		}
	}
	if t.Failed() {
		dumpInstance(t, dst, proc)
	}
	t.Logf("chaos: %d kills, %d source records written (%d transactions committed, %d aborted), %d batches compared, "+
		"%d records READ_UNCOMMITTED, %d READ_COMMITTED, %d mismatches",
		kills, w.records.Load(), w.commits.Load(), w.aborts.Load(), batches, uncommitted, committed, mismatches)
	t.Logf("chaos: %d destination Produce answers lost with the high watermark held back", hold.Dropped())
}

// sameRecords reads a partition on both clusters with one isolation level
// and requires the same records at the same offsets; it returns how many.
func sameRecords(ctx context.Context, src, dst *kgo.Client, topic string, p int32, readCommitted bool) (int, error) {
	read := func(cl *kgo.Client) ([]enginetest.Record, error) {
		if !readCommitted {
			return enginetest.Consume(ctx, cl, topic, p)
		}
		return enginetest.ConsumeCommitted(ctx, cl, topic, p)
	}
	s, err := read(src)
	if err != nil {
		return 0, fmt.Errorf("source %s/%d: %w", topic, p, err)
	}
	d, err := read(dst)
	if err != nil {
		return 0, fmt.Errorf("destination %s/%d: %w", topic, p, err)
	}
	if len(s) != len(d) {
		return 0, fmt.Errorf("%s/%d: source %d records, destination %d", topic, p, len(s), len(d))
	}
	for i := range s {
		if s[i] != d[i] {
			return i, fmt.Errorf("%s/%d record %d: source %+v, destination %+v", topic, p, i, s[i], d[i])
		}
	}
	return len(s), nil
}

// TestMetricsOfRunInstance starts `kmirror run --metrics-addr 127.0.0.1:0`
// and scrapes the address it prints until every mirrored partition has a
// lag series at 0 and its MIRRORING state series at 1.
func TestMetricsOfRunInstance(t *testing.T) {
	src, dst := enginetest.Pair(t)
	src.CreateTopic(t, "orders", 3, nil)
	enginetest.Produce(t, src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 3, 60, "m")
	work := t.TempDir()
	cfg := filepath.Join(work, "m.properties")
	if err := writeFile(cfg, "bootstrap.servers="+addrs(src)); err != nil {
		t.Fatal(err)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--create", "--mirror", "a-to-b", "--mirror-config", cfg)
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--start", "--mirror", "a-to-b", "--topics", "orders")
	proc := startRun(t, dst, "metrics-instance", work, "--metrics-addr", "127.0.0.1:0")
	url := proc.metricsURL(t)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("status %d: %v", resp.StatusCode, err)
		}
		for p := range 3 {
			l := fmt.Sprintf(`mirror="a-to-b",partition="%d"`, p)
			for _, want := range []string{
				`kmirror_partition_lag_records{` + l + `,topic="orders"} 0`,
				`kmirror_partition_state{` + l + `,state="MIRRORING",topic="orders"} 1`,
				`kmirror_partition_destination_log_end{` + l + `,topic="orders"} 60`,
			} {
				if !strings.Contains(string(body), want) {
					return false, fmt.Sprintf("no %s in:\n%s", want, body)
				}
			}
		}
		return true, ""
	})
}
