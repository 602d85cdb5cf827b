package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/partition"
)

// defaultWaitTimeout is how long --wait waits unless --timeout says.
const defaultWaitTimeout = 60 * time.Second

// warnUnowned tells the operator when no live instance owns topics: the
// command is recorded (exit 0), but nothing executes it yet. Not knowing is
// not worth failing a command that was recorded, so a read error is
// reported as such.
func warnUnowned(ctx context.Context, adm *engine.Admin, mirror string, topics []string, stderr io.Writer) {
	unowned, err := adm.Unowned(ctx, mirror, topics)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "kmirror: warning: could not read the instances' heartbeats: %s\n", oneLine(err))
	case len(unowned) > 0:
		fmt.Fprintf(stderr, "kmirror: warning: no live kmirror instance owns %s topics %s: the command is recorded and runs when an instance starts\n",
			mirror, strings.Join(unowned, ", "))
	}
}

// wait waits for the state a stop, pause or resume leads to and prints
// each partition's last mirrored offset; after a stop, also what the
// failover left behind on the source.
func wait(ctx context.Context, adm *engine.Admin, kind engine.CommandKind, mirror string, topics []string, timeout time.Duration, stdout io.Writer) error {
	want := map[engine.CommandKind]partition.State{engine.CmdStop: partition.Stopped, engine.CmdPause: partition.Paused, engine.CmdResume: partition.Mirroring}[kind]
	rows, err := adm.Wait(ctx, mirror, topics, want, timeout)
	if err != nil {
		return err
	}
	stop := kind == engine.CmdStop
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	head := "MIRROR\tTOPIC\tPARTITION\tSTATE\tLAST-MIRRORED-OFFSET"
	if stop {
		head += "\tDESTINATION-OFFSET\tSOURCE-OFFSET\tNOT-MIRRORED"
	}
	fmt.Fprintln(tw, head)
	var lost, unknown int64
	for _, r := range rows {
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s", r.Mirror, r.Topic, r.Partition, r.State, offset(r.LastMirrorOffset))
		if stop {
			line += "\t" + offset(r.DestinationOffset)
			if r.SourceOffset < 0 {
				unknown++
				line += "\t-\tunknown, source unreachable"
			} else {
				n := notMirrored(r)
				lost += n
				line += fmt.Sprintf("\t%d\t%d", r.SourceOffset, n)
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("%d partitions %s", len(rows), want)
	if stop {
		switch {
		case unknown == 0:
			summary += fmt.Sprintf("; records not mirrored: %d", lost)
		case unknown == int64(len(rows)):
			summary += "; records not mirrored: unknown, source unreachable"
		default:
			summary += fmt.Sprintf("; records not mirrored: %d where the source answers, unknown for %d partitions (source unreachable)", lost, unknown)
		}
	}
	fmt.Fprintln(stdout, summary)
	return nil
}

// notMirrored is how many offsets the source holds beyond what was
// mirrored: source high watermark - (last mirrored offset + 1). A STOPPED
// partition's last mirrored offset is exact: the stop reads it from the
// destination (the last source record there, never the fence's marker or an
// aborted transaction's, which lie beyond it). Before STOPPED the recorded
// offset is a checkpoint (written every mirror.state.checkpoint.interval.ms)
// and may lag what was appended; offsets being identical, the destination's
// log end is then the better bound when it is further.
func notMirrored(r engine.DescribeRow) int64 {
	have := r.LastMirrorOffset + 1
	if r.State != partition.Stopped.String() && r.DestinationOffset > have {
		have = r.DestinationOffset
	}
	return max(0, r.SourceOffset-have)
}

// offset prints an offset, "-" for none.
func offset(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
