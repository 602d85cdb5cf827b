package enginetest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// LogBuffer collects what many goroutines write, a log for instance.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines parses every line written so far as a JSON object (a log written
// with --log-format json); a line that is not one fails the test.
func (b *LogBuffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	return JSONLines(t, b.String())
}

// JSONLines parses every line of out as a JSON object.
func JSONLines(t testing.TB, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		lines = append(lines, m)
	}
	return lines
}
