package kfakelog_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine/logging/kfakelog"
)

// TestLevels: kfake's lines reach the logger at their level, and the
// logger's level filters them.
func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	k := kfakelog.New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	k.Logf(kfake.LogLevelDebug, "request %d", 1)
	k.Logf(kfake.LogLevelWarn, "delete topic %s", "t")
	k.Logf(kfake.LogLevelError, "broker %d down", 2)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, m["level"].(string)+" "+m["msg"].(string))
	}
	if want := []string{"WARN delete topic t", "ERROR broker 2 down"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
}
