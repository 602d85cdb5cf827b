// Package kfakelog writes a kfake cluster's log lines to a *slog.Logger. It
// is apart from package logging, which the engine imports, so that only the
// sandbox and the tests link the fake cluster.
package kfakelog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// New returns a kfake cluster logger writing to l at the matching level.
func New(l *slog.Logger) kfake.Logger { return logger{l} }

type logger struct{ l *slog.Logger }

// levels are kfake's levels as slog's.
var levels = map[kfake.LogLevel]slog.Level{kfake.LogLevelError: slog.LevelError, kfake.LogLevelWarn: slog.LevelWarn,
	kfake.LogLevelInfo: slog.LevelInfo, kfake.LogLevelDebug: slog.LevelDebug}

func (k logger) Logf(level kfake.LogLevel, format string, args ...any) {
	lv, ok := levels[level]
	if !ok {
		lv = slog.LevelDebug // kfake's LogLevelNone, which no line carries
	}
	if k.l.Enabled(context.Background(), lv) { // kfake formats nothing before asking
		k.l.Log(context.Background(), lv, fmt.Sprintf(format, args...))
	}
}
