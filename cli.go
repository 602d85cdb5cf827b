package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/props"
)

// connectTimeout bounds how long an action waits for an unreachable cluster.
const connectTimeout = 30 * time.Second

// usageError is a command line the program cannot act on.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// actionSpec is one kafka-cluster-mirrors.sh action and the options it
// takes besides --bootstrap-server and --command-config. The table drives
// the check that an option belongs to the chosen action, the usage text's
// listing and shell completion.
type actionSpec struct {
	name    string
	options []string
}

var actionSpecs = []actionSpec{
	{"create", []string{"mirror", "mirror-config", "allow-plaintext-secrets"}},
	{"alter", []string{"mirror", "mirror-config", "allow-plaintext-secrets"}},
	{"delete", []string{"mirror"}},
	{"list", []string{"json"}},
	{"describe", []string{"mirror", "failed", "json"}},
	{"describe-config", []string{"mirror", "json"}},
	{"start", []string{"mirror", "topics", "exclude"}},
	{"stop", []string{"mirror", "topics", "all", "yes", "wait", "timeout"}},
	{"pause", []string{"mirror", "topics", "all", "wait", "timeout"}},
	{"resume", []string{"mirror", "topics", "all", "wait", "timeout"}},
	{"recover", []string{"mirror", "topics", "all", "rebuild"}},
}

// commonFlags go with every action.
var commonFlags = []string{"bootstrap-server", "command-config", "log-level", "log-format"}

// actionFlags are the flags of kafka-cluster-mirrors.sh-style actions.
type actionFlags struct {
	bootstrap, commandConfig string
	actions                  map[string]*bool
	mirror, mirrorConfig     string
	topics, exclude          string
	all, yes                 bool
	rebuild                  bool
	failed, asJSON           bool
	allowPlaintext           bool
	wait                     bool
	timeout                  time.Duration
	logs                     logging.Flags
	set                      map[string]bool // flags given on the command line
}

func (f *actionFlags) is(name string) bool { return *f.actions[name] }

// newActionFlagSet declares every action flag on f.
func newActionFlagSet(f *actionFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("kmirror", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.bootstrap, "bootstrap-server", "", "destination cluster bootstrap servers (host:port,...)")
	fs.StringVar(&f.commandConfig, "command-config", "", "properties file with the destination client's security settings")
	f.actions = map[string]*bool{}
	for _, a := range actionSpecs {
		f.actions[a.name] = fs.Bool(a.name, false, "the "+a.name+" action")
	}
	fs.StringVar(&f.mirror, "mirror", "", "mirror name")
	fs.StringVar(&f.mirrorConfig, "mirror-config", "", "properties file of the mirror (source bootstrap.servers, security, mirror.* settings)")
	fs.StringVar(&f.topics, "topics", "", "comma list of topic names and RE2 regexes")
	fs.StringVar(&f.exclude, "exclude", "", "comma list of topic names and RE2 regexes not to start")
	fs.BoolVar(&f.all, "all", false, "every topic of the mirror")
	fs.BoolVar(&f.yes, "yes", false, "with --stop of the whole mirror (no --topics): do not ask for the mirror name")
	fs.BoolVar(&f.rebuild, "rebuild", false, "with --recover: rebuild diverged topics")
	fs.BoolVar(&f.failed, "failed", false, "with --describe: only FAILED partitions, with RETRY and ERROR")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.BoolVar(&f.allowPlaintext, "allow-plaintext-secrets", false, "with --create or --alter: store literal secret values")
	fs.BoolVar(&f.wait, "wait", false, "with --stop, --pause or --resume: wait until every selected partition is STOPPED, PAUSED or MIRRORING")
	fs.DurationVar(&f.timeout, "timeout", defaultWaitTimeout, "with --wait: how long to wait")
	// Actions print their results and their one-line errors; the log (on
	// stderr) adds only franz-go's errors unless asked for more.
	f.logs.Register(fs, "error", "text")
	return fs
}

