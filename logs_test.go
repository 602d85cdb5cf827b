package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/enginetest"
)

// TestBadLogFlagsAreUsageErrors: every mode and the actions take
// --log-level and --log-format, and a bad value is a one-line usage error.
func TestBadLogFlagsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--bootstrap-server", "127.0.0.1:1"},
		{"console", "--bootstrap-server", "127.0.0.1:1"},
		{"demo"},
		{"sandbox"},
		{"bench"},
		{"--bootstrap-server", "127.0.0.1:1", "--list"},
	} {
		for _, bad := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{}, args...), bad...), &stdout, &stderr)
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if code != exitUsage || !strings.Contains(first, bad[0]+` "`+bad[1]+`"`) {
				t.Errorf("%v %v: exit %d, stderr %q; want %d naming %s", args, bad, code, first, exitUsage, bad[0])
			}
		}
	}
}

// TestRunLogsJSONAndServesHealth runs the CLI actions and a `kmirror run`
// with --log-format json: each writes JSON lines only, with the shared
// attribute keys and no placeholder partition; the instance's start is one
// summary line; /healthz and /readyz answer next to /metrics.
func TestRunLogsJSONAndServesHealth(t *testing.T) {
	src, dst := enginetest.Pair(t)
	src.CreateTopic(t, "orders", 3, nil)
	enginetest.Produce(t, src.Client(t), "orders", 3, 30, "o")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "m.properties")
	if err := os.WriteFile(cfg, []byte("bootstrap.servers="+strings.Join(src.Addrs(), ",")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := strings.Join(dst.Addrs(), ",")
	for _, args := range [][]string{
		{"--create", "--mirror", "a-to-b", "--mirror-config", cfg},
		{"--start", "--mirror", "a-to-b", "--topics", "orders"},
	} {
		// A franz-go client may log its last line (waiting for a new
		// topic's metadata) from a goroutine of its own after the
		// action returned: the log's writer is shared.
		var stdout bytes.Buffer
		var stderr lockedBuffer
		if code := run(append([]string{"--bootstrap-server", b, "--log-level", "info", "--log-format", "json"}, args...), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		var done map[string]any
		for _, l := range enginetest.JSONLines(t, stderr.String()) {
			if l["msg"] == "action done" {
				done = l
			}
		}
		if done["action"] != strings.TrimPrefix(args[0], "--") || done["mirror"] != "a-to-b" {
			t.Errorf("%v: action done line %v, want one naming the action and the mirror", args, done)
		}
		t.Logf("CLI action %s: %s", args[0], strings.TrimSpace(stderr.String()))
	}

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr enginetest.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- runInstance(ctx, []string{"--bootstrap-server", b, "--instance", "json-test", "--heartbeat-interval", "200ms",
			"--log-format", "json", "--metrics-addr", "127.0.0.1:0", "--metrics-granularity", "topic"}, &stdout, &stderr, false)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("run exited %d", code)
		}
	}()
	addrRe := regexp.MustCompile(`metrics at http://(\S+)/metrics`)
	var base string
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		m := addrRe.FindStringSubmatch(stdout.String())
		if m == nil {
			return false, "no metrics address on stdout: " + stdout.String()
		}
		base = "http://" + m[1]
		return true, ""
	})
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		code, body := get("/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz %d %q", code, body)
	})
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		_, body := get("/metrics")
		return strings.Contains(body, `kmirror_topic_partitions{mirror="a-to-b",state="MIRRORING",topic="orders"} 3`) &&
			strings.Contains(body, "kmirror_build_info{"), "metrics lack the topic's 3 MIRRORING partitions or the build info"
	})
	enginetest.Wait(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "came up"), "no start-up summary in the log"
	})
	for _, l := range stderr.Lines(t) {
		if p, ok := l["partition"].(float64); ok && p < 0 {
			t.Errorf("placeholder partition: %v", l)
		}
		if l["level"] == "INFO" && l["to"] == "MIRRORING" {
			t.Errorf("a partition's start at info: %v", l)
		}
	}
	t.Logf("run:\n%s", stderr.String())
}

// lockedBuffer is a bytes.Buffer that goroutines may write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
