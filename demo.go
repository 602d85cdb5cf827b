package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/sandbox"
	"github.com/kmirror/kmirror/tui"
)

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
