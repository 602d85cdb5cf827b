// Command kmirror mirrors Kafka topics from a source cluster to a
// destination cluster at identical offsets, byte for byte.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kmirror/kmirror/internal/bench"
)

// Exit codes: 0 ok, 1 operation failed, 2 usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `kmirror mirrors Kafka topics between clusters at identical offsets.

Modes:
  kmirror demo [--no-drill] [--headless] [--drill-script [--report PATH]] [--theme T]
                                           two embedded clusters, live traffic, mirror a-to-b, the console
                                           with the guided DR drill (n runs the next step, i adds a note)
  kmirror sandbox                          only the two embedded clusters with traffic (for scripting)
  kmirror run --bootstrap-server B         a headless instance: mirrors what __mirror_state on B says
  kmirror console --bootstrap-server B     the console: observes the instances (reads __mirror_state and both
    [--read-only] [--run-instance]         clusters, joins no group; --read-only writes nothing; --run-instance
                                           also runs an instance here)
    [--drill [--mirror N] [--report PATH]] with the DR drill panel for a real mirror: you take the source
                                           down and move the clients and tick each (x); the drill measures
  kmirror bench [--quick] [--json]         throughput, CPU, allocation, lag, failover and memory against baselines
  kmirror completion bash|zsh              a shell completion script
  kmirror --version                        the release, commit, module version and Go version of this build
  kmirror --help                           this text

  Every mode and action takes --log-level debug|info|warn|error and
  --log-format text|json. run and sandbox log to stderr at info, console and
  demo to their --log-file, bench to stderr at warn, actions to stderr at
  error. run --metrics-addr also serves /healthz and /readyz.

Actions (compatible with kafka-cluster-mirrors.sh; exactly one per call):
  kmirror --bootstrap-server B [--command-config F] ACTION [options]
    --create          --mirror N --mirror-config F [--allow-plaintext-secrets]
    --alter           --mirror N --mirror-config F [--allow-plaintext-secrets]
                                  (running instances apply it without a restart)
    --describe-config --mirror N [--json]
    --delete          --mirror N  (only when every topic is STOPPED)
    --list            [--json]
    --describe        [--mirror N] [--failed] [--json]
    --start           --mirror N --topics LIST [--exclude LIST]
    --pause           --mirror N --topics LIST|--all [--wait [--timeout D]]
    --resume          --mirror N --topics LIST|--all [--wait [--timeout D]]
    --stop            --mirror N [--topics LIST|--all] [--yes] [--wait [--timeout D]]
                                  (failover: the topics become writable;
                                  without --topics, the whole mirror)
    --recover         --mirror N --topics LIST|--all [--rebuild]

  LIST is a comma list of topic names and RE2 regexes, each matching whole
  names: --topics 'payments,orders-.*'. A --start whose patterns match no
  topic yet is recorded: matching topics are started when they appear.
  A stop of the whole mirror asks for the mirror's name on a terminal (--yes
  skips it); off a terminal --stop --mirror N runs, --stop --all needs --yes.
  An option of another action is a usage error.

  --pause, --resume, --stop and --recover record the command in __mirror_state
  and return; the instance owning the partitions executes it. When no live
  instance owns them, a warning says so and the exit code is still 0: the
  command runs when an instance starts. --wait waits until every selected
  partition is PAUSED, MIRRORING or STOPPED (default --timeout 60s; exit 1
  naming the partitions still pending); after --stop it prints each
  partition's last mirrored offset and the records the source holds beyond it.
  --describe adds OWNER and HEARTBEAT: "instance lost" when the owner's last
  heartbeat is over 3 heartbeat intervals old or missing. --describe --failed
  shows MIRROR TOPIC PARTITION RETRY ERROR, RETRY as attempt/max or
  NonRetryable.

Exit codes: 0 success, 1 the operation failed, 2 usage error.
Run "kmirror MODE --help" for the options of a mode.
`

func main() {
	if os.Getenv(bench.ClusterEnv) != "" { // a cluster child process of kmirror bench
		os.Exit(bench.ClusterMain(os.Args[1:]))
	}
	if os.Getenv(bench.ScaleEnv) != "" { // an idle-partition measuring process of kmirror bench
		os.Exit(bench.ScaleMain(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprint(stdout, versionReport())
		return exitOK
	}
	if strings.HasPrefix(args[0], "-") {
		return runAction(ctx, args, stdout, stderr)
	}
	switch args[0] {
	case "run":
		return runInstance(ctx, args[1:], stdout, stderr, false)
	case "bench":
		return bench.Main(ctx, args[1:], stdout, stderr)
	case "console":
		return runInstance(ctx, args[1:], stdout, stderr, true)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr, false)
	case "sandbox":
		return runDemo(ctx, args[1:], stdout, stderr, true)
	case "completion":
		return completion(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kmirror: unknown mode %q\n\n%s", args[0], usage)
	return exitUsage
}
