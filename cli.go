package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/props"
)

// connectTimeout bounds how long an action waits for an unreachable cluster.
const connectTimeout = 30 * time.Second

// usageError is a command line the program cannot act on.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// actionFlags are the flags of kafka-cluster-mirrors.sh-style actions.
type actionFlags struct {
	bootstrap, commandConfig   string
	create, del, list, descr   bool
	start, stop, pause, resume bool
	recover, rebuild           bool
	mirror, mirrorConfig       string
	topics, exclude            string
	failed, asJSON             bool
	allowPlaintext             bool
	wait                       bool
	timeout                    time.Duration
	timeoutSet                 bool
}

func runAction(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f actionFlags
	fs := flag.NewFlagSet("kmirror", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.bootstrap, "bootstrap-server", "", "destination cluster bootstrap servers (host:port,...)")
	fs.StringVar(&f.commandConfig, "command-config", "", "properties file with the destination client's security settings")
	fs.BoolVar(&f.create, "create", false, "create a mirror")
	fs.BoolVar(&f.del, "delete", false, "delete a mirror")
	fs.BoolVar(&f.list, "list", false, "list mirrors")
	fs.BoolVar(&f.descr, "describe", false, "describe mirrored partitions")
	fs.BoolVar(&f.start, "start", false, "start mirroring topics")
	fs.BoolVar(&f.stop, "stop", false, "stop mirroring topics (failover)")
	fs.BoolVar(&f.pause, "pause", false, "pause mirroring topics")
	fs.BoolVar(&f.resume, "resume", false, "resume paused topics")
	fs.BoolVar(&f.recover, "recover", false, "recover FAILED partitions")
	fs.BoolVar(&f.rebuild, "rebuild", false, "with --recover: rebuild diverged topics")
	fs.StringVar(&f.mirror, "mirror", "", "mirror name")
	fs.StringVar(&f.mirrorConfig, "mirror-config", "", "properties file of the mirror (source bootstrap.servers, security, mirror.* settings)")
	fs.StringVar(&f.topics, "topics", "", "comma-separated topic names or an RE2 regex")
	fs.StringVar(&f.exclude, "exclude", "", "RE2 regex of topics not to start")
	fs.BoolVar(&f.failed, "failed", false, "with --describe: only FAILED partitions, with RETRY and ERROR")
	fs.BoolVar(&f.asJSON, "json", false, "with --describe: print JSON")
	fs.BoolVar(&f.allowPlaintext, "allow-plaintext-secrets", false, "with --create: store literal secret values")
	fs.BoolVar(&f.wait, "wait", false, "with --stop, --pause or --resume: wait until every selected partition is STOPPED, PAUSED or MIRRORING")
	fs.DurationVar(&f.timeout, "timeout", defaultWaitTimeout, "with --wait: how long to wait")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "kmirror: %v\n\n%s", err, usage)
		return exitUsage
	}
	fs.Visit(func(fl *flag.Flag) { f.timeoutSet = f.timeoutSet || fl.Name == "timeout" })
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

func action(ctx context.Context, f *actionFlags, rest []string, stdout, stderr io.Writer) error {
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	var chosen []string
	for name, on := range map[string]bool{"--create": f.create, "--delete": f.del, "--list": f.list, "--describe": f.descr,
		"--start": f.start, "--stop": f.stop, "--pause": f.pause, "--resume": f.resume, "--recover": f.recover} {
		if on {
			chosen = append(chosen, name)
		}
	}
	if len(chosen) != 1 {
		return usagef("exactly one action is needed, got %d (%s)", len(chosen), strings.Join(chosen, " "))
	}
	if f.bootstrap == "" {
		return usagef("--bootstrap-server is required")
	}
	needMirror := !f.list && !f.descr
	if needMirror && f.mirror == "" {
		return usagef("%s needs --mirror", chosen[0])
	}
	if f.create && f.mirrorConfig == "" {
		return usagef("--create needs --mirror-config")
	}
	if f.start && f.topics == "" {
		return usagef("--start needs --topics")
	}
	if f.rebuild && !f.recover {
		return usagef("--rebuild goes with --recover")
	}
	if f.wait && !f.stop && !f.pause && !f.resume {
		return usagef("--wait goes with --stop, --pause or --resume")
	}
	if f.timeoutSet && (!f.wait || f.timeout <= 0) {
		return usagef("--timeout goes with --wait and must be positive")
	}
	var sel *engine.TopicSelector
	if f.topics != "" {
		s, err := engine.ParseTopics(f.topics)
		if err != nil {
			return usagef("%v", err)
		}
		sel = &s
	}
	var exclude *regexp.Regexp
	if f.exclude != "" {
		re, err := regexp.Compile("^(?:" + f.exclude + ")$")
		if err != nil {
			return usagef("--exclude %q: %v", f.exclude, err)
		}
		exclude = re
	}
	var mirrorProps props.Properties
	if f.create {
		p, err := readProps(f.mirrorConfig)
		if err != nil {
			return err
		}
		mirrorProps = p
	}
	security, err := commandConfig(f.commandConfig)
	if err != nil {
		return err
	}

	adm, err := engine.NewAdmin(ctx, strings.Split(f.bootstrap, ","), security, connectTimeout)
	if err != nil {
		return err
	}
	defer adm.Close()
	switch {
	case f.create:
		warnings, err := adm.CreateMirror(ctx, f.mirror, mirrorProps, f.allowPlaintext)
		for _, w := range warnings {
			fmt.Fprintf(stderr, "kmirror: warning: %s\n", w)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created mirror %s\n", f.mirror)
	case f.del:
		if err := adm.DeleteMirror(ctx, f.mirror); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted mirror %s\n", f.mirror)
	case f.list:
		return list(ctx, adm, stdout)
	case f.descr:
		return describe(ctx, adm, f, stdout, stderr)
	case f.start:
		topics, err := adm.Start(ctx, f.mirror, *sel, exclude)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "start recorded for %d topics of mirror %s: %s\n", len(topics), f.mirror, strings.Join(topics, ", "))
	default:
		kind := map[bool]engine.CommandKind{f.stop: engine.CmdStop, f.pause: engine.CmdPause, f.resume: engine.CmdResume, f.recover: engine.CmdRecover}[true]
		topics, err := adm.Control(ctx, kind, f.mirror, sel, f.rebuild)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s recorded for %d topics of mirror %s: %s\n", kind, len(topics), f.mirror, strings.Join(topics, ", "))
		warnUnowned(ctx, adm, f.mirror, topics, stderr)
		if f.wait {
			return wait(ctx, adm, kind, f.mirror, topics, f.timeout, stdout)
		}
	}
	return nil
}