func runAction(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := actionFlags{set: map[string]bool{}}
	fs := newActionFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "kmirror: %v\n\n%s", err, usage)
		return exitUsage
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	err := action(ctx, &f, fs.Args(), stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kmirror: %v\n\n%s", err, usage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "kmirror: %s\n", oneLine(err))
		return exitFail
	}
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), engine.ErrOperation.Error()+": ", "")), " ")
}

// parsed is a command line checked for its action: what the action acts on.
type parsed struct {
	action  string
	sel     *engine.TopicSelector // nil: --all, or no topics to select
	exclude *regexp.Regexp
}

// check validates a command line without touching a cluster.
func check(f *actionFlags, rest []string) (parsed, error) {
	var p parsed
	if len(rest) > 0 {
		return p, usagef("unexpected argument %q", rest[0])
	}
	var chosen []string
	for _, a := range actionSpecs {
		if f.is(a.name) {
			chosen = append(chosen, "--"+a.name)
		}
	}
	if len(chosen) != 1 {
		return p, usagef("exactly one action is needed, got %d (%s)", len(chosen), strings.Join(chosen, " "))
	}
	p.action = strings.TrimPrefix(chosen[0], "--")
	spec := actionSpecs[slices.IndexFunc(actionSpecs, func(a actionSpec) bool { return a.name == p.action })]
	var foreign []string
	for _, o := range slices.Sorted(maps.Keys(f.set)) { // sorted: messages do not vary between runs
		if !slices.Contains(commonFlags, o) && f.actions[o] == nil && !slices.Contains(spec.options, o) {
			foreign = append(foreign, fmt.Sprintf("--%s goes with %s", o, actionsTaking(o)))
		}
	}
	if len(foreign) > 0 {
		return p, usagef("%s", strings.Join(foreign, "; "))
	}
	if f.bootstrap == "" {
		return p, usagef("--bootstrap-server is required")
	}
	if f.mirror == "" && p.action != "list" && p.action != "describe" {
		return p, usagef("%s needs --mirror", chosen[0])
	}
	if (p.action == "create" || p.action == "alter") && f.mirrorConfig == "" {
		return p, usagef("%s needs --mirror-config", chosen[0])
	}
	if err := f.logs.Validate(); err != nil {
		return p, usagef("%v", err)
	}
	if f.set["timeout"] && (!f.wait || f.timeout <= 0) {
		return p, usagef("--timeout goes with --wait and must be positive")
	}
	if f.yes && f.topics != "" {
		return p, usagef("--yes goes with --stop of the whole mirror (--stop --mirror N, or with --all), not with --topics")
	}
	if p.action == "start" && f.topics == "" {
		return p, usagef("--start needs --topics")
	}
	if slices.Contains(spec.options, "all") {
		switch {
		case f.topics == "" && !f.all && p.action == "stop":
			// kafka-cluster-mirrors.sh's failover: --stop --mirror N
			// stops the whole mirror (KIP-1279's walkthroughs). The
			// confirmation on a terminal is asked in action.
		case f.topics == "" && !f.all:
			return p, usagef("%s needs --topics, or --all for every topic of the mirror", chosen[0])
		case f.topics != "" && f.all:
			return p, usagef("%s takes --topics or --all, not both", chosen[0])
		}
	}
	if f.topics != "" {
		s, err := engine.ParseTopics(f.topics)
		if err != nil {
			return p, usagef("%v", err)
		}
		p.sel = &s
	}
	if f.exclude != "" {
		re, err := engine.ParseExclude(f.exclude)
		if err != nil {
			return p, usagef("%v", err)
		}
		p.exclude = re
	}
	return p, nil
}

