package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// kcat runs librdkafka's command-line client, a third-party Kafka client.
func kcat(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (apt-get install -y kcat; .ci/run installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// TestKcatProducedDataMirrorsByteForByte has librdkafka produce compressed,
// keyed, idempotent batches with headers to the source; the destination must
// hold the same bytes, and kcat must read the same records on both sides.
func TestKcatProducedDataMirrorsByteForByte(t *testing.T) {
	e := newEnv(t)
	e.src.CreateTopic(t, "kcat-in", 2, nil)
	e.startMirror("kcat-in")

	for p, codec := range []string{"lz4", "zstd"} {
		var in bytes.Buffer
		for i := range 500 {
			fmt.Fprintf(&in, "key-%d:value %d from librdkafka %s\n", i%13, i, strings.Repeat("z", i%40))
		}
		kcat(t, in.Bytes(), "-P", "-b", strings.Join(e.src.Addrs(), ","), "-t", "kcat-in", "-p", fmt.Sprint(p),
			"-K:", "-z", codec, "-H", "origin=kcat",
			"-X", "enable.idempotence=true", "-X", "linger.ms=20", "-X", "batch.num.messages=200")
	}
	e.waitCaughtUp("kcat-in")
	e.assertIdentical("kcat-in")

	format := "%p|%o|%k|%s|%h|%T\n"
	read := func(addrs []string) []byte {
		return kcat(t, nil, "-C", "-b", strings.Join(addrs, ","), "-t", "kcat-in", "-e", "-q", "-f", format)
	}
	sortLines := func(b []byte) string {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		// kcat interleaves partitions; compare each partition in offset order.
		byPart := map[string][]string{}
		for _, l := range lines {
			p, _, _ := strings.Cut(l, "|")
			byPart[p] = append(byPart[p], l)
		}
		return strings.Join(byPart["0"], "\n") + "\n--\n" + strings.Join(byPart["1"], "\n")
	}
	src, dst := sortLines(read(e.src.Addrs())), sortLines(read(e.dst.Addrs()))
	if strings.Count(src, "\n") < 1000 {
		t.Fatalf("kcat read only %d records from the source", strings.Count(src, "\n"))
	}
	if src != dst {
		t.Fatalf("kcat reads different records from source and destination")
	}
}

// librdkafkaTxnScript writes committed and aborted transactions with
// librdkafka's transactional producer (Debian's python3-confluent-kafka).
const librdkafkaTxnScript = `
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "librdkafka-app",
              "compression.type": "gzip", "linger.ms": 5})
p.init_transactions(30)
for round, commit in enumerate([True, False, True, True, False]):
    p.begin_transaction()
    for i in range(50):
        p.produce("rdk-txn", key=b"k%d" % i, value=b"round %d value %d" % (round, i), partition=i % 2)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
`

// TestLibrdkafkaTransactionsMirror mirrors transactions written by a
// third-party transactional producer: offsets, markers and committed
// records identical.
func TestLibrdkafkaTransactionsMirror(t *testing.T) {
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import confluent_kafka").Run(); err != nil {
		t.Fatalf("python3-confluent-kafka is not installed (apt-get install -y python3-confluent-kafka; .ci/run installs it): %v", err)
	}
	e := newEnv(t)
	e.src.CreateTopic(t, "rdk-txn", 2, nil)
	e.startMirror("rdk-txn")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", librdkafkaTxnScript, strings.Join(e.src.Addrs(), ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("librdkafka producer: %v\n%s", err, out)
	}
	e.waitCaughtUp("rdk-txn")
	e.assertIdentical("rdk-txn")
	total := 0
	for p := range int32(2) {
		s, d := readCommitted(t, e.src, "rdk-txn", p), readCommitted(t, e.dst, "rdk-txn", p)
		if !slices.Equal(s, d) {
			t.Fatalf("rdk-txn/%d: READ_COMMITTED records differ", p)
		}
		total += len(s)
	}
	if total != 150 {
		t.Fatalf("%d committed records read, want 150 (3 committed rounds of 50)", total)
	}
}