// readProps parses a .properties file; errors name the file and line.
func readProps(path string) (props.Properties, error) {
	fh, err := os.Open(path)
	if err != nil {
		return props.Properties{}, err
	}
	defer fh.Close()
	p, err := props.Parse(fh)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// commandConfig reads the destination client's settings, resolving secret
// references.
func commandConfig(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	p, err := readProps(path)
	if err != nil {
		return nil, err
	}
	out := p.Map()
	for k, v := range out {
		r, err := props.Resolve(v, os.LookupEnv, os.ReadFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		out[k] = r
	}
	return out, nil
}

func list(ctx context.Context, adm *engine.Admin, stdout io.Writer) error {
	cat, err := adm.Catalog(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP-SERVER")
	for _, n := range cat.MirrorNames() {
		def := cat.Mirrors[n]
		var topics []string
		for _, t := range cat.TopicsOf(n) {
			topics = append(topics, t.Topic)
		}
		ts := strings.Join(topics, ",")
		if ts == "" {
			ts = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, ts, def.SourceClusterID, strings.Join(def.SourceBootstrap, ","))
	}
	return tw.Flush()
}

func describe(ctx context.Context, adm *engine.Admin, f *actionFlags, stdout, stderr io.Writer) error {
	rows, err := adm.Describe(ctx, f.mirror)
	if err != nil {
		return err
	}
	if f.failed {
		kept := rows[:0]
		for _, r := range rows {
			if r.State == "FAILED" {
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	if f.asJSON {
		if rows == nil {
			rows = []engine.DescribeRow{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	warnOutages(rows, stderr)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	// The KIP's columns come first and in its order; kmirror's own
	// (OWNER, HEARTBEAT) follow, so scripts that count columns still work.
	head := "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE"
	if f.failed {
		head += "\tRETRY\tERROR"
	}
	fmt.Fprintln(tw, head+"\tOWNER\tHEARTBEAT")
	for _, r := range rows {
		lag := "-" // unknown where either end is: never a reassuring 0
		if r.SourceOffset >= 0 && r.DestinationOffset >= 0 {
			lag = strconv.FormatInt(r.Lag, 10)
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s", r.Mirror, r.Topic, r.Partition, offset(r.SourceOffset), offset(r.DestinationOffset), lag, r.State)
		if f.failed {
			line += fmt.Sprintf("\t%d\t%s", r.RetryAttempt, r.ErrorMessage)
		}
		fmt.Fprintln(tw, line+"\t"+ownerColumns(r))
	}
	return tw.Flush()
}

// warnOutages says on stderr, once per mirror, that its source does not
// answer: the table's SOURCE-OFFSET and LAG are then unknown, not zero.
func warnOutages(rows []engine.DescribeRow, stderr io.Writer) {
	seen := map[string]bool{}
	for _, r := range rows {
		if r.SourceUnreachableSince == "" || seen[r.Mirror] {
			continue
		}
		seen[r.Mirror] = true
		fmt.Fprintf(stderr, "warning: mirror %s: its source is unreachable since %s: %s; source offsets and lag are unknown\n", r.Mirror, r.SourceUnreachableSince, r.SourceError)
	}
}

// ownerColumns are OWNER and HEARTBEAT: who runs the partition and how old
// its last heartbeat is, or why nobody runs it.
func ownerColumns(r engine.DescribeRow) string {
	owner := r.Owner
	if owner == "" {
		owner = "-"
	}
	age := "no heartbeat"
	if r.OwnerHeartbeatAgeMs >= 0 {
		d := time.Duration(r.OwnerHeartbeatAgeMs) * time.Millisecond
		if d < 10*time.Second {
			d = d.Round(100 * time.Millisecond)
		} else {
			d = d.Round(time.Second)
		}
		age = d.String() + " ago"
	}
	switch r.OwnerStatus {
	case engine.OwnerLive:
		return owner + "\t" + age
	case engine.OwnerNone:
		return owner + "\t-"
	}
	return owner + "\t" + r.OwnerStatus + " (" + age + ")"
}
