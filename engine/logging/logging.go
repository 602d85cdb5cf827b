// Package logging is kmirror's log set-up: the attribute keys every log
// line uses, the --log-level and --log-format flags of every mode, and the
// bridges that send franz-go's client log (and kfake's, in the sandbox)
// into the same logger.
package logging

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Attribute keys, one place for every log line kmirror writes, so lines of
// the engine, the franz-go bridge and the modes stay joinable in a log
// search (mirror=a-to-b topic=orders partition=3).
const (
	Mirror     = "mirror"
	Topic      = "topic"
	Partition  = "partition"
	Offset     = "offset"
	From       = "from" // a state transition's old state
	To         = "to"   // a state transition's new state
	Error      = "error"
	Cluster    = "cluster"    // "source" or "destination"
	Partitions = "partitions" // a count, in summaries
	Elapsed    = "elapsed"    // how long something took, in summaries
	Action     = "action"     // a CLI action (create, stop, ...)
	Key        = "key"        // a __mirror_state record's key
	Instance   = "instance"   // an instance's name
	Version    = "version"    // kmirror's release and commit
	Bootstrap  = "bootstrap"  // a cluster's bootstrap servers

	// Mirrored transactions.
	TxnID         = "txn_id"
	ProducerID    = "producer_id"
	ProducerEpoch = "producer_epoch"
	NextSequence  = "next_sequence"
	Timeout       = "timeout"
)

// Levels are the names --log-level takes, quietest last.
var Levels = []string{"debug", "info", "warn", "error"}

// Formats are the names --log-format takes.
var Formats = []string{"text", "json"}

// Flags are a mode's --log-level and --log-format.
type Flags struct {
	Level, Format string
}

// Register declares --log-level and --log-format on fs with the mode's
// defaults.
func (f *Flags) Register(fs *flag.FlagSet, level, format string) {
	fs.StringVar(&f.Level, "log-level", level, "log level: "+strings.Join(Levels, ", "))
	fs.StringVar(&f.Format, "log-format", format, "log line format: text (key=value) or json (one object a line)")
}

// ParseLevel turns a --log-level name into a slog level.
func ParseLevel(name string) (slog.Level, error) {
	switch strings.ToLower(name) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want one of %s", name, strings.Join(Levels, ", "))
}

// New returns the logger the flags ask for, writing to w; a bad level or
// format is an error naming the flag.
func (f Flags) New(w io.Writer) (*slog.Logger, error) {
	level, err := ParseLevel(f.Level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.Format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", f.Format)
}

// Validate reports a bad level or format before anything is opened.
func (f Flags) Validate() error {
	_, err := f.New(io.Discard)
	return err
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// enabled is the quietest of debug, info, warn and error that l writes,
// and false when it writes none of them.
func enabled(l *slog.Logger) (slog.Level, bool) {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if l.Enabled(context.Background(), lv) {
			return lv, true
		}
	}
	return 0, false
}
