package logging

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kgo returns a franz-go client logger writing to l at the matching level
// (franz-go's debug, info, warn and error are slog's), with franz-go's
// "err" key renamed to Error. franz-go asks Level before it builds a line,
// so a quiet logger costs the client nothing.
func Kgo(l *slog.Logger) kgo.Logger {
	lv, ok := enabled(l)
	level := kgo.LogLevelNone
	if ok {
		level = map[slog.Level]kgo.LogLevel{slog.LevelDebug: kgo.LogLevelDebug, slog.LevelInfo: kgo.LogLevelInfo,
			slog.LevelWarn: kgo.LogLevelWarn, slog.LevelError: kgo.LogLevelError}[lv]
	}
	return kgoLogger{l: l, level: level}
}

// KgoRaw is Kgo for a client that only sends raw requests (never
// produces or consumes): franz-go's info lines there are its consumer
// bookkeeping of the topics kmirror purges from the client's cache after
// each metadata request, one line naming every topic each time, so they
// are logged at debug. Warnings and errors keep their level.
func KgoRaw(l *slog.Logger) kgo.Logger {
	k := Kgo(l).(kgoLogger)
	k.infoAsDebug = true
	if k.level == kgo.LogLevelInfo {
		k.level = kgo.LogLevelWarn
	}
	return k
}

type kgoLogger struct {
	l           *slog.Logger
	level       kgo.LogLevel
	infoAsDebug bool
}

func (k kgoLogger) Level() kgo.LogLevel { return k.level }

// slogLevel is franz-go's level as slog's (debug for LogLevelNone, which
// no line carries).
func slogLevel(level kgo.LogLevel) slog.Level {
	switch level {
	case kgo.LogLevelError:
		return slog.LevelError
	case kgo.LogLevelWarn:
		return slog.LevelWarn
	case kgo.LogLevelInfo:
		return slog.LevelInfo
	case kgo.LogLevelDebug, kgo.LogLevelNone:
	}
	return slog.LevelDebug
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slogLevel(level)
	if lv == slog.LevelInfo && k.infoAsDebug {
		lv = slog.LevelDebug
	}
	if !k.l.Enabled(context.Background(), lv) {
		return
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		if keyvals[i] == "err" {
			keyvals[i] = Error
		}
	}
	k.l.Log(context.Background(), lv, msg, keyvals...)
}
