package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/metrics"
)

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitStatus waits until url answers want with a body containing has,
// and returns the body.
func waitStatus(t *testing.T, url string, want int, has string, timeout time.Duration) string {
	t.Helper()
	var body string
	enginetest.Wait(t, timeout, func() (bool, string) {
		code, b, err := get(url)
		body = b
		return err == nil && code == want && strings.Contains(b, has), fmt.Sprintf("%s: %d %q %v, want %d with %q", url, code, b, err, want, has)
	})
	return body
}

// TestReadinessFollowsDestination: an instance's /readyz answers 200 once
// it joined the instances' group, owns shards and the destination
// answers; 503 naming the destination when the destination's network
// goes away; 200 again when it is back. /healthz answers throughout.
func TestReadinessFollowsDestination(t *testing.T) {
	n := enginetest.NewNetwork()
	dst := enginetest.NewCluster(t, "kmirror-test-destination", kfake.ListenFn(n.Listen))
	ctx := context.Background()
	eng, err := engine.New(ctx, engine.Config{Destination: dst.Addrs(), Instance: "ready-test", HeartbeatInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	ms, err := metrics.Start("127.0.0.1:0", eng.Snapshot, metrics.Config{Health: eng.Health})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Close() })
	base := "http://" + ms.Addr().String()

	// Not joined yet: not ready, but alive.
	if code, body, err := get(base + "/readyz"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "FAIL joined") {
		t.Fatalf("/readyz before Join: %d %q %v, want 503 naming joined", code, body, err)
	}
	if code, _, err := get(base + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d %v", code, err)
	}
	if err := eng.Join(ctx); err != nil {
		t.Fatal(err)
	}
	body := waitStatus(t, base+"/readyz", http.StatusOK, "", 60*time.Second)
	for _, c := range []string{"ok   joined", "ok   shards", "ok   destination"} {
		if !strings.Contains(body, c) {
			t.Errorf("/readyz %q lacks %q", body, c)
		}
	}

	// The instance may lose its shards first (the group's session ends);
	// the destination check must fail on its own account.
	n.Down("")
	waitStatus(t, base+"/readyz", http.StatusServiceUnavailable, "FAIL destination: does not answer", 60*time.Second)
	if code, _, err := get(base + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz with the destination down: %d %v, want 200: the process is alive", code, err)
	}
	metricsBody := scrape(t, base+"/metrics")
	if v, ok := series(metricsBody, "kmirror_instance_ready", `check="destination",kmirror_instance="ready-test"`); !ok || v != "0" {
		t.Errorf("kmirror_instance_ready{check=destination} = %q (found %v), want 0", v, ok)
	}

	n.Up()
	waitStatus(t, base+"/readyz", http.StatusOK, "", 60*time.Second)
}
