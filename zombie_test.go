package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// TestFrozenInstanceFencesItself SIGSTOPs a `kmirror run` instance that owns
// every partition of a mirror under a mixed workload, for longer than its
// group session, so a second instance takes the partitions over; then it
// SIGCONTs the first. The first instance finds by itself that the group
// may have replaced it and suspends its appends and state writes instead of
// resuming them; every partition ends MIRRORING and identical on both
// sides, batch for batch.
func TestFrozenInstanceFencesItself(t *testing.T) {
	src, dst := enginetest.Pair(t)
	parts := map[string]int32{"frozen-a": 3, "frozen-b": 2}
	topics := []string{"frozen-a", "frozen-b"}
	for _, tp := range topics {
		src.CreateTopic(t, tp, parts[tp], nil)
	}
	work := t.TempDir()
	cfg := filepath.Join(work, "m.properties")
	if err := writeFile(cfg, "bootstrap.servers="+addrs(src)+"\nmirror.failed.retry.initial.backoff.ms=50\nmirror.failed.retry.max.backoff.ms=2000"); err != nil {
		t.Fatal(err)
	}
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--create", "--mirror", "a-to-b", "--mirror-config", cfg)
	kmirrorCLI(t, 0, "--bootstrap-server", addrs(dst), "--start", "--mirror", "a-to-b", "--topics", "frozen-.*")

	w := startChaosWorkload(t, src, parts, uint64(time.Now().UnixNano()))
	ctx := t.Context()
	owned := func(owner string) func() (bool, string) {
		return func() (bool, string) {
			rows := describeRows(t, dst)
			n := 0
			for _, r := range rows {
				if r.State == "MIRRORING" && r.Owner == owner {
					n++
				}
			}
			return n == 5, fmt.Sprintf("%d of 5 partitions MIRRORING by %s: %+v", n, owner, rows)
		}
	}
	one := startRun(t, dst, "one", work)
	if msg, ok := within(ctx, 90*time.Second, owned("one")); !ok {
		dumpInstance(t, dst, one)
		t.Fatalf("instance one: %s", msg)
	}
	dstCl := dst.Client(t)
	before := destTotal(ctx, dstCl, topics)
	if msg, ok := within(ctx, 60*time.Second, func() (bool, string) {
		n := destTotal(ctx, dstCl, topics)
		return n > before, fmt.Sprintf("destination total %d", n)
	}); !ok {
		t.Fatalf("instance one copies nothing: %s", msg)
	}

	if err := one.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	two := startRun(t, dst, "two", work)
	if msg, ok := within(ctx, 90*time.Second, owned("two")); !ok {
		dumpInstance(t, dst, two)
		t.Fatalf("instance two did not take over from the frozen one: %s", msg)
	}
	t.Logf("instance two took over %s after instance one froze", time.Since(frozenAt).Round(time.Millisecond))
	logged, err := os.ReadFile(one.stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	mark := len(logged) // where instance one's log after the thaw begins
	var after string
	if msg, ok := within(ctx, 30*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(one.stderr)
		after = string(b[mark:])
		return strings.Contains(after, "suspended: the instances' group answered nothing"), "instance one's log after the thaw says nothing of suspending:\n" + after
	}); !ok {
		t.Fatal(msg)
	}
	// It resumes only once the group has it back as a member and assigned
	// it shards (maybe none), never on the answer that ended the gap.
	if msg, ok := within(ctx, 60*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(one.stderr)
		after = string(b[mark:])
		s := strings.Index(after, "suspended: the instances' group answered nothing")
		r := strings.Index(after, "the instances' group assigned shards again")
		return r > s, "instance one never rejoined:\n" + after
	}); !ok {
		t.Fatal(msg)
	}
	t.Logf("instance one after the thaw:\n%s", firstLines(after, 20))

	w.finish()
	if t.Failed() {
		t.FailNow()
	}
	for _, tp := range topics {
		if msg, ok := untilStalled(ctx, time.Minute, func() int64 { return destTotal(ctx, dstCl, topics) }, caughtUp(t, src, dst, tp)); !ok {
			dumpInstance(t, dst, two)
			t.Fatalf("%s never caught up after the workload stopped: %s", tp, msg)
		}
	}
	for _, r := range describeRows(t, dst) {
		if r.State != "MIRRORING" {
			t.Errorf("%s/%d is %s after the freeze: %s", r.Topic, r.Partition, r.State, r.ErrorMessage)
		}
	}
	srcCl := src.Client(t)
	batches := 0
	for _, tp := range topics {
		for p := range parts[tp] {
			n, err := enginetest.CompareBatches(ctx, srcCl, dstCl, tp, p)
			batches += n
			if err != nil {
				t.Errorf("FAILED: the destination diverged from the source after the frozen instance thawed: %v", err)
			}
		}
	}
	if t.Failed() {
		dumpInstance(t, dst, one)
		dumpInstance(t, dst, two)
	}
	t.Logf("%d source records, %d batches compared identical", w.records.Load(), batches)
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
