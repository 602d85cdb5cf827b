package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// The test binary doubles as kmirror: with asMainEnv set it runs main, so
// tests can start real `kmirror run` processes and kill them.
const asMainEnv = "KMIRROR_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// A developer's terminal must not make --stop --all wait for an answer.
	onTerminal = func() bool { return false }
	os.Exit(m.Run())
}

// TestCLIScripts runs every script under testdata/cli against a fresh pair
// of clusters. See script.run for the commands.
func TestCLIScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/cli/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var s *script
			if regexp.MustCompile(`(?m)^sourceback\b`).Match(text) {
				s = newDurableScript(t) // the source comes back with its records
			} else {
				s = newScript(t)
			}
			s.run(f)
		})
	}
}

// script is one CLI scenario: kmirror commands and checks, one per line.
type script struct {
	t         *testing.T
	src, dst  *enginetest.Cluster
	work      string
	stdout    string
	stderr    string
	marks     map[string][]int64
	instances map[string]*exec.Cmd
	lastExec  []string          // the last exec's arguments, for waitexec
	epochs    map[string]string // partition -> STATE@epoch, for sameepochs
	srcDir    string            // the source's data directory, "" if it keeps none
	srcPorts  []int             // the ports of a source taken down by sourcedown
	topicIDs  map[string]string // source topic ids, for sametopicid
	mu        sync.Mutex
}

func newScript(t *testing.T) *script {
	src, dst := enginetest.Pair(t)
	return scriptOn(t, src, dst, "")
}

// newDurableScript is newScript with a source that keeps its records in a
// directory, so sourcedown and sourceback take it down and bring it back.
func newDurableScript(t *testing.T) *script {
	dir := t.TempDir()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.DataDir(dir))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	return scriptOn(t, src, dst, dir)
}

