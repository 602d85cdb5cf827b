package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/drill"
	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/props"
	"github.com/kmirror/kmirror/internal/linkproxy"
	"github.com/kmirror/kmirror/sandbox"
	"github.com/kmirror/kmirror/tui"
)

// demoMirror is the demo's forward mirror.
const demoMirror = "a-to-b"

// demoEnv is a running demo: the clusters with their clients, and an
// engine instance on B that mirrors a-to-b as recorded in __mirror_state.
type demoEnv struct {
	sb      *sandbox.Sandbox
	eng     *engine.Engine
	started time.Duration // how long the demo took to be ready
}

func (d *demoEnv) close() {
	if d.eng != nil {
		d.eng.Close()
	}
	d.sb.Close()
}

// startDemo starts the clusters and clients, records the mirror a-to-b on
// B through engine.Admin, starts its topics and joins an instance to it.
func startDemo(ctx context.Context, log *slog.Logger, opts sandbox.Options) (*demoEnv, error) {
	start := time.Now()
	opts.Logger = log
	sb, err := sandbox.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	env := &demoEnv{sb: sb}
	adm, err := engine.NewAdmin(ctx, sb.Bootstrap(sandbox.SideB), nil, 30*time.Second)
	if err != nil {
		env.close()
		return nil, err
	}
	defer adm.Close()
	cfg := props.FromMap(map[string]string{
		"bootstrap.servers":      strings.Join(sb.SourceBootstrap(), ","),
		props.KeyGapPolicy:       "fill",
		props.KeyMetadataRefresh: fmt.Sprint(demoRefreshInterval.Milliseconds()),
	})
	if _, err := adm.CreateMirror(ctx, demoMirror, cfg, false); err != nil {
		env.close()
		return nil, fmt.Errorf("create mirror %s: %w", demoMirror, err)
	}
	sel, err := engine.ParseTopics(strings.Join(sandbox.TopicNames(), ","))
	if err != nil {
		env.close()
		return nil, err
	}
	if _, err := adm.Start(ctx, demoMirror, sel, nil); err != nil {
		env.close()
		return nil, fmt.Errorf("start mirror %s: %w", demoMirror, err)
	}
	env.eng, err = engine.New(ctx, engine.Config{Destination: sb.Bootstrap(sandbox.SideB), Instance: "demo", Logger: log})
	if err != nil {
		env.close()
		return nil, err
	}
	if err := env.eng.Join(ctx); err != nil {
		env.close()
		return nil, err
	}
	env.started = time.Since(start)
	return env, nil
}

// runDemo starts the two embedded clusters with traffic and the mirror
// a-to-b, then runs the console with the drill panel, the plain console,
// progress lines, or the whole drill unattended. With sandboxOnly it
// starts the clusters and traffic only.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, sandboxOnly bool) int {
	name := "demo"
	if sandboxOnly {
		name = "sandbox"
	}
	fs := flag.NewFlagSet("kmirror "+name, flag.ContinueOnError)
	var headless, noDrill, script, ascii *bool
	var theme, logFile, report *string
	var stepTimeout *time.Duration
	if !sandboxOnly {
		headless = fs.Bool("headless", false, "print progress lines instead of opening the console")
		noDrill = fs.Bool("no-drill", false, "open the plain console, without the guided DR drill panel")
		script = fs.Bool("drill-script", false, "run every step of the DR drill unattended, print the step log and write the report; exit 1 if a step fails")
		report = fs.String("report", "", "the drill report's path without extension (PATH.md, PATH.json); default kmirror-drill-<time> in the current directory")
		stepTimeout = fs.Duration("step-timeout", 90*time.Second, "how long a drill step waits for the clusters")
		theme = fs.String("theme", "", "console theme: dark, light or high-contrast (default: from the terminal's background)")
		ascii = fs.Bool("ascii", false, "ASCII borders and glyphs (default when the locale is not UTF-8)")
		logFile = fs.String("log-file", defaultLogPath(os.Getenv, "demo.log"), "where the engine writes its log")
	}
	// The sandbox logs its brokers to stderr; the demo logs the engine and
	// the brokers to its log file, as JSON unless told otherwise.
	var logs logging.Flags
	if sandboxOnly {
		logs.Register(fs, "info", "text")
	} else {
		logs.Register(fs, "info", "json")
	}
	var scenario *string
	var rtt *time.Duration
	var bw *int64
	if !sandboxOnly {
		scenario = fs.String("scenario", drill.ScenarioRegionLoss.String(), "what the drill rehearses: "+scenarioNames())
		rtt = fs.Duration("link-rtt", demoLinkRTT, "round trip the WAN link between A's region and the mirror adds")
		bw = fs.Int64("link-bandwidth", demoLinkBandwidth, "the WAN link's bandwidth cap in bytes per second (0: none)")
	}
	if code, ok := parseMode(fs, name, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror %s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage
	}
	if err := logs.Validate(); err != nil {
		fmt.Fprintf(stderr, "kmirror %s: %v\n", name, err)
		return exitUsage
	}

	var sc drill.Scenario
	if !sandboxOnly {
		var err error
		if sc, err = drill.ParseScenario(*scenario); err != nil {
			fmt.Fprintf(stderr, "kmirror demo: --scenario: %v\n", err)
			return exitUsage
		}
		if *rtt < 0 || *bw < 0 {
			fmt.Fprintf(stderr, "kmirror demo: --link-rtt and --link-bandwidth cannot be negative\n")
			return exitUsage
		}
	}
	if sandboxOnly {
		start := time.Now()
		log, _ := logs.New(stderr) // validated above
		sb, err := sandbox.Start(ctx, sandbox.Options{Logger: log})
		if err != nil {
			fmt.Fprintf(stderr, "kmirror sandbox: %v\n", err)
			return exitFail
		}
		defer sb.Close()
		sb.Describe(stdout)
		fmt.Fprintf(stdout, "sandbox ready in %s; traffic is running on A; press Ctrl-C to stop\n", time.Since(start).Round(time.Millisecond))
		<-ctx.Done()
		return exitOK
	}

	lf, err := openLog(*logFile)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror demo: log file: %v\n", err)
		return exitFail
	}
	defer lf.Close()
	log, _ := logs.New(lf) // validated above
	env, err := startDemo(ctx, log, demoOptions(*rtt, *bw))
	if err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	defer env.close()
	env.sb.Describe(stdout)
	fmt.Fprintf(stdout, "mirror %s recorded in __mirror_state on B and running; demo ready in %s; log: %s\n",
		demoMirror, env.started.Round(time.Millisecond), *logFile)
	fmt.Fprintf(stdout, "drill scenario %s: %s\n", sc, sc.Summary())

	path := reportPath(*report)
	newDrill := func() (*drill.Drill, error) {
		return drill.New(drill.Config{Target: drill.SandboxTarget(env.sb, sc), Engine: env.eng, Mirror: demoMirror, ReportPath: path, StepTimeout: *stepTimeout})
	}
	switch {
	case *script:
		// Preflight waits for the group's offsets on B itself.
		return runDrillScript(ctx, newDrill, stdout, stderr)
	case *headless:
		return demoHeadless(ctx, env.eng, stdout)
	}
	opts := tui.Options{Theme: *theme, ASCII: *ascii, LogPath: *logFile}
	if !*noDrill {
		d, err := newDrill()
		if err != nil {
			fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
			return exitFail
		}
		defer d.Close()
		opts.Drill = d
	}
	if err := tui.Run(ctx, env.eng, opts); err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	return exitOK
}