// actionsTaking lists the actions that take an option: "--a, --b or --c".
func actionsTaking(option string) string {
	var names []string
	for _, a := range actionSpecs {
		if slices.Contains(a.options, option) {
			names = append(names, "--"+a.name)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func action(ctx context.Context, f *actionFlags, rest []string, stdout, stderr io.Writer) (err error) {
	p, err := check(f, rest)
	if err != nil {
		return err
	}
	if p.action == "stop" && p.sel == nil && !f.yes {
		if err := confirmStopAll(f.mirror, f.all, stderr); err != nil {
			return err
		}
	}
	var mirrorProps props.Properties
	if p.action == "create" || p.action == "alter" {
		if mirrorProps, err = readProps(f.mirrorConfig); err != nil {
			return err
		}
	}
	security, err := commandConfig(f.commandConfig, stderr)
	if err != nil {
		return err
	}

	log, _ := f.logs.New(stderr) // checked
	start := time.Now()
	adm, err := engine.NewAdmin(ctx, strings.Split(f.bootstrap, ","), security, connectTimeout,
		kgo.WithLogger(logging.Kgo(log.With(logging.Cluster, "destination"))))
	if err != nil {
		return err
	}
	defer adm.Close()
	defer func() {
		attrs := []any{logging.Action, p.action, logging.Elapsed, time.Since(start)}
		if f.mirror != "" {
			attrs = append(attrs, logging.Mirror, f.mirror)
		}
		if err != nil {
			log.Debug("action failed", append(attrs, logging.Error, err)...) // the error is on stderr already
			return
		}
		log.Info("action done", attrs...)
	}()
	switch p.action {
	case "create":
		warnings, err := adm.CreateMirror(ctx, f.mirror, mirrorProps, f.allowPlaintext)
		if err := configResult(f.mirrorConfig, warnings, err, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created mirror %s\n", f.mirror)
	case "alter":
		warnings, err := adm.AlterMirror(ctx, f.mirror, mirrorProps, f.allowPlaintext)
		if err := configResult(f.mirrorConfig, warnings, err, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "altered mirror %s: running instances apply the new configuration\n", f.mirror)
	case "delete":
		if err := adm.DeleteMirror(ctx, f.mirror); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted mirror %s\n", f.mirror)
	case "list":
		return list(ctx, adm, f.asJSON, stdout)
	case "describe":
		return describe(ctx, adm, f, stdout, stderr)
	case "describe-config":
		return describeConfig(ctx, adm, f.mirror, f.asJSON, stdout)
	case "start":
		topics, err := adm.Start(ctx, f.mirror, *p.sel, p.exclude)
		if err != nil {
			return err
		}
		if len(topics) == 0 {
			fmt.Fprintf(stdout, "no source topic matches %q yet: recorded for mirror %s; topics that match are started when they appear\n", f.topics, f.mirror)
			return nil
		}
		fmt.Fprintf(stdout, "start recorded for %d topics of mirror %s: %s\n", len(topics), f.mirror, strings.Join(topics, ", "))
	default:
		kind := map[string]engine.CommandKind{"stop": engine.CmdStop, "pause": engine.CmdPause, "resume": engine.CmdResume, "recover": engine.CmdRecover}[p.action]
		topics, err := adm.Control(ctx, kind, f.mirror, p.sel, f.rebuild)
		if err != nil {
			return err
		}
		if len(topics) == 0 {
			fmt.Fprintf(stdout, "%s recorded for mirror %s: it had no started topic; its standing --start patterns are cleared\n", kind, f.mirror)
			return nil
		}
		fmt.Fprintf(stdout, "%s recorded for %d topics of mirror %s: %s\n", kind, len(topics), f.mirror, strings.Join(topics, ", "))
		warnUnowned(ctx, adm, f.mirror, topics, stderr)
		if f.wait {
			return wait(ctx, adm, kind, f.mirror, topics, f.timeout, stdout)
		}
	}
	return nil
}

// configResult prints a mirror configuration's warnings and names the file
// in its errors, so the operator knows where "line 3" is.
func configResult(path string, warnings []string, err error, stderr io.Writer) error {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "kmirror: warning: %s: %s\n", path, w)
	}
	if err != nil && errors.Is(err, props.ErrInvalid) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}