func scriptOn(t *testing.T, src, dst *enginetest.Cluster, srcDir string) *script {
	s := &script{t: t, src: src, dst: dst, work: t.TempDir(), marks: map[string][]int64{}, instances: map[string]*exec.Cmd{}, srcDir: srcDir, topicIDs: map[string]string{}}
	t.Cleanup(func() {
		for _, c := range s.instances {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	return s
}

func (s *script) expand(v string) string {
	return os.Expand(v, func(k string) string {
		switch k {
		case "SRC":
			return strings.Join(s.src.Addrs(), ",")
		case "SRC1": // one source broker: another bootstrap of the same cluster
			return s.src.Addrs()[0]
		case "DST":
			return strings.Join(s.dst.Addrs(), ",")
		case "WORK":
			return s.work
		case "UNREACHABLE":
			return "127.0.0.1:1"
		}
		if strings.Contains(k, ":") {
			return "${" + s.expand(k) + "}" // a secret reference: ${env:NAME}, ${file:path:key}
		}
		return "$" + k
	})
}

// run executes a script. Commands:
//
//	exec [!N] ARGS...       run kmirror in process; exit code 0, or N
//	[!]stdout RE            the last exec's stdout matches (does not match) RE
//	[!]stderr RE            likewise for stderr
//	file NAME LINE...       write a file in $WORK, one line per argument
//	topic NAME PARTITIONS [KEY=VALUE...]
//	                        create a source topic, with topic configs
//	dstconfig TOPIC KEY VAL wait until the destination topic's config KEY is VAL
//	grow TOPIC PARTITIONS   add partitions to a source topic, up to PARTITIONS
//	produce TOPIC N [dst]   write N records to every partition of a source
//	                        topic (of the destination's topic with dst)
//	instance NAME [ARGS...] start a `kmirror run` process, with more flags;
//	                        on the destination unless ARGS name a
//	                        --bootstrap-server
//	kill NAME               SIGKILL it
//	sourcedown              stop the source cluster (for good, unless the
//	                        script says sourceback: then it keeps its records)
//	sourceback              start the source again, on its ports, from its records
//	writable TOPIC          a plain producer appends to every partition of
//	                        the destination's topic
//	waitdescribe RE         repeat --describe until its output matches RE
//	caughtup TOPIC [back]   wait until the destination ends equal the source
//	                        ends (with back: the source's equal the destination's)
//	mark TOPIC              remember the destination ends
//	unchanged TOPIC         the destination ends equal the marked ones
//	identical TOPIC         batches and records identical on both sides
//	topicid TOPIC           remember the source topic's id
//	sametopicid TOPIC       the source topic still has the id remembered (it
//	                        was not deleted and recreated)
//	deletetopic TOPIC       delete a source topic
//	setenv NAME VALUE       set an environment variable for the rest of the script
//	waitexec RE             repeat the last exec until its stdout matches RE
//	epochs                  remember every partition's state and state epoch
//	sameepochs              no partition remembered by epochs changed state
func (s *script) run(path string) {
	f, err := os.Open(path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		args := strings.Fields(s.expand(line))
		if err := s.command(args); err != nil {
			s.t.Fatalf("%s:%d: %s: %v\nstdout:\n%s\nstderr:\n%s", path, n, line, err, s.stdout, s.stderr)
		}
	}
}

func (s *script) command(args []string) error {
	ctx := context.Background()
	switch args[0] {
	case "exec":
		want := 0
		if strings.HasPrefix(args[1], "!") {
			want, _ = strconv.Atoi(args[1][1:])
			args = args[1:]
		}
		var out, errb bytes.Buffer
		code := run(args[1:], &out, &errb)
		s.stdout, s.stderr = out.String(), errb.String()
		s.lastExec = args[1:]
		if code != want {
			return fmt.Errorf("exit %d, want %d", code, want)
		}
	case "waitexec":
		re, err := regexp.Compile(strings.Join(args[1:], " "))
		if err != nil {
			return err
		}
		enginetest.Wait(s.t, 60*time.Second, func() (bool, string) {
			var out, errb bytes.Buffer
			run(s.lastExec, &out, &errb)
			s.stdout, s.stderr = out.String(), errb.String()
			return re.MatchString(s.stdout), fmt.Sprintf("%v does not match %q:\n%s%s", s.lastExec, re, s.stdout, s.stderr)
		})
	case "setenv":
		s.t.Setenv(args[1], strings.Join(args[2:], " "))
	case "deletetopic":
		resp, err := s.src.Admin(s.t).DeleteTopics(ctx, args[1])
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", args[1], err)
		}
	case "epochs", "sameepochs":
		var out, errb bytes.Buffer
		run([]string{"--bootstrap-server", strings.Join(s.dst.Addrs(), ","), "--describe", "--json"}, &out, &errb)
		var rows []struct {
			Mirror, Topic, State string
			Partition            int32
			StateEpoch           int64
		}
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			return fmt.Errorf("describe --json: %w: %s", err, errb.String())
		}
		got := map[string]string{}
		for _, r := range rows {
			got[fmt.Sprintf("%s/%s/%d", r.Mirror, r.Topic, r.Partition)] = fmt.Sprintf("%s@%d", r.State, r.StateEpoch)
		}
		if args[0] == "epochs" {
			s.epochs = got
			break
		}
		for p, was := range s.epochs { // partitions added since are not compared
			if got[p] != was {
				return fmt.Errorf("partition %s moved from %s to %s", p, was, got[p])
			}
		}
	case "stdout", "!stdout", "stderr", "!stderr":
		text := s.stdout
		if strings.HasSuffix(args[0], "stderr") {
			text = s.stderr
		}
		re, err := regexp.Compile(strings.Join(args[1:], " "))
		if err != nil {
			return err
		}
		if re.MatchString(text) == strings.HasPrefix(args[0], "!") {
			return fmt.Errorf("%s %q: match is %v", args[0], re, !strings.HasPrefix(args[0], "!"))
		}
	case "file":
		return os.WriteFile(filepath.Join(s.work, args[1]), []byte(strings.Join(args[2:], "\n")+"\n"), 0o600)
	case "topic":
		n, _ := strconv.Atoi(args[2])
		var configs map[string]*string
		for _, kv := range args[3:] {
			k, v, _ := strings.Cut(kv, "=")
			if configs == nil {
				configs = map[string]*string{}
			}
			configs[k] = &v
		}
		s.src.CreateTopic(s.t, args[1], int32(n), configs)
	case "dstconfig":
		enginetest.Wait(s.t, 60*time.Second, func() (bool, string) {
			rcs, err := kadm.NewClient(s.dst.Client(s.t)).DescribeTopicConfigs(ctx, args[1])
			if err != nil {
				return false, err.Error()
			}
			rc, err := rcs.On(args[1], nil)
			if err != nil {
				return false, err.Error()
			}
			for _, c := range rc.Configs {
				if c.Key == args[2] {
					return c.MaybeValue() == args[3], fmt.Sprintf("destination %s %s=%s, want %s", args[1], args[2], c.MaybeValue(), args[3])
				}
			}
			return false, fmt.Sprintf("destination %s has no %s", args[1], args[2])
		})
	case "grow":
		n, _ := strconv.Atoi(args[2])
		resp, err := s.src.Admin(s.t).UpdatePartitions(ctx, n, args[1])
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("grow %s to %d partitions: %w", args[1], n, err)
		}
	case "produce":
		n, _ := strconv.Atoi(args[2])
		on := s.src
		if len(args) > 3 && args[3] == "dst" {
			on = s.dst
		}
		ends, err := enginetest.Ends(ctx, on.Client(s.t), args[1])
		if err != nil {
			return err
		}
		enginetest.Produce(s.t, on.Client(s.t, enginetest.ProducerOpts("zstd", true)...), args[1], int32(len(ends)), n, "script")
	case "writable":
		before, err := enginetest.Ends(ctx, s.dst.Client(s.t), args[1])
		if err != nil {
			return err
		}
		cl := s.dst.Client(s.t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
		for p := range before {
			r := &kgo.Record{Topic: args[1], Partition: int32(p), Value: []byte("written on the destination")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("%s/%d not writable: %w", args[1], p, err)
			}
			if r.Offset != before[p] {
				return fmt.Errorf("%s/%d: appended at %d, want the log end %d", args[1], p, r.Offset, before[p])
			}
		}
	case "instance":
		argv := []string{"run", "--bootstrap-server", strings.Join(s.dst.Addrs(), ",")}
		if slices.Contains(args[2:], "--bootstrap-server") {
			argv = argv[:1]
		}
		cmd := exec.Command(os.Args[0], append(append(argv, "--instance", args[1]), args[2:]...)...)
		cmd.Env = append(os.Environ(), asMainEnv+"=1")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		s.instances[args[1]] = cmd
	case "kill":
		cmd := s.instances[args[1]]
		delete(s.instances, args[1])
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		_ = cmd.Wait()
	case "sourcedown":
		s.srcPorts = nil
		for _, a := range s.src.Addrs() {
			_, p, _ := strings.Cut(a, ":")
			n, _ := strconv.Atoi(p)
			s.srcPorts = append(s.srcPorts, n)
		}
		s.src.Close()
	case "sourceback":
		if s.srcDir == "" || s.srcPorts == nil {
			return fmt.Errorf("sourceback needs a durable source taken down by sourcedown")
		}
		back, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID(s.src.ID), kfake.Ports(s.srcPorts...), kfake.DataDir(s.srcDir))
		if err != nil {
			return err
		}
		s.t.Cleanup(back.Close)
		s.src = &enginetest.Cluster{Cluster: back, ID: s.src.ID}
	case "waitdescribe":
		re, err := regexp.Compile(strings.Join(args[1:], " "))
		if err != nil {
			return err
		}
		enginetest.Wait(s.t, 60*time.Second, func() (bool, string) {
			var out, errb bytes.Buffer
			run([]string{"--bootstrap-server", strings.Join(s.dst.Addrs(), ","), "--describe"}, &out, &errb)
			s.stdout, s.stderr = out.String(), errb.String()
			return re.MatchString(s.stdout), fmt.Sprintf("describe does not match %q:\n%s%s", re, s.stdout, s.stderr)
		})
	case "caughtup":
		from, to := s.src, s.dst
		if len(args) > 2 && args[2] == "back" {
			from, to = s.dst, s.src
		}
		enginetest.Wait(s.t, 60*time.Second, func() (bool, string) {
			se, err1 := enginetest.Ends(ctx, from.Client(s.t), args[1])
			de, err2 := enginetest.Ends(ctx, to.Client(s.t), args[1])
			return err1 == nil && err2 == nil && slices.Equal(se, de), fmt.Sprintf("source %v destination %v (%v %v)", se, de, err1, err2)
		})
	case "mark", "unchanged":
		de, err := enginetest.Ends(ctx, s.dst.Client(s.t), args[1])
		if err != nil {
			return err
		}
		if args[0] == "mark" {
			s.marks[args[1]] = de
		} else if !slices.Equal(de, s.marks[args[1]]) {
			return fmt.Errorf("destination ends moved from %v to %v", s.marks[args[1]], de)
		}
	case "topicid", "sametopicid":
		td, err := kadm.NewClient(s.src.Client(s.t)).ListTopics(ctx, args[1])
		if err != nil {
			return err
		}
		id := td[args[1]].ID.String()
		if args[0] == "topicid" {
			s.topicIDs[args[1]] = id
		} else if id != s.topicIDs[args[1]] {
			return fmt.Errorf("source topic %s has id %s, remembered %s", args[1], id, s.topicIDs[args[1]])
		}
	case "identical":
		se, err := enginetest.Ends(ctx, s.src.Client(s.t), args[1])
		if err != nil {
			return err
		}
		for p := range se {
			if _, err := enginetest.CompareBatches(ctx, s.src.Client(s.t), s.dst.Client(s.t), args[1], int32(p)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
	return nil
}

// TestInstancesShareAndTakeOver runs two `kmirror run` processes on one
// mirror: both own topics; one is SIGKILLed mid-stream and the other takes
// its topics over, with offsets and bytes still identical.
func TestInstancesShareAndTakeOver(t *testing.T) {
	s := newScript(t)
	var topics []string
	for i := range 6 {
		topic := fmt.Sprintf("t%d", i)
		topics = append(topics, topic)
		s.command([]string{"topic", topic, "2"})
		s.command([]string{"produce", topic, "50"})
	}
	must := func(args ...string) {
		t.Helper()
		if err := s.command(args); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, s.stdout, s.stderr)
		}
	}
	must("file", "m.properties", "bootstrap.servers="+strings.Join(s.src.Addrs(), ","))
	must("exec", "--bootstrap-server", strings.Join(s.dst.Addrs(), ","), "--create", "--mirror", "a-to-b", "--mirror-config", filepath.Join(s.work, "m.properties"))
	must("exec", "--bootstrap-server", strings.Join(s.dst.Addrs(), ","), "--start", "--mirror", "a-to-b", "--topics", "t.*")
	must("instance", "one")
	must("instance", "two")

	owners := func() map[string]int {
		var out, errb bytes.Buffer
		run([]string{"--bootstrap-server", strings.Join(s.dst.Addrs(), ","), "--describe", "--json"}, &out, &errb)
		var rows []struct {
			State, Owner string
		}
		_ = json.Unmarshal(out.Bytes(), &rows)
		got := map[string]int{}
		for _, r := range rows {
			if r.State == "MIRRORING" {
				got[r.Owner]++
			}
		}
		return got
	}
	enginetest.Wait(t, 90*time.Second, func() (bool, string) {
		o := owners()
		return len(o) == 2 && o["one"]+o["two"] == 12, fmt.Sprintf("MIRRORING partitions by owner: %v", o)
	})

	stop := make(chan struct{})
	wg := enginetest.ProduceInBackground(t, s.src.Client(t, enginetest.ProducerOpts("lz4", true)...), 2, 20, stop, topics...)
	must("kill", "one")
	enginetest.Wait(t, 90*time.Second, func() (bool, string) {
		o := owners()
		return len(o) == 1 && o["two"] == 12, fmt.Sprintf("MIRRORING partitions by owner: %v", o)
	})
	close(stop)
	wg.Wait()
	for _, topic := range topics {
		must("caughtup", topic)
		must("identical", topic)
	}
}

// TestSourceClusterChangeFailsUntilRecovered points a running mirror's
// bootstrap at another cluster (the source is replaced on the same ports):
// every partition goes FAILED, non-retryable, naming both cluster ids. With
// the right cluster back, --recover resumes mirroring.
func TestSourceClusterChangeFailsUntilRecovered(t *testing.T) {
	dir := t.TempDir()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.DataDir(dir))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	s := scriptOn(t, src, dst, "")
	must := func(args ...string) {
		t.Helper()
		if err := s.command(args); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, s.stdout, s.stderr)
		}
	}
	must("topic", "orders", "2")
	must("produce", "orders", "30")
	must("file", "m.properties", "bootstrap.servers="+strings.Join(src.Addrs(), ","))
	B := strings.Join(dst.Addrs(), ",")
	must("exec", "--bootstrap-server", B, "--create", "--mirror", "a-to-b", "--mirror-config", filepath.Join(s.work, "m.properties"))
	must("exec", "--bootstrap-server", B, "--start", "--mirror", "a-to-b", "--topics", "orders")
	must("instance", "i1")
	must("caughtup", "orders")

	ports := loseSource(src)
	other, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("some-other-cluster"), kfake.Ports(ports...), kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	must("waitdescribe", `(?s)orders\s+0\s+.*FAILED.*orders\s+1\s+.*FAILED`)
	must("exec", "--bootstrap-server", B, "--describe", "--failed")
	must("stdout", `orders\s+0\s+NonRetryable\s+\S`)
	must("exec", "--bootstrap-server", B, "--describe", "--failed", "--json")
	must("stdout", `some-other-cluster`)
	must("stdout", `kmirror-test-source`)
	must("stdout", `"partition": 0,\s+"sourceOffset": -?\d+,\s+"destinationOffset": 30,`)

	// Retrying does not help: the partitions wait for an operator.
	other.Close()
	fixed, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("kmirror-test-source"), kfake.Ports(ports...), kfake.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fixed.Close)
	s.src = &enginetest.Cluster{Cluster: fixed, ID: "kmirror-test-source"}
	must("exec", "--bootstrap-server", B, "--describe")
	must("stdout", `orders\s+0\s+30\s+30\s+0\s+FAILED`)
	must("exec", "--bootstrap-server", B, "--recover", "--mirror", "a-to-b", "--topics", "orders")
	must("waitdescribe", `(?s)orders\s+0\s+30\s+30\s+0\s+MIRRORING.*orders\s+1\s+30\s+30\s+0\s+MIRRORING`)
	must("produce", "orders", "20")
	must("caughtup", "orders")
	must("identical", "orders")
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text+"\n"), 0o600) }
