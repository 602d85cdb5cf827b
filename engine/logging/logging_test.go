package logging_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/logging"
)

func newJSON(t *testing.T, level string) (*bytes.Buffer, logging.Flags) {
	t.Helper()
	var buf bytes.Buffer
	return &buf, logging.Flags{Level: level, Format: "json"}
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestFlags: the flags' defaults are the mode's, every level and format
// named in Levels and Formats works, anything else is an error naming the
// flag.
func TestFlags(t *testing.T) {
	var f logging.Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs, "warn", "json")
	if err := fs.Parse(nil); err != nil || f.Level != "warn" || f.Format != "json" {
		t.Fatalf("defaults %+v, %v", f, err)
	}
	for _, l := range logging.Levels {
		for _, fm := range logging.Formats {
			if err := (logging.Flags{Level: l, Format: fm}).Validate(); err != nil {
				t.Errorf("%s/%s: %v", l, fm, err)
			}
		}
	}
	for _, bad := range []logging.Flags{{Level: "loud", Format: "text"}, {Level: "info", Format: "xml"}} {
		err := bad.Validate()
		if err == nil || (!strings.Contains(err.Error(), "--log-level") && !strings.Contains(err.Error(), "--log-format")) {
			t.Errorf("%+v: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestKgoBridge: franz-go's lines reach the logger at their own level, with
// "err" renamed to the shared key; Level tells franz-go what not to build;
// the raw-request variant logs franz-go's info at debug.
func TestKgoBridge(t *testing.T) {
	buf, f := newJSON(t, "info")
	l, err := f.New(buf)
	if err != nil {
		t.Fatal(err)
	}
	k := logging.Kgo(l)
	if k.Level() != kgo.LogLevelInfo {
		t.Errorf("Level %v at info, want INFO", k.Level())
	}
	k.Log(kgo.LogLevelDebug, "not shown")
	k.Log(kgo.LogLevelInfo, "joined", "group", "g")
	k.Log(kgo.LogLevelWarn, "unable to open connection", "err", "refused")
	k.Log(kgo.LogLevelError, "broken")
	got := lines(t, buf)
	want := []struct{ level, msg string }{{"INFO", "joined"}, {"WARN", "unable to open connection"}, {"ERROR", "broken"}}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["msg"] != w.msg {
			t.Errorf("line %d %v, want %s %s", i, got[i], w.level, w.msg)
		}
	}
	if got[1][logging.Error] != "refused" || got[1]["err"] != nil {
		t.Errorf("warn line %v, want error=refused and no err key", got[1])
	}

	buf.Reset()
	raw := logging.KgoRaw(l)
	if raw.Level() != kgo.LogLevelWarn {
		t.Errorf("raw Level %v at info, want WARN", raw.Level())
	}
	raw.Log(kgo.LogLevelInfo, "assigning partitions")
	raw.Log(kgo.LogLevelWarn, "kept")
	if got := lines(t, buf); len(got) != 1 || got[0]["msg"] != "kept" {
		t.Errorf("raw at info wrote %v, want only the warning", got)
	}

	buf, f = newJSON(t, "error")
	l, _ = f.New(buf)
	if lv := logging.Kgo(l).Level(); lv != kgo.LogLevelError {
		t.Errorf("Level %v at error, want ERROR", lv)
	}
}