// demoRefreshInterval is the demo mirror's mirror.metadata.refresh.interval.ms,
// which paces its group offset sync: a demo setting, not the product's
// default (60 s). A drill stepped through at a person's pace then fails
// over with the group's offsets on B a couple of seconds old, as a real
// deployment that syncs often would, and the drill's "processed twice"
// counts what such a deployment sees (commit interval plus sync interval).
const demoRefreshInterval = 2 * time.Second

// The demo's WAN link to A's region: a round trip between distant regions
// and a cap well above the demo's traffic, so the mirror runs a few
// hundred milliseconds behind without falling further back.
const (
	demoLinkRTT       = 150 * time.Millisecond
	demoLinkBandwidth = 512 << 10
)

// demoOptions are the demo sandbox's: A in another region, behind the link.
func demoOptions(rtt time.Duration, bandwidth int64) sandbox.Options {
	return sandbox.Options{Link: &linkproxy.Options{RTT: rtt, Bandwidth: bandwidth}}
}

func scenarioNames() string {
	var out []string
	for _, s := range drill.Scenarios {
		out = append(out, s.String())
	}
	return strings.Join(out, ", ")
}

// reportPath is the drill report's path without extension: the --report
// flag, or kmirror-drill-<time> in the current directory.
func reportPath(flag string) string {
	if flag == "" {
		flag = "kmirror-drill-" + time.Now().Format("20060102-150405")
	}
	return strings.TrimSuffix(strings.TrimSuffix(flag, ".json"), ".md")
}

// realDrill prepares the drill of a mirror between real clusters for
// kmirror console --drill: mirror is the one named, or the only one B's
// __mirror_state records.
func realDrill(ctx context.Context, eng *engine.Engine, bootstrap []string, security map[string]string, mirror, report string, stepTimeout time.Duration) (*drill.Drill, error) {
	adm, err := engine.NewAdmin(ctx, bootstrap, security, 30*time.Second)
	if err != nil {
		return nil, err
	}
	cat, err := adm.Catalog(ctx)
	adm.Close()
	if err != nil {
		return nil, fmt.Errorf("read __mirror_state: %w", err)
	}
	names := cat.MirrorNames()
	switch {
	case mirror != "" && !slices.Contains(names, mirror):
		return nil, fmt.Errorf("mirror %s does not exist on %s (mirrors: %s)", mirror, strings.Join(bootstrap, ","), orNone(names))
	case mirror == "" && len(names) != 1:
		return nil, fmt.Errorf("--drill needs --mirror NAME: %s records %s", strings.Join(bootstrap, ","), orNone(names))
	case mirror == "":
		mirror = names[0]
	}
	target, err := drill.RealTarget(drill.RealConfig{Bootstrap: bootstrap, Security: security})
	if err != nil {
		return nil, err
	}
	return drill.New(drill.Config{Target: target, Engine: eng, Mirror: mirror, ReportPath: reportPath(report), StepTimeout: stepTimeout})
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no mirror"
	}
	return strings.Join(names, ", ")
}

// runDrillScript runs every drill step unattended.
func runDrillScript(ctx context.Context, newDrill func() (*drill.Drill, error), stdout, stderr io.Writer) int {
	d, err := newDrill()
	if err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return exitFail
	}
	defer d.Close()
	if err := d.Run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "kmirror demo: drill failed: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "drill complete: %s.md, %s.json\n", d.Status().ReportPath, d.Status().ReportPath)
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
