package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/metrics"
	"github.com/kmirror/kmirror/tui"
)

// observerArgs are the console's settings when it only observes.
type observerArgs struct {
	bootstrap   []string
	secOpts     []kgo.Opt
	readOnly    bool
	theme       string
	ascii       bool
	logFile     string
	log         *slog.Logger
	metricsAddr string
	metrics     metrics.Config
}

// newConsoleObserver is the observer `kmirror console` runs: it reads the
// destination's __mirror_state and both clusters' ends, joins no group and
// creates nothing; read-only it writes nothing either.
func newConsoleObserver(ctx context.Context, a observerArgs) (*engine.Observer, error) {
	return engine.NewObserver(ctx, engine.ObserverConfig{Destination: a.bootstrap, DestinationOpts: a.secOpts, ReadOnly: a.readOnly, Logger: a.log})
}

// consoleOptions are the console's options over an observer.
func consoleOptions(a observerArgs) tui.Options {
	return tui.Options{ReadOnly: a.readOnly, Theme: a.theme, ASCII: a.ascii, LogPath: a.logFile}
}

// runObserver runs the console over an observer until the operator quits.
func runObserver(ctx context.Context, a observerArgs, stderr io.Writer) int {
	o, err := newConsoleObserver(ctx, a)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror console: %s\n", oneLine(err))
		return exitFail
	}
	defer o.Close()
	if a.metricsAddr != "" {
		ms, err := metrics.Start(a.metricsAddr, o.Snapshot, a.metrics)
		if err != nil {
			fmt.Fprintf(stderr, "kmirror console: %v\n", err)
			return exitFail
		}
		defer ms.Close()
	}
	if err := tui.Run(ctx, o, consoleOptions(a)); err != nil {
		fmt.Fprintf(stderr, "kmirror console: %v\n", err)
		return exitFail
	}
	return exitOK
}
