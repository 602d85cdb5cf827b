package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/metrics"
	"github.com/kmirror/kmirror/tui"
)

// runInstance runs an engine instance that joins the destination's
// __mirror_state: headless until SIGTERM, or behind the console.
func runInstance(ctx context.Context, args []string, stdout, stderr io.Writer, console bool) int {
	mode := "run"
	if console {
		mode = "console"
	}
	fs := flag.NewFlagSet("kmirror "+mode, flag.ContinueOnError)
	bootstrap := fs.String("bootstrap-server", "", "destination cluster bootstrap servers (host:port,...)")
	cmdConfig := fs.String("command-config", "", "properties file with the destination client's security settings")
	host, _ := os.Hostname()
	instance := fs.String("instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's name, shown as the owner of its partitions")
	heartbeat := fs.Duration("heartbeat-interval", engine.DefaultHeartbeatInterval, "how often this instance writes its heartbeat to __mirror_state; readers call it lost after 3 intervals")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on http://ADDR/metrics, liveness on /healthz and readiness on /readyz (host:port; port 0 picks one)")
	granularity := fs.String("metrics-granularity", string(metrics.PerPartition), "with --metrics-addr: partition (series per partition) or topic (summed per topic: for many thousands of partitions)")
	var logs logging.Flags
	logs.Register(fs, "info", "text")
	var readOnly, drillOn, withInstance, ascii *bool
	var theme, logFile, drillMirror, report *string
	var stepTimeout *time.Duration
	if console {
		readOnly = fs.Bool("read-only", false, "watch only: no action keys, and nothing is written to the destination")
		withInstance = fs.Bool("run-instance", false, "also run a mirroring instance in this process (it joins the instance group and takes shards; q asks before stopping them); by default the console only observes")
		theme = fs.String("theme", "", "dark, light or high-contrast (default: from the terminal's background; NO_COLOR is respected)")
		ascii = fs.Bool("ascii", false, "ASCII borders and glyphs (default when the locale is not UTF-8)")
		logFile = fs.String("log-file", defaultLogPath(os.Getenv, "console.log"), "where the engine writes its log")
		drillOn = fs.Bool("drill", false, "show the guided DR drill panel for a mirror on this destination: you take the source down and move the clients, the drill measures")
		drillMirror = fs.String("mirror", "", "with --drill: the mirror to drill (default: the only one on the destination)")
		report = fs.String("report", "", "with --drill: the report's path without extension (PATH.md, PATH.json); default kmirror-drill-<time> in the current directory")
		stepTimeout = fs.Duration("step-timeout", 90*time.Second, "with --drill: how long a drill step waits for the clusters")
	}
	if code, ok := parseMode(fs, mode, args, stdout, stderr); !ok {
		return code
	}
	g, err := metrics.ParseGranularity(*granularity)
	if err == nil {
		err = logs.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %v\n", mode, err)
		return exitUsage
	}
	mcfg := metrics.Config{Build: metricsBuild(), Granularity: g}
	if *bootstrap == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror %s: --bootstrap-server is required and no argument is taken\n", mode)
		return exitUsage
	}
	if console && *drillOn && *readOnly {
		fmt.Fprintf(stderr, "kmirror console: --drill stops the mirror, so it cannot be --read-only\n")
		return exitUsage
	}
	security, err := commandConfig(*cmdConfig, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %s\n", mode, oneLine(err))
		return exitFail
	}
	secOpts, err := engine.SecurityOpts(security)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror %s: --command-config: %v\n", mode, err)
		return exitFail
	}
	destTLS, destSASL, _ := engine.SecurityParts(security) // the same settings, for kmirror's own produce connections
	if console && !*withInstance && *drillOn {
		*withInstance = true // the drill stops the mirror through the instance it runs
	}
	if console && *withInstance && *readOnly {
		fmt.Fprintf(stderr, "kmirror console: --run-instance mirrors and writes, so it cannot be --read-only\n")
		return exitUsage
	}
	logOut := io.Writer(stderr)
	if console {
		lf, err := openLog(*logFile)
		if err != nil {
			fmt.Fprintf(stderr, "kmirror console: log file: %v\n", err)
			return exitFail
		}
		defer lf.Close()
		logOut = lf
	}
	log, _ := logs.New(logOut) // validated above
	if console && !*withInstance {
		return runObserver(ctx, observerArgs{bootstrap: strings.Split(*bootstrap, ","), secOpts: secOpts, readOnly: *readOnly,
			theme: *theme, ascii: *ascii, logFile: *logFile, log: log, metricsAddr: *metricsAddr, metrics: mcfg}, stderr)
	}
	eng, err := engine.New(ctx, engine.Config{
		Destination: strings.Split(*bootstrap, ","), DestinationOpts: secOpts, DestinationTLS: destTLS, DestinationSASL: destSASL,
		Instance: *instance, Logger: log,
		Version: versionString(), HeartbeatInterval: *heartbeat,
	})
	if err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %s\n", mode, oneLine(err))
		return exitFail
	}
	defer eng.Close()
	if err := eng.Join(ctx); err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %s\n", mode, oneLine(err))
		return exitFail
	}
	log.Info("kmirror "+mode+": instance joined the instances' group", logging.Instance, *instance, logging.Version, versionString(),
		logging.Bootstrap, *bootstrap)
	if *metricsAddr != "" {
		mcfg.Health = eng.Health
		ms, err := metrics.Start(*metricsAddr, eng.Snapshot, mcfg)
		if err != nil {
			fmt.Fprintf(stderr, "kmirror %s: %v\n", mode, err)
			return exitFail
		}
		defer ms.Close()
		if !console { // the console owns the terminal
			fmt.Fprintf(stdout, "kmirror metrics at http://%s/metrics, health at /healthz and /readyz\n", ms.Addr())
		}
	}
	if console {
		opts := tui.Options{ReadOnly: *readOnly, Theme: *theme, ASCII: *ascii, LogPath: *logFile, Instance: true}
		if *drillOn {
			d, err := realDrill(ctx, eng, strings.Split(*bootstrap, ","), security, *drillMirror, *report, *stepTimeout)
			if err != nil {
				fmt.Fprintf(stderr, "kmirror console: %s\n", oneLine(err))
				return exitFail
			}
			defer d.Close()
			opts.Drill = d
		}
		if err := tui.Run(ctx, eng, opts); err != nil {
			fmt.Fprintf(stderr, "kmirror console: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "kmirror instance %s running against %s; SIGTERM stops it\n", *instance, *bootstrap)
	<-ctx.Done()
	return exitOK
}
