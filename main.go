// Command kmirror mirrors Kafka topics from a source cluster to a
// destination cluster at identical offsets, byte for byte.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/sandbox"
	"github.com/kmirror/kmirror/tui"
)

// Exit codes: 0 ok, 1 operation failed, 2 usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `kmirror mirrors Kafka topics between clusters at identical offsets.

Modes:
  kmirror demo [--headless] [--theme T]    two embedded clusters, live traffic, mirror a-to-b, the console
  kmirror sandbox                          only the two embedded clusters with traffic (for scripting)
  kmirror run --bootstrap-server B         a headless instance: mirrors what __mirror_state on B says
  kmirror console --bootstrap-server B     the console, with an in-process instance
  kmirror help                             this text

Actions (compatible with kafka-cluster-mirrors.sh; exactly one per call):
  kmirror --bootstrap-server B [--command-config F] ACTION [options]
    --create   --mirror N --mirror-config F [--allow-plaintext-secrets]
    --delete   --mirror N                      (only when every topic is STOPPED)
    --list
    --describe [--mirror N] [--failed] [--json]
    --start    --mirror N --topics LIST|REGEX [--exclude REGEX]
    --pause    --mirror N [--topics LIST|REGEX]
    --resume   --mirror N [--topics LIST|REGEX]
    --stop     --mirror N [--topics LIST|REGEX]   (failover: the topics become writable)
    --recover  --mirror N [--topics LIST|REGEX] [--rebuild]

Exit codes: 0 success, 1 the operation failed, 2 usage error.
Run "kmirror MODE --help" for the options of a mode.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		return runAction(ctx, args, stdout, stderr)
	}
	switch args[0] {
	case "run":
		return runInstance(ctx, args[1:], stdout, stderr, false)
	case "console":
		return runInstance(ctx, args[1:], stdout, stderr, true)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr, false)
	case "sandbox":
		return runDemo(ctx, args[1:], stdout, stderr, true)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "kmirror: unknown mode %q\n\n%s", args[0], usage)
	return exitUsage
}

// runDemo starts the two embedded clusters with traffic and the mirror
// a-to-b, then runs the console (or prints progress when headless). With
// sandboxOnly it starts the clusters and traffic only.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, sandboxOnly bool) int {
	name := "demo"
	if sandboxOnly {
		name = "sandbox"
	}
	fs := flag.NewFlagSet("kmirror "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	headless := fs.Bool("headless", false, "print progress lines instead of opening the console")
	noDrill := fs.Bool("no-drill", false, "open the plain console, without the guided DR drill panel")
	theme := fs.String("theme", "dark", "console theme: dark, light or high-contrast")
	logFile := fs.String("log-file", filepath.Join(os.TempDir(), "kmirror-demo.log"), "where the engine writes its log")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	_ = noDrill // the drill panel is not part of this version; the plain console is shown

	start := time.Now()
	sb, err := sandbox.Start(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %v\n", name, err)
		return exitFail
	}
	defer sb.Close()
	sb.Describe(stdout)
	if sandboxOnly {
		fmt.Fprintln(stdout, "traffic is running on A; press Ctrl-C to stop")
		<-ctx.Done()
		return exitOK
	}

	lf, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror demo: log file: %v\n", err)
		return exitFail
	}
	defer lf.Close()
	eng, err := engine.New(ctx, engine.Config{
		Destination: sb.B.ListenAddrs(),
		Instance:    "demo",
		Logger:      slog.New(slog.NewJSONHandler(lf, nil)),
	})
	if err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	defer eng.Close()
	if err := eng.StartMirror(ctx, engine.MirrorConfig{Name: "a-to-b", SourceBootstrap: sb.A.ListenAddrs(), Topics: sandbox.TopicNames()}); err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "mirror a-to-b running (demo ready in %s); log: %s\n", time.Since(start).Round(time.Millisecond), *logFile)

	if *headless {
		return demoHeadless(ctx, eng, stdout)
	}
	if err := tui.Run(ctx, eng, tui.Options{Theme: *theme, LogPath: *logFile}); err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	return exitOK
}

// demoHeadless prints one progress line a second until ctx ends.
func demoHeadless(ctx context.Context, eng *engine.Engine, stdout io.Writer) int {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		for _, m := range eng.Snapshot().Mirrors {
			var lag, copied int64
			states := map[string]int{}
			for _, p := range m.Partitions {
				lag += p.Lag
				copied += p.BatchesCopied
				states[p.State.String()]++
			}
			fmt.Fprintf(stdout, "%s %s: %d partitions %v, lag %d records, %d batches copied\n",
				time.Now().Format(time.TimeOnly), m.Name, len(m.Partitions), states, lag, copied)
		}
	}
}
