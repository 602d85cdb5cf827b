package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// modeHelp is the --help of one mode: what it does, then its flags.
var modeHelp = map[string]string{
	"run": `Usage: kmirror run --bootstrap-server B [flags]

A headless instance: it joins the destination's __mirror_state, mirrors the
topics of the shards the instances' group assigns it, and runs until SIGTERM
or Ctrl-C. Start several on one destination to share the mirrors.`,
	"console": `Usage: kmirror console --bootstrap-server B [flags]

The console: the mirrors of the destination, their partitions, lag and
events, read from __mirror_state and both clusters without joining the
instances' group; action keys unless --read-only. --run-instance also runs
an instance in this process.`,
	"demo": `Usage: kmirror demo [flags]

Two embedded clusters with live traffic, the mirror a-to-b, and the console
with the guided DR drill (n runs the next step, i adds a note). A is in
another region: the mirror reaches it across a modelled WAN link (--link-rtt,
--link-bandwidth), so it runs a few hundred milliseconds behind.

Scenarios (--scenario):
  planned      the producers stop first and the mirror catches up: RPO 0, the
               failback copies only B's delta
  region-loss  A's region is lost mid-stream: the records in flight are lost,
               the failback finds A DIVERGED and the rebuild quarantines them
  unclean      an unclean leader election on A loses a partition's newest
               records, then the region is lost`,
	"sandbox": `Usage: kmirror sandbox [--log-level L] [--log-format F]

Starts two embedded Kafka clusters, A (the source) and B (the destination),
creates topics on A and writes traffic to them, and prints both bootstrap
addresses; nothing is mirrored. Point kmirror's actions and a "kmirror run"
at them to try a mirror by hand:

  kmirror --bootstrap-server B --create --mirror a-to-b --mirror-config F
                                 (F holds bootstrap.servers=A)
  kmirror --bootstrap-server B --start --mirror a-to-b --topics 'orders.*'
  kmirror run --bootstrap-server B

It runs until Ctrl-C; the clusters live in memory and vanish with it.`,
}

// parseMode parses a mode's flags. --help prints the mode's help and its
// flags on stdout (exit 0); a bad flag says so on stderr (exit 2). ok is
// false when the caller should return code.
func parseMode(fs *flag.FlagSet, mode string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "%s\n", modeHelp[mode])
		if flags := flagList(fs); flags != "" {
			fmt.Fprintf(stdout, "\nFlags:\n%s", flags)
		}
		return exitOK, false
	default:
		fmt.Fprintf(stderr, "kmirror %s: %v\nRun \"kmirror %s --help\" for its flags.\n", mode, err, mode)
		return exitUsage, false
	}
}

// flagList lists a flag set in --flag style, as every kmirror help does.
func flagList(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		fmt.Fprintf(&b, "\n        %s", usage)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	return b.String()
}
